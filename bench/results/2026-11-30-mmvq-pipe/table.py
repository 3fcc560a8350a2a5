# table.py LOGDIR: n = 1, 4096x14336 per type and variant from the call's n1-<variant>-<round>.txt:
# mean of the rounds, per-launch events and graph view, µs and % of d2d.
import glob, os, re, sys, collections
d = sys.argv[1]
ev, gr, pe, pg = (collections.defaultdict(list) for _ in range(4))
order = []
for f in sorted(glob.glob(os.path.join(d, 'n1-*-*.txt'))):
    v = os.path.basename(f).split('-')[1]
    if v not in order:
        order.append(v)
    for l in open(f):
        m = re.match(r'^(\w+)\s+4096x14336\s+1\s+([\d.]+)\s+[\d.]+\s+([\d.]+)%\s+\d+\s+\|\s+([\d.]+)\s+[\d.]+\s+([\d.]+)%', l)
        if m:
            t = m.group(1)
            ev[t, v].append(float(m.group(2))); pe[t, v].append(float(m.group(3)))
            gr[t, v].append(float(m.group(4))); pg[t, v].append(float(m.group(5)))
pref = ['O', 'N'] + [v for v in order if v not in ('O', 'N')]
types = []
for (t, v) in ev:
    if t not in types:
        types.append(t)
mean = lambda x: sum(x) / len(x) if x else float('nan')
for name, a, p in (('per-launch events', ev, pe), ('graph view', gr, pg)):
    print(f"## {name}: µs (% of d2d), mean of {max(len(x) for x in a.values())} rounds")
    print('| type | ' + ' | '.join(pref) + ' |')
    print('|---|' + '---:|' * len(pref))
    for t in types:
        best = min(pref, key=lambda v: mean(a[t, v]) if a[t, v] else 1e9)
        cells = []
        for v in pref:
            s = f"{mean(a[t, v]):.2f} ({mean(p[t, v]):.1f})" if a[t, v] else '-'
            cells.append(f"**{s}**" if v == best else s)
        print(f"| {t} | " + ' | '.join(cells) + ' |')
    print()
