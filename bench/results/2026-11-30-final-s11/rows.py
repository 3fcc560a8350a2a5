#!/usr/bin/env python3
"""rows.tsv for ../2026-11-30-engine-budgets/plot.py from run.sh's summary.md (the table step).

usage: rows.py SUMMARY.md ROWS.tsv

Each `--- gpubench-table-MODEL.log` section's ROW lines become tab-separated rows with MODEL
as the first column, " tiles=best" dropped from the phase."""
import sys

label, out = None, []
for line in open(sys.argv[1]):
    if line.startswith("--- gpubench-table-"):
        label = line.strip()[len("--- gpubench-table-"):].removesuffix(".log")
    elif line.startswith("ROW |") and label:
        cols = [c.strip() for c in line.strip().strip("|").split("|")][0:]
        cols[0] = cols[0].removeprefix("ROW").strip()
        cols = [c for c in cols if c != ""] if cols[0] == "" else cols
        cols[2] = cols[2].replace(" tiles=best", "")
        out.append("\t".join([label] + cols))
open(sys.argv[2], "w").write("\n".join(out) + "\n")
print(f"{len(out)} rows")
