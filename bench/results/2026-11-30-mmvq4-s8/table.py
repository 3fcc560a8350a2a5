#!/usr/bin/env python3
"""table.py BENCH1 [BENCH2 …] [--ptxas SUMMARY]: the sweep as one table a type — per kernel
(the default, g1..g9) events and graph µs and % of d2d of each run, the mean graph µs, and
the kernel's registers/spills from run.sh's summary (ptxas -v). Marks the best mean graph
time of each type with *."""
import re, sys

LINE = re.compile(r"^(\S+)\s+4096x14336(?: (g\d|default) \((\d+) blocks\))?\s+1\s+([\d.]+)\s+[\d.]+\s+([\d.]+)%\s+\d+ \|\s+([\d.]+)\s+[\d.]+\s+([\d.]+)%")
FLOOR = re.compile(r"^(\S+)\s+floor: d2d copy of its bytes\s+-\s+([\d.]+)\s+[\d.]+\s+([\d.]+)%\s+\d+ \|\s+([\d.]+)\s+[\d.]+\s+([\d.]+)%")
args = sys.argv[1:]
regs = {}
if "--ptxas" in args:
    i = args.index("--ptxas")
    for line in open(args[i + 1]):
        m = re.match(r"strata_mmvq_(\w+?) regs (\d+) spill (\S+)", line)
        if m:
            regs[m.group(1)] = f"{m.group(2)} / {m.group(3)}"
    args = args[:i] + args[i + 2:]
runs = []
for path in args:
    rows, floors = {}, {}
    for line in open(path):
        m = LINE.match(line)
        if m:
            t, g = m.group(1), m.group(2) or "default"
            rows[(t, g)] = (float(m.group(4)), float(m.group(5)), float(m.group(6)), float(m.group(7)), m.group(3))
        m = FLOOR.match(line)
        if m:
            floors[m.group(1)] = (float(m.group(2)), float(m.group(3)), float(m.group(4)), float(m.group(5)))
    runs.append((rows, floors))
types = []
for rows, _ in runs:
    for t, _ in rows:
        if t not in types:
            types.append(t)
hdr = " | ".join(f"run {i+1} events µs (% d2d) | run {i+1} graph µs (% d2d)" for i in range(len(runs)))
print(f"| type | kernel | blocks | regs / spill (B) | {hdr} | mean graph µs |")
print("|---|---|---:|---|" + "---:|" * (2 * len(runs) + 1))
for t in types:
    ks = []
    for rows, _ in runs:
        for (tt, g) in rows:
            if tt == t and g not in ks:
                ks.append(g)
    means = {}
    for g in ks:
        v = [r[0][(t, g)][2] for r in runs if (t, g) in r[0]]
        means[g] = sum(v) / len(v)
    best = min(means, key=means.get)
    for g in ks:
        cells = []
        blocks = ""
        for rows, _ in runs:
            r = rows.get((t, g))
            if r:
                cells += [f"{r[0]:.2f} ({r[1]:.1f} %)", f"{r[2]:.2f} ({r[3]:.1f} %)"]
                blocks = r[4] or blocks
            else:
                cells += ["-", "-"]
        name = t if g == "default" else f"{t}_{g}"
        mark = " *" if g == best else ""
        print(f"| {t} | {g}{mark} | {blocks} | {regs.get(name, '?')} | {' | '.join(cells)} | {means[g]:.2f} |")
    for i, (_, floors) in enumerate(runs):
        if t in floors:
            f = floors[t]
            print(f"| {t} | d2d copy of its bytes (run {i+1}) | | | {f[0]:.2f} ({f[1]:.1f} %) | {f[2]:.2f} ({f[3]:.1f} %) |" + " |" * (2 * len(runs) - 1))
