#!/usr/bin/env bash
# The session's final H200 call: final.sh run (every sm_90 family's parity, decode
# benchmarks; STRATA_FINAL_ENGINE=0) and then engine-host's run.sh run (runtime launch test and
# benchmarks, GPU-vs-CPU engine tests, 30B Q2_0 resident decode in four launch/argmax modes,
# batched prompts). Usage (device, repository root, carry .dev-final3 and .dev-engine3):
#   OUT=... bash .dev-final3/all.sh
set -uo pipefail
: "${OUT:?set OUT}"
o1=/tmp/out-final o2=/tmp/out-engine
rm -rf "$o1" "$o2" && mkdir -p "$o1" "$o2"
OUT=$o1 STRATA_FINAL_ENGINE=0 STRATA_FINAL_BUDGET=${B1:-240} STRATA_FINAL_DRY=${DRY:-0} bash .dev-final3/final.sh run >"$o1/stdout.log" 2>&1
OUT=$o2 STRATA_RUN_BUDGET=${B2:-200} STRATA_RUN_DRY=${DRY:-0} bash .dev-engine3/run.sh run >"$o2/stdout.log" 2>&1
cp "$o1/summary.md" "$OUT/final-summary.md"
cp "$o2/summary.md" "$OUT/engine-summary.md"
cp "$o2/rows.md" "$OUT/engine-rows.md" 2>/dev/null
cp "$o1"/bench.txt "$o1"/bench-moe.txt "$OUT/" 2>/dev/null
tar -C /tmp -czf "$OUT/all-logs.tgz" out-final out-engine
cat "$OUT/final-summary.md" "$OUT/engine-summary.md" | grep -vE "^\s+cmd_|^    " | head -80
cat "$OUT/engine-rows.md" 2>/dev/null
