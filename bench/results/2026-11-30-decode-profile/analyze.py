#!/usr/bin/env python3
"""analyze.py NCU.csv D2D_GBPS GRAPH_MS [TOKENS]: the per-kernel table of one resident decode
token from `ncu --page raw --csv` (graph nodes profiled as kernels): by kernel symbol,
launches/token, true µs/token (gpu__time_duration.sum), DRAM MB/token (read + written),
achieved GB/s and its share of the d2d ceiling; then the sum of kernel time against the
graph's ms/token (the difference is launch gaps and serialisation)."""
import csv, sys
from collections import defaultdict

path, d2d, graph_ms = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
tokens = int(sys.argv[4]) if len(sys.argv) > 4 else 1
rows = list(csv.reader(open(path)))
hdr, units = rows[0], rows[1]
col = {h: i for i, h in enumerate(hdr)}
scale = {'ns': 1e-3, 'usecond': 1, 'us': 1, 'msecond': 1e3, 'nsecond': 1e-3, 'ms': 1e3}
bscale = {'byte': 1, 'Kbyte': 1e3, 'Mbyte': 1e6, 'Gbyte': 1e9, 'B': 1, 'KB': 1e3, 'MB': 1e6}

def num(r, name, table):
    v = r[col[name]].replace(',', '')
    return float(v) * table[units[col[name]]]

agg = defaultdict(lambda: [0, 0.0, 0.0, set()])
seq = []
for r in rows[2:]:
    if len(r) < len(hdr):
        continue
    name = r[col['Kernel Name']]
    us = num(r, 'gpu__time_duration.sum', scale)
    b = num(r, 'dram__bytes_read.sum', bscale) + num(r, 'dram__bytes_write.sum', bscale)
    a = agg[name]
    a[0] += 1; a[1] += us; a[2] += b; a[3].add(r[col['Grid Size']] + ' x ' + r[col['Block Size']])
    seq.append((name, us, b))
tot_us = sum(a[1] for a in agg.values()) / tokens
tot_b = sum(a[2] for a in agg.values()) / tokens
n = sum(a[0] for a in agg.values()) / tokens
print(f'{path}: {n:.0f} launches/token, kernel time {tot_us:.1f} µs/token, DRAM {tot_b/1e6:.1f} MB/token, '
      f'graph {graph_ms*1e3:.0f} µs/token: kernels {100*tot_us/(graph_ms*1e3):.1f} %, '
      f'gaps {graph_ms*1e3 - tot_us:.0f} µs/token ({(graph_ms*1e3 - tot_us)/n:.2f} µs per launch)')
print(f'kernels alone at {tot_b/tot_us/1e3:.0f} GB/s = {100*tot_b/tot_us/1e3/d2d:.1f} % of d2d {d2d:.0f} GB/s;'
      f' bytes at d2d: {tot_b/d2d/1e3:.0f} µs')
print()
print('| kernel | launches/token | µs/token | % of kernel time | µs/launch | MB/token | GB/s | % of d2d | grid x block |')
print('|---|---:|---:|---:|---:|---:|---:|---:|---|')
for name, (c, us, b, dims) in sorted(agg.items(), key=lambda kv: -kv[1][1]):
    gbs = b / us / 1e3 if us else 0
    d = sorted(dims)
    ds = d[0] if len(d) == 1 else f'{len(d)} shapes'
    print(f'| {name.replace("strata_", "")} | {c/tokens:.0f} | {us/tokens:.1f} | {100*us/tokens/tot_us:.1f} | {us/c:.2f} | '
          f'{b/tokens/1e6:.2f} | {gbs:.0f} | {100*gbs/d2d:.1f} | {ds} |')
# by family: the symbol's first word after strata_ up to the type
fam = defaultdict(lambda: [0, 0.0, 0.0])
for name, (c, us, b, _) in agg.items():
    k = name.replace('strata_', '')
    for f in ['attention_decode', 'rmsnorm_row', 'quantize_q8_1', 'moe_decode', 'gated_delta_net', 'mmvq', 'sample', 'rope', 'rmsnorm', 'embed']:
        if k.startswith(f):
            k = f
            break
    fam[k][0] += c; fam[k][1] += us; fam[k][2] += b
print()
print('| family | launches/token | µs/token | % of kernel time | µs/launch | MB/token | GB/s | % of d2d |')
print('|---|---:|---:|---:|---:|---:|---:|---:|')
for k, (c, us, b) in sorted(fam.items(), key=lambda kv: -kv[1][1]):
    gbs = b / us / 1e3 if us else 0
    print(f'| {k} | {c/tokens:.0f} | {us/tokens:.1f} | {100*us/tokens/tot_us:.1f} | {us/c:.2f} | {b/tokens/1e6:.2f} | {gbs:.0f} | {100*gbs/d2d:.1f} |')
# short kernels: how much time sits in launches under 3 µs
short = [s for s in seq if s[1] < 3]
print()
print(f'launches under 3 µs: {len(short)/tokens:.0f}/token, {sum(s[1] for s in short)/tokens:.0f} µs/token; '
      f'under 5 µs: {sum(1 for s in seq if s[1] < 5)/tokens:.0f}/token, {sum(s[1] for s in seq if s[1] < 5)/tokens:.0f} µs/token')
