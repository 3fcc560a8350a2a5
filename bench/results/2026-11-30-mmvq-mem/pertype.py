# pertype.py LOGDIR: the README's n = 1 tables (4096x14336) from the call's logs.
# Table 1, per type: main (O) and this branch (N), each the mean of its four runs (two n1
# rounds, two full runs), and N − O in the graph view; the d2d copy of the type's bytes
# (median over every run of the call); the spread (max − min, graph) of O's and N's four runs.
# Table 2, graph µs, the mean of the two n1 rounds of every tree (one form off each).
import collections, glob, os, re, sys

d = sys.argv[1]
row = re.compile(r'^(\w+)\s+4096x14336\s+1\s+([\d.]+)\s+[\d.]+\s+([\d.]+)%\s+\d+\s+\|\s+([\d.]+)\s+[\d.]+\s+([\d.]+)%')
cpy = re.compile(r'^(\w+)\s+floor: d2d copy of its bytes\s+-\s+([\d.]+)\s+[\d.]+\s+([\d.]+)%\s+\d+\s+\|\s+([\d.]+)\s+[\d.]+\s+([\d.]+)%')
n1 = collections.defaultdict(list)   # (type, tree) -> n1 rounds [(ev, ev%, gr, gr%)]
four = collections.defaultdict(list)  # (type, tree) -> n1 and full runs
cp = collections.defaultdict(list)
trees = []
for f in sorted(glob.glob(os.path.join(d, '*-*-*.txt'))):
    kind, v, _ = os.path.basename(f)[:-4].split('-')
    if kind not in ('n1', 'full'):
        continue
    if kind == 'n1' and v not in trees:
        trees.append(v)
    for l in open(f):
        m = row.match(l)
        if m:
            x = tuple(float(m.group(i)) for i in range(2, 6))
            if kind == 'n1':
                n1[m.group(1), v].append(x)
            four[m.group(1), v].append(x)
        m = cpy.match(l)
        if m:
            cp[m.group(1)].append(tuple(float(m.group(i)) for i in range(2, 6)))
mean = lambda xs: tuple(sum(c) / len(c) for c in zip(*xs))
med = lambda xs: tuple(sorted(c)[len(c) // 2] for c in zip(*xs))
cell = lambda x: f"{x[0]:.2f} ({x[1]:.1f}) \\| {x[2]:.2f} ({x[3]:.1f})"
types = []
for t, _ in n1:
    if t not in types:
        types.append(t)
print("| type | O (main) | N (this branch) | N − O, graph | d2d copy of its bytes | spread O / N, graph |")
print("|---|---|---|---:|---|---:|")
for t in types:
    o, n = mean(four[t, 'O']), mean(four[t, 'N'])
    so = [x[2] for x in four[t, 'O']]
    sn = [x[2] for x in four[t, 'N']]
    print(f"| {t} | {cell(o)} | {cell(n)} | {n[2] - o[2]:+.2f} ({(n[2] / o[2] - 1) * 100:+.1f} %) | {cell(med(cp[t]))} "
          f"| {max(so) - min(so):.2f} / {max(sn) - min(sn):.2f} |")
print()
order = ['O', 'N'] + [v for v in trees if v not in ('O', 'N')]
print("| type | " + " | ".join(order) + " |")
print("|---|" + "---:|" * len(order))
for t in types:
    print(f"| {t} | " + " | ".join(f"{mean(n1[t, v])[2]:.2f}" for v in order) + " |")
print()
# Table 3: main (O) against the kept configuration — each type's kernel is the one of the
# tree named (kept: the IQ types as D, Q6_K as Q, the rest as N; see the README) — the mean
# of all of that tree's runs at n = 1 (n1 rounds and full runs).
keep = {'iq2xs': 'D', 'iq3xxs': 'D', 'iq3s': 'D', 'iq1m': 'D', 'q6k': 'Q'}
print("| type | kept tree (runs) | O (main) | kept | kept − O, graph |")
print("|---|---|---|---|---:|")
for t in types:
    v = keep.get(t, 'N')
    o, k = mean(four[t, 'O']), mean(four[t, v])
    print(f"| {t} | {v} ({len(four[t, v])}) | {cell(o)} | {cell(k)} | {k[2] - o[2]:+.2f} ({(k[2] / o[2] - 1) * 100:+.1f} %) |")
