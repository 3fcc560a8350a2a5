# pertype.py LOGDIR: the README's n = 1 table (4096x14336) from the call's logs — per type:
# main (O) and the branch's defaults (N), each the mean of its two n1 rounds; the fastest other
# variant by the graph view; the d2d copy of the type's bytes (median over every run of the
# call). Cells: µs (% of d2d), events | graph. Also the spread of O's four runs (n1 and full).
import collections, glob, os, re, sys

d = sys.argv[1]
row = re.compile(r'^(\w+)\s+4096x14336\s+1\s+([\d.]+)\s+[\d.]+\s+([\d.]+)%\s+\d+\s+\|\s+([\d.]+)\s+[\d.]+\s+([\d.]+)%')
cpy = re.compile(r'^(\w+)\s+floor: d2d copy of its bytes\s+-\s+([\d.]+)\s+[\d.]+\s+([\d.]+)%\s+\d+\s+\|\s+([\d.]+)\s+[\d.]+\s+([\d.]+)%')
n1 = collections.defaultdict(list)   # (type, variant) -> [(ev, ev%, gr, gr%)]
allO = collections.defaultdict(list)  # type -> O's runs, n1 and full
cp = collections.defaultdict(list)
for f in sorted(glob.glob(os.path.join(d, '*-*-*.txt'))):
    kind, v, _ = os.path.basename(f)[:-4].split('-')
    if kind not in ('n1', 'full'):
        continue
    for l in open(f):
        m = row.match(l)
        if m:
            x = tuple(float(m.group(i)) for i in range(2, 6))
            if kind == 'n1':
                n1[m.group(1), v].append(x)
            if v == 'O':
                allO[m.group(1)].append(x)
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
print("| type | O (main) | N (branch defaults) | fastest other variant | it − O, graph | d2d copy of its bytes | O's 4 runs, graph max − min |")
print("|---|---|---|---|---:|---|---:|")
for t in types:
    o, n = mean(n1[t, 'O']), mean(n1[t, 'N'])
    others = [v for (tt, v) in n1 if tt == t and v not in ('O', 'N')]
    b = min(others, key=lambda v: mean(n1[t, v])[2])
    bx = mean(n1[t, b])
    g = [x[2] for x in allO[t]]
    print(f"| {t} | {cell(o)} | {cell(n)} | {b}: {cell(bx)} | {bx[2] - o[2]:+.2f} ({(bx[2] / o[2] - 1) * 100:+.1f} %) | {cell(med(cp[t]))} "
          f"| {max(g) - min(g):.2f} |")
