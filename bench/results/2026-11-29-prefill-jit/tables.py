# tables.py LOGDIR: the README tables from one jgpu run (bench-<group>/bench_prefill.txt,
# intmm.txt): per family, type and tokens, TOPS of each group's best tile and per tile.
import os
import re
import sys

d = sys.argv[1]
groups = ["OJ", "OC", "NJ", "NC", "A1J", "A2J"]
res, ceil = {}, {}
for g in groups:
    p = os.path.join(d, f"bench-{g}", "bench_prefill.txt")
    if not os.path.exists(p):
        # a bench that ran out of time wrote no table; its log holds the rows it printed
        p = os.path.join(d, f"bench-{g}.log")
        if not os.path.exists(p):
            continue
    fam = None
    for line in open(p):
        m = re.search(r"ceiling\): ([0-9.]+) TOPS", line)
        if m:
            ceil[g] = float(m.group(1))
        if line.strip().startswith("mmq "):
            fam = "mmq"
        elif line.strip().startswith("moe_prefill "):
            fam = "moe"
        f = line.strip().split()
        if fam and len(f) >= 5 and re.match(r"[a-z0-9]+_mma_r\d+t\d+$", f[0]):
            typ, _, tile = f[0].split("_")
            res[(g, fam, typ, int(f[1]), tile)] = (float(f[-3]), float(f[-2])) if fam == "mmq" else (float(f[-3]), float(f[-2]))
cub = {}
p = os.path.join(d, "intmm.txt")
if os.path.exists(p):
    for line in open(p):
        m = re.match(r"mmq M=(\d+) .* W\.t\(\)\s+[0-9.]+\s+([0-9.]+)", line)
        if m:
            cub[("mmq", int(m.group(1)))] = float(m.group(2))
        m = re.match(r"moe dense-equivalent T=(\d+) .* W\.t\(\)\s+[0-9.]+\s+([0-9.]+)", line)
        if m:
            cub[("moe", int(m.group(1)))] = float(m.group(2))
print("ceilings: mma.sync " + ", ".join(f"{g} {v}" for g, v in ceil.items()) + "; cuBLASLt " + ", ".join(f"{k[0]} {k[1]}: {v}" for k, v in cub.items()))
mma = max(ceil.values()) if ceil else 0
types = ["q80", "q20", "q4k", "q6k", "iq2xs", "iq3xxs", "iq3s", "iq1m"]
for fam, tiles in (("mmq", ["r64t64", "r128t64", "r64t128"]), ("moe", ["r64t64", "r128t64", "r128t32"])):
    print(f"\n{fam}: TOPS per group and tile ({'/'.join(tiles)}), best, % of mma.sync / cuBLASLt of the best")
    hdr = "| type | tokens | " + " | ".join(f"{g} {'/'.join(tiles)}" for g in ["OJ", "OC", "NJ", "NC"]) + " | A1J r64t64 | A2J r64t64 | best (group tile) | % mma | % cuBLASLt |"
    print(hdr)
    print("|" + "---|" * (hdr.count("|") - 1))
    for typ in types:
        for tok in (512, 2048):
            cells, best = [], (0, "")
            for g in ["OJ", "OC", "NJ", "NC"]:
                vs = []
                for t in tiles:
                    v = res.get((g, fam, typ, tok, t))
                    vs.append(f"{v[1]:.1f}" if v else "–")
                    if v and v[1] > best[0]:
                        best = (v[1], f"{g} {t}")
                cells.append(" / ".join(vs))
            for g in ["A1J", "A2J"]:
                v = res.get((g, fam, typ, tok, "r64t64"))
                cells.append(f"{v[1]:.1f}" if v else "–")
                if v and v[1] > best[0]:
                    best = (v[1], f"{g} r64t64")
            c = cub.get((fam, tok), 0)
            print(f"| {typ} | {tok} | " + " | ".join(cells) + f" | **{best[0]:.1f}** ({best[1]}) | {100 * best[0] / mma if mma else 0:.1f} | {100 * best[0] / c if c else 0:.1f} |")
