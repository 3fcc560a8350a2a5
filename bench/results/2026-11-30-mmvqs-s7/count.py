#!/usr/bin/env python3
"""count.py: the counting of the mmvq decode shapes (README table): per shape and path,
blocks against 2 blocks an SM (launch_bounds(256, 2): 128 registers) on 132 SMs, waves,
rows a wave, passes a lane, weight bytes a lane a pass and in flight an SM (every resident
warp's pass), the SM's share of the matrix, and the time of the bytes at the copy rate."""
import math

SMS, SLOTS, D2D = 132, 264, 4150e9
# name, type, rows, k, z, geom (new), launches/token 30B, 80B
shapes = [
    ("q,k,v 2048->5120", "q80", 5120, 2048, 1, 3, 48, 0),
    ("wo / delta-net out 4096->2048", "q80", 2048, 4096, 1, 2, 48, 48),
    ("router 2048->128", "f16", 128, 2048, 1, 4, 48, 0),
    ("router+shared 2048->513", "f16", 513, 2048, 1, 4, 0, 48),
    ("delta-net in 2048->12352", "q80", 12352, 2048, 1, 3, 0, 36),
    ("attn q or gate 16x 2048->256", "q80", 256, 2048, 16, 1, 0, 24),
    ("attn k,v 2048->1024", "q80", 1024, 2048, 1, 4, 0, 12),
    ("LM head 2048->151936", "q80", 151936, 2048, 1, 1, 1, 1),
]
# geom -> (R, U) quantized; F16: rows a wave (geom 4: 1, else 2), rows a block of the grid
GEO = {0: (2, 2), 1: (2, 2), 2: (1, 4), 3: (3, 2), 4: (1, 2)}


def row_bytes(t, k):
    return k // 32 * 34 if t == "q80" else 2 * k


print("| shape | type | path | geom | R | U | blocks | waves | passes/lane | B/lane/pass | KB in flight/SM/pass | KB/SM (busiest) | MB | µs at d2d |")
print("|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
for name, t, rows, k, z, g, _, _ in shapes:
    rb = row_bytes(t, k)
    mb = rows * rb * z / 1e6
    for path, geom in (("old", 0), ("new", g)):
        if t == "f16":
            R = 1 if geom == 4 else 2
            rpb_grid = 8  # RowsPerBlock (old: half the blocks have no rows) or geometry 4's
            U = 1
            active = math.ceil(rows / (8 * R)) * z
            blocks = math.ceil(rows / rpb_grid) * z
            # rows_f: a lane reads 16 B of each row per 256-element quarter, 4 quarters a step
            per_lane = R * 4 * 16
            passes = math.ceil(k / 1024)
        else:
            R, U = GEO[geom]
            blocks = active = math.ceil(rows / (8 * R)) * z
            gb = 34
            per_lane = R * U * gb
            passes = math.ceil(k / 32 / (32 * U))
        waves = math.ceil(active / SLOTS)
        per_sm_blocks = min(2, math.ceil(active / SMS))
        inflight = per_sm_blocks * 8 * 32 * per_lane / 1e3
        busiest = math.ceil(active / SMS) * 8 * R * rb / 1e3  # KB an SM reads, the busiest
        print(f"| {name} | {t} | {path} | {geom} | {R} | {U} | {blocks}{'' if active == blocks else f' ({active} with rows)'} | {waves} | {passes} | {per_lane} | {inflight:.1f} | {busiest:.0f} | {mb:.2f} | {mb*1e6/D2D*1e6:.2f} |")
