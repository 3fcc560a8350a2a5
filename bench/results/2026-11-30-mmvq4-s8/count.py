#!/usr/bin/env python3
"""count.py: issue 5's mmvq shape (4096×14336, one column) per weight type and decode
geometry, counted before measuring (README "Counting"). Per geometry (R rows a wave, U
groups a lane a pass, B blocks an SM that launch_bounds allows; the default kernel and
geometries 1–4 hold 82–128 registers on the device's ptxas, final-s7 call 2, so 2 blocks an
SM): blocks, blocks an SM, waves, passes a lane (and the share of lane-group slots a partial
last pass wastes: ALU issue for the decode-bound types), resident warps an SM, weight KB in
flight an SM during a pass (every resident warp's loads of one pass), the KB the busiest SM
reads, the Q8_1 activation bytes staged from L2 into LDS (every block stages the whole
column), and the KB in flight an SM the copy rate needs (d2d × latency / 132)."""
import math

SMS, D2D, ROWS, K = 132, 4232e9, 4096, 14336
NG = K // 32  # 448 groups a row
GB = {  # weight bytes a 32-element group
    "q80": 34, "q4k": 18, "q6k": 210 / 8, "q20": 9, "iq3s": 110 / 8, "iq3xxs": 98 / 8,
    "iq2xs": 74 / 8, "iq1m": 56 / 8,
}
LDS = {"q80": 36864, "q4k": 36864, "q6k": 36864, "q20": 36864, "iq3s": 38912 + 1024,
       "iq3xxs": 36864 + 1024, "iq2xs": 36864 + 4096, "iq1m": 45056}  # static LDS a block (approx.)
# geometry -> R, U, B (B: blocks an SM the register cap allows)
GEO = {"default": (2, 2, 2), "g1": (2, 2, 2), "g2": (1, 4, 2), "g3": (3, 2, 2), "g4": (1, 2, 2),
       "g5": (1, 2, 4), "g6": (1, 4, 4), "g7": (2, 4, 2), "g8": (1, 3, 4)}

print(f"needed in flight an SM at d2d ({D2D/1e9:.0f} GB/s): {D2D*0.6e-6/SMS/1e3:.0f} KB at 0.6 µs latency, "
      f"{D2D*1.0e-6/SMS/1e3:.0f} KB at 1.0 µs; 4.8 TB/s × 1 µs: {4.8e12*1e-6/SMS/1e3:.0f} KB\n")
print("| type | geom | R×U×B | blocks | blocks/SM | waves | passes (wasted) | warps/SM | KB in flight/SM/pass | KB busiest SM | MB staged L2→LDS | MB weights | µs at d2d |")
print("|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
for t, gb in GB.items():
    mb = ROWS * NG * gb / 1e6
    for g, (R, U, B) in GEO.items():
        blocks = math.ceil(ROWS / (8 * R))
        bps = min(B, 227 * 1024 // LDS[t], 8)
        slots = SMS * bps
        waves = math.ceil(blocks / slots)
        passes = math.ceil(NG / (32 * U))
        waste = passes * 32 * U / NG - 1
        res = min(blocks, slots)
        warps = res / SMS * 8
        inflight = warps * 32 * R * U * gb / 1e3
        busiest = math.ceil(blocks / SMS) * 8 * R * NG * gb / 1e3
        staged = blocks * NG * 36 / 1e6
        print(f"| {t} | {g} | {R}×{U}×{B} | {blocks} | {bps} | {waves} | {passes} ({100*waste:.1f} %) | {warps:.1f} | {inflight:.1f} | {busiest:.0f} | {staged:.1f} | {mb:.1f} | {mb*1e6/D2D*1e6:.2f} |")
