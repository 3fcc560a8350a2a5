#!/usr/bin/env python3
"""tok/s against VRAM budget from TestGPUBench's bench-rows.tsv files (issue 11, item 4).

usage: plot.py OUT.png ROWS.tsv...   (a row measured in several files: the first file's)   (columns: label, budget MiB (0 = unlimited), policy,
phase, hit rate, MB copied/token, copy GB/s, ms/token, tok/s, bound ms, bound/achieved,
d2d GB/s, h2d GB/s)"""
import sys
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt

out, files = sys.argv[1], sys.argv[2:]
rows = {}
for f in files:
    for line in open(f):
        c = line.rstrip("\n").split("\t")
        if len(c) < 13:
            continue
        label, mib, phase = c[0].rstrip("-"), int(c[1]), c[3]
        # the first file's run of a row wins (the longer decode runs of the matrix call)
        rows.setdefault((label, phase, mib), (float(c[8]), float(c[10])))
UNL = 40 * 1024  # where "unlimited" sits on the axis
fig, (a1, a2) = plt.subplots(1, 2, figsize=(13, 5))
styles = {"decode": "-o", "prefill 512": "--s", "prefill 4096": ":^"}
for label in sorted({k[0] for k in rows}):
    for phase, st in styles.items():
        pts = sorted((UNL if m == 0 else m, v) for (l, p, m), v in rows.items() if l == label and p == phase)
        if not pts:
            continue
        xs = [x / 1024 for x, _ in pts]
        a1.plot(xs, [v[0] for _, v in pts], st, label=f"{label} {phase}")
        a2.plot(xs, [100 * v[1] for _, v in pts], st, label=f"{label} {phase}")
for a in (a1, a2):
    a.set_xlabel("VRAM budget, GiB (rightmost: unlimited)")
    a.set_xticks([4, 6, 12, 16, 24, UNL / 1024])
    a.set_xticklabels(["4", "6", "12", "16", "24", "unl."])
    a.grid(True, alpha=0.3)
a1.set_ylabel("tokens/s")
a1.set_title("Strata GPU engine on one H200: tok/s against budget")
a2.set_ylabel("% of the per-token bound")
a2.set_title("achieved / bound (goal 80%)")
a1.legend(fontsize=7)
fig.tight_layout()
fig.savefig(out, dpi=110)
print("wrote", out)
