#!/usr/bin/env bash
# Prefill kernels (mmq, moe_prefill) on a GPU machine, in two halves like run.sh:
#
#   bench/device/prefill.sh build [TARGET]   build machine: run.sh build (parity.test and
#                                            TARGET's code objects into .dev/; default sm_90)
#   bench/device/prefill.sh gpu              GPU machine, repository root: parity of both
#                                            families (three runs, fresh inputs each), then
#                                            TestBenchPrefill; logs in $OUT (default .dev/out)
set -uo pipefail
cd "$(dirname "$0")/../.."

case ${1:-} in
build)
	shift
	exec bench/device/run.sh build "$@"
	;;
gpu)
	out=${OUT:-.dev/out}
	mkdir -p "$out"
	export STRATA_CO_DIR=.dev/co STRATA_REQUIRE_GPU=1
	rc=0
	echo "== parity mmq, moe_prefill"
	.dev/parity.test -test.v -test.count 3 -test.timeout 900s \
		-test.run 'TestParity/[^/]+/(mmq|moe_prefill)/' >"$out/parity-prefill.log" 2>&1 || rc=1
	echo "== bench prefill"
	STRATA_BENCH=1 STRATA_BENCH_OUT="$out" .dev/parity.test -test.v -test.timeout 900s \
		-test.run TestBenchPrefill >"$out/bench-prefill.log" 2>&1 || rc=1
	grep -cE "^\s*--- PASS: TestParity/.*/(mmq|moe_prefill)/.*/" "$out/parity-prefill.log"
	grep -E "^\s*--- FAIL|panic" "$out/parity-prefill.log" | head -40
	grep -E "/(mmq|moe_prefill)/" "$out/parity-prefill.log" | grep -E "^(sm_|gfx)" | head -120
	cat "$out/bench_prefill.txt" 2>/dev/null || tail -40 "$out/bench-prefill.log"
	exit $rc
	;;
*)
	echo "usage: $0 build [TARGET] | gpu" >&2
	exit 2
	;;
esac
