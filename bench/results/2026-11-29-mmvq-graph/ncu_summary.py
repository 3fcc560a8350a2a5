"""Summarise call 1's Nsight Compute pages (ncu-details.txt, ncu-source.csv.gz) per kernel:
key metrics, stall cycles per issued instruction, and the SASS instructions with the most
warp-stall samples. Usage: python3 ncu_summary.py DETAILS.txt SOURCE.csv.gz > ncu-summary.txt"""
import csv
import gzip
import io
import re
import sys

details, source = sys.argv[1], sys.argv[2]
txt = open(details).read()
parts = re.split(r"\n  (strata_mmvq_\w+) \(", txt)
keys = ["Duration", "DRAM Throughput", "Executed Ipc Active", "Issue Slots Busy",
        "Warp Cycles Per Issued Instruction", "Achieved Active Warps Per SM",
        "Eligible Warps Per Scheduler", "L1/TEX Hit Rate", "L2 Hit Rate",
        "SM: Pipe Alu Cycles Active", "SM: Pipe Fmaheavy Cycles Active",
        "L1: Data Pipe Lsu Wavefronts"]
stalls = ["Long Scoreboard", "Not Selected", "Math Pipe Throttle", "Wait", "MIO Throttle",
          "LG Throttle", "Short Scoreboard", "No Instruction", "IMC Miss", "Dispatch Stall",
          "Branch Resolving", "Barrier"]
seen = set()
for i in range(1, len(parts), 2):
    name, body = parts[i], parts[i + 1]
    if name in seen:
        continue
    seen.add(name)
    out = []
    for k in keys:
        m = re.search(r"\n\s+" + re.escape(k) + r"\s+(\S+)\s+([\d.,]+)", body)
        if m:
            out.append(f"{k}={m.group(2)}")
    st = []
    for k in stalls:
        m = re.search(r"\n\s+Stall " + re.escape(k) + r"\s+inst\s+([\d.]+)", body)
        if m:
            st.append(f"{k}:{m.group(1)}")
    print(name)
    print("  " + "; ".join(out))
    print("  stall cycles per issued instruction: " + " ".join(st))
print("\nTop warp-stall samples by SASS instruction (share of the kernel's samples):")
data = gzip.open(source, "rt").read()
seen = set()
for b in data.split('"Kernel Name",')[1:]:
    name = b.split("\n", 1)[0].strip().strip('",')
    if name in seen:
        continue
    seen.add(name)
    rows = list(csv.reader(io.StringIO(b.split("\n", 1)[1])))
    hdr, rows = rows[0], rows[1:]
    ia, isrc = hdr.index("Warp Stall Sampling (All Samples)"), hdr.index("Source")
    tot = sum(float(r[ia] or 0) for r in rows if len(r) > ia)
    print(name, "samples", int(tot))
    for r in sorted(rows, key=lambda r: -float(r[ia] or 0))[:4]:
        print("   %5.1f%%  %s" % (100 * float(r[ia]) / tot, r[isrc].strip()[:72]))
