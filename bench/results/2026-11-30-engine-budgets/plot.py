#!/usr/bin/env python3
"""tok/s and achieved/bound against VRAM budget from run.sh's rows.tsv (issue 11, item 4).

usage: plot.py ROWS.tsv OUT.png

rows.tsv columns (run.sh: a model label, then TestGPUBench's ROW columns): label, budget MiB
(0 or "unlimited" = unlimited), policy/misses (decayed/auto:PATH, decayed/copy), phase, cache slots, of
experts, hit rate, MB copied/token, copy GB/s, launches/token, host µs/launch, sync
ms/token, ms/token, tok/s, bound ms, bound/achieved, load s.

One line per model, miss mode (auto: the default, whatever path it took at that budget;
copy) and phase (decode from a cold cache; "decode warm N", the steady state after N more
steps; the 512- and 4096-token prompts). A filled marker is a row where auto read
misses through the mapping (auto:map), an open one a row without (every expert resident, or
the copy path)."""
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

src, out = sys.argv[1], sys.argv[2]
series = {}  # (label, mode, phase) -> [(budget GiB, tok/s, ratio, mapped)]
UNL = 40.0  # where "unlimited" sits on the axis, GiB
for line in open(src):
    c = line.rstrip("\n").split("\t")
    if len(c) < 17:
        continue
    label, pol, phase = c[0], c[2], c[3]
    mib = 0 if c[1] == "unlimited" else int(c[1])  # rows.tsv writes the unlimited budget as a word
    misses = pol.split("/", 1)[1] if "/" in pol else "auto"
    mode, _, path = misses.partition(":")
    if phase.startswith("decode warm"):
        kind = "decode warm"  # STRATA_BENCH_WARM's steady-state row
    elif phase.startswith("decode"):
        kind = "decode"
    else:
        kind = "prefill " + phase.split()[1]
    x = UNL if mib == 0 else mib / 1024
    series.setdefault((label, mode, kind), []).append((x, float(c[13]), float(c[15]), path == "map"))

fig, (a1, a2) = plt.subplots(1, 2, figsize=(13, 5.5))
colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
labels = sorted({k[0] for k in series})
for (label, mode, kind), pts in sorted(series.items()):
    pts.sort()
    col = colors[labels.index(label) % len(colors)]
    ls = {"decode": "-", "decode warm": "-.", "prefill 512": "--", "prefill 4096": (0, (1, 1))}.get(kind, "--") if mode == "auto" else ":"
    name = f"{label} {kind}, {mode}"
    for ax, i, scale in ((a1, 1, 1), (a2, 2, 100)):
        if ax is a2 and not kind.startswith("decode"):
            continue  # a batched prompt reads its weights once a chunk: the formula is no bound there
        ax.plot([p[0] for p in pts], [scale * p[i] for p in pts], linestyle=ls, color=col, label=name)
        for p in pts:
            ax.plot(p[0], scale * p[i], "o" if kind.startswith("decode") else "s", color=col,
                    markerfacecolor=col if p[3] else "white", markersize=6)
ticks = sorted({p[0] for pts in series.values() for p in pts})
for ax in (a1, a2):
    ax.set_xlabel("VRAM budget, GiB (rightmost: unlimited)")
    ax.set_xticks(ticks)
    ax.set_xticklabels(["unl." if t == UNL else f"{t:g}" for t in ticks])
    ax.grid(True, alpha=0.3)
a1.set_yscale("log")
a1.set_ylabel("tokens/s (log)")
a1.set_title("Strata GPU engine on one H200: tok/s against budget")
a2.set_ylabel("% of the per-token bound")
a2.axhline(80, color="gray", linestyle=":", linewidth=1)
a2.set_title("decode: achieved / bound (goal 80 %, dotted)")
a1.legend(fontsize=7, ncol=2)
fig.tight_layout()
fig.savefig(out, dpi=110)
print("wrote", out)
