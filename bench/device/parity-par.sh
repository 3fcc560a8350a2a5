#!/usr/bin/env bash
# Parity of the slow families on one GPU, one process per family in parallel (the float64
# references run on the host's cores), each under LIMIT seconds (default 200). Run on the GPU
# machine from the repository root after `bench/device/all.sh build`; logs archived to $OUT.
set -uo pipefail
cd "$(dirname "$0")/../.."
limit=${LIMIT:-200}
final=${OUT:-.dev/out} out=/tmp/strata-par
mkdir -p "$final" "$out"
export STRATA_CO_DIR=$PWD/.dev/co STRATA_REQUIRE_GPU=1
for f in mmvq dequant moe_decode rmsnorm rope embed sample attention_decode attention_prefill gated_delta_net; do
	timeout "$limit" .dev/parity.test -test.v -test.timeout "$((limit - 5))s" -test.run "TestParity/sm_90/$f/" >"$out/$f.log" 2>&1 &
done
wait
for f in mmvq dequant moe_decode rmsnorm rope embed sample attention_decode attention_prefill gated_delta_net; do
	echo "$f: passed $(grep -cE '^\s*--- PASS: TestParity/.*/.*/.*/' "$out/$f.log")," \
		"failed $(grep -cE '^\s*--- FAIL: TestParity/.*/.*/.*/' "$out/$f.log"), $(grep -E '^(ok|FAIL|PASS)$|--- (PASS|FAIL): TestParity \(' "$out/$f.log" | tr '\n' ' ')"
	grep -E "^\s*--- FAIL|panic:|timed out" "$out/$f.log" | head -8
done
tar czf "$final/parity-logs.tgz" -C "$out" .
