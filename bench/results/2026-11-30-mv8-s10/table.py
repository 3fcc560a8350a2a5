#!/usr/bin/env python3
"""table.py BENCH1 [BENCH2 …]: TestBenchDecode output (run.sh's bench1.txt, bench2.txt) as
markdown. Per type and case, every timed kernel with its events and graph µs (% of that run's
d2d) in each round of each run, then the mean over all rounds and runs; the copy of the type's
own bytes; a summary of n = 1 at 4096×14336 (best mean events kernel against the default)."""
import re, sys
from collections import OrderedDict

LINE = re.compile(r"^(\S+)\s+(.+?)\s+(\d+|-)\s+([\d.]+)\s+[\d.]+\s+([\d.]+)%\s+(\d+) \|\s+(\S+)\s+\S+\s+(\S+?)%?$")
cases = OrderedDict()  # (type, case, kernel, n) -> list of (run, ev, evpct, gr, grpct)
d2ds = []
for ri, path in enumerate(sys.argv[1:]):
    for line in open(path):
        m = re.match(r"d2d copy 1 GiB: ([\d.]+) GB/s", line)
        if m:
            d2ds.append(float(m.group(1)))
        m = LINE.match(line.rstrip())
        if not m:
            continue
        t, shape, n = m.group(1), m.group(2), m.group(3)
        k = "default"
        mm = re.match(r"(4096x14336) (g\d+|default) \(\d+ blocks\)$", shape)
        if mm:
            shape, k = mm.group(1), mm.group(2)
        mm = re.match(r"(experts \S+ \S+)(?: \(8 of 128\)| (g\d+))$", shape)
        if mm:
            shape, k = mm.group(1), mm.group(2) or "default"
        gr = float(m.group(7)) if m.group(7) != "-" else float("nan")
        grp = float(m.group(8)) if m.group(8) != "-" else float("nan")
        cases.setdefault((t, shape, n, k), []).append((ri + 1, float(m.group(4)), float(m.group(5)), gr, grp))
print("d2d GB/s by run:", ", ".join(f"{x:.1f}" for x in d2ds))
print()
print("| type | case | n | kernel | events µs (% d2d), each round | graph µs (% d2d), each round | mean events µs (%) | mean graph µs (%) |")
print("|---|---|---:|---|---|---|---:|---:|")
mean = {}
for (t, shape, n, k), v in cases.items():
    ev = sum(x[1] for x in v) / len(v)
    evp = sum(x[2] for x in v) / len(v)
    gr = sum(x[3] for x in v) / len(v)
    grp = sum(x[4] for x in v) / len(v)
    mean[(t, shape, n, k)] = (ev, evp, gr, grp, v)
    e = " ".join(f"{x[1]:.2f} ({x[2]:.1f})" for x in v)
    g = " ".join(f"{x[3]:.2f} ({x[4]:.1f})" for x in v)
    print(f"| {t} | {shape} | {n} | {k} | {e} | {g} | {ev:.2f} ({evp:.1f} %) | {gr:.2f} ({grp:.1f} %) |")
print()
print("n = 1 at 4096×14336: the default, each kernel timed, and the best mean events kernel")
print()
print("| type | default events µs (%) | default graph µs (%) | best kernel | its events µs (%) | graph µs (%) | events Δ | graph Δ | copy of its bytes events / graph % |")
print("|---|---:|---:|---|---:|---:|---:|---:|---:|")
types = []
for (t, shape, n, k) in mean:
    if t not in types:
        types.append(t)
for t in types:
    ks = {k: v for (tt, s, n, k), v in mean.items() if tt == t and s == "4096x14336" and n == "1"}
    if "default" not in ks:
        continue
    d = ks["default"]
    b = min(ks, key=lambda k: ks[k][0])
    bb = ks[b]
    cp = mean.get((t, "floor: d2d copy of its bytes", "-", "default"))
    cps = f"{cp[1]:.1f} / {cp[3]:.1f}" if cp else "-"
    print(f"| {t} | {d[0]:.2f} ({d[1]:.1f} %) | {d[2]:.2f} ({d[3]:.1f} %) | {b} | {bb[0]:.2f} ({bb[1]:.1f} %) | {bb[2]:.2f} ({bb[3]:.1f} %) | {100*(bb[0]/d[0]-1):+.1f} % | {100*(bb[2]/d[2]-1):+.1f} % | {cps} |")
print()
print("Expert shapes (8 of 128, one column): the default against the best mean events kernel")
print()
print("| type | shape | default events µs (%) | default graph µs (%) | best kernel | its events µs (%) | graph µs (%) | events Δ | graph Δ |")
print("|---|---|---:|---:|---|---:|---:|---:|---:|")
for t in types:
    for shape in ("experts gate/up 2048->768", "experts down 768->2048"):
        ks = {k: v for (tt, s, n, k), v in mean.items() if tt == t and s == shape}
        if "default" not in ks:
            continue
        d = ks["default"]
        b = min(ks, key=lambda k: ks[k][0])
        bb = ks[b]
        print(f"| {t} | {shape} | {d[0]:.2f} ({d[1]:.1f} %) | {d[2]:.2f} ({d[3]:.1f} %) | {b} | {bb[0]:.2f} ({bb[1]:.1f} %) | {bb[2]:.2f} ({bb[3]:.1f} %) | {100*(bb[0]/d[0]-1):+.1f} % | {100*(bb[2]/d[2]-1):+.1f} % |")
