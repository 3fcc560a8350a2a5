#!/usr/bin/env python3
"""ceiling.py BENCH1 [BENCH2 …]: the streaming ceiling (TestBenchDecode with STRATA_BENCH_CEIL)
beside each type's mmvq row, as markdown. Per type, the mean over the runs of: the issue-5 row
kernel (parity mmvqStdGeom: the first 4096x14336 n = 1 row a round), the copy of its bytes, the
ceiling's best configuration (events and graph view), the mmvq-order kernel, and the arithmetic
floor t_empty + bytes / 4.8 TB/s; every configuration's events median is in the bench files
(ceilcfg lines)."""
import re, sys
from collections import OrderedDict

ROW = re.compile(r"^(\S+)\s+(.+?)\s+(\d+|-)\s+([\d.]+)\s+[\d.]+\s+([\d.]+)%\s+(\d+) \|\s+(\S+)\s+\S+\s+(\S+?)%?$")
FLOOR = re.compile(r"^(\S+)\s+floor: empty launch \+ bytes/HBM peak\s+-\s+([\d.]+)\s+[\d.]+\s+([\d.]+)%\s+(\d+) \| \(t_empty ([\d.]+)")
data = OrderedDict()
d2d, cfgs = [], {}
for path in sys.argv[1:]:
    seen = set()
    for line in open(path):
        line = line.rstrip()
        m = re.match(r"d2d copy 1 GiB: ([\d.]+)", line)
        if m:
            d2d.append(float(m.group(1)))
        m = re.match(r"(\S+)\s+ceiling best: (\S+) grid (\d+)", line)
        if m:
            cfgs.setdefault(m.group(1), []).append(f"{m.group(2)[12:]} ×{m.group(3)}")
            continue
        m = FLOOR.match(line)
        if m:
            data.setdefault(m.group(1), {}).setdefault("floor", []).append((float(m.group(2)), float(m.group(3)), float(m.group(5))))
            continue
        m = ROW.match(line)
        if not m:
            continue
        t, shape = m.group(1), m.group(2)
        ev, evp = float(m.group(4)), float(m.group(5))
        gr = float(m.group(7)) if m.group(7) != "-" else float("nan")
        grp = float(m.group(8)) if m.group(8) != "-" else float("nan")
        key = None
        if shape.startswith("4096x14336") and m.group(3) == "1" and t not in seen:
            seen.add(t)
            key = "row"
        elif shape == "floor: d2d copy of its bytes":
            key = "copy"
        elif shape == "ceiling: stream best":
            key = "best"
        elif shape.startswith("ceiling: mmvq order"):
            key = "order"
        if key:
            data.setdefault(t, {}).setdefault(key, []).append((ev, evp, gr, grp))
mean = lambda v, i: sum(x[i] for x in v) / len(v)
print("d2d GB/s by run:", ", ".join(f"{x:.1f}" for x in d2d))
print()
print("| type | mmvq row: events µs (%) / graph % | copy of its bytes: events % / graph % | ceiling (best config): events µs (%) / graph µs (%) | mmvq order: events % / graph % | floor t_empty + bytes/4.8 TB/s: µs (%) | row / ceiling (events) |")
print("|---|---|---|---|---|---|---:|")
for t, d in data.items():
    def f(k, fmt):
        v = d.get(k)
        return fmt(v) if v else "–"
    row = f("row", lambda v: f"{mean(v, 0):.2f} ({mean(v, 1):.1f}) / {mean(v, 3):.1f}")
    cp = f("copy", lambda v: f"{mean(v, 1):.1f} / {mean(v, 3):.1f}")
    best = f("best", lambda v: f"{mean(v, 0):.2f} ({mean(v, 1):.1f}) / {mean(v, 2):.2f} ({mean(v, 3):.1f}); " + ", ".join(cfgs.get(t, [])))
    order = f("order", lambda v: f"{mean(v, 1):.1f} / {mean(v, 3):.1f}")
    fl = f("floor", lambda v: f"{mean(v, 0):.2f} ({mean(v, 1):.1f}); t_empty {mean(v, 2):.2f}")
    ratio = f"{mean(d['row'], 1) / mean(d['best'], 1) * 100:.0f} %" if "row" in d and "best" in d else "–"
    print(f"| {t} | {row} | {cp} | {best} | {order} | {fl} | {ratio} |")
