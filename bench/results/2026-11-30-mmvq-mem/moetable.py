# moetable.py LOGDIR: moe_decode layer µs (three launches) and the two-launch form (3+2),
# new / old, mean of the call's two bench-moe rounds, per type and model shape.
import collections, glob, os, re, sys
rows = collections.defaultdict(list)
for f in sorted(glob.glob(os.path.join(sys.argv[1], 'moe-*.txt'))):
    for l in open(f):
        m = re.match(r'^(new|old)\s+(\w+)\s+(\S+ \S+ \S+ \S+(?: \S+ \S+)?)\s+([\d.]+)\s+[\d.]+\s+[\d.]+\s+[\d.]+\s+[\d.]+\s+([\d.]+)', l)
        if m:
            rows[m.group(2), m.group(3).split('  ')[0].strip(), m.group(1)].append((float(m.group(4)), float(m.group(5))))
keys = []
for (t, sh, _) in rows:
    if (t, sh) not in keys:
        keys.append((t, sh))
mean = lambda xs: tuple(sum(c) / len(c) for c in zip(*xs))
print("| type | shape | layer new / old µs | 3+2 new / old µs |")
print("|---|---|---|---|")
for t, sh in keys:
    n, o = mean(rows[t, sh, 'new']), mean(rows[t, sh, 'old'])
    print(f"| {t} | {sh} | {n[0]:.2f} / {o[0]:.2f} ({(n[0] / o[0] - 1) * 100:+.1f} %) | {n[1]:.2f} / {o[1]:.2f} ({(n[1] / o[1] - 1) * 100:+.1f} %) |")
