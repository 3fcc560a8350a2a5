#!/usr/bin/env bash
# The model-op kernels (rmsnorm, rope, embed, sample, attention_decode, gated_delta_net) on a
# GPU: their parity cases and their benchmarks, in two halves like run.sh:
#
#   bench/device/modelops.sh build [TARGET]   on the build machine (Go + clang-19): cross-builds
#                                             .dev/parity.test and TARGET's code objects (.dev/co)
#   bench/device/modelops.sh gpu              on the GPU machine (no Go), from the repository root:
#                                             parity of the model-op families (fresh seed), then
#                                             TestBenchModelOps; logs to $OUT (default .dev/out)
#
# TARGET defaults to sm_90 (the H200). .dev/ is ignored by git. The gpu half fits one device
# call of 10 minutes (parity ≤ 400 s, bench ≤ 170 s); with the device tool: build here, then
# run `bench/device/modelops.sh gpu` with carry [".dev"] ($OUT is the tool's).
set -uo pipefail
cd "$(dirname "$0")/../.."

families='attention_decode|attention_prefill|embed|gated_delta_net|rmsnorm|rope|sample'

build() {
	local target=${1:-sm_90}
	set -e
	mkdir -p .dev/co
	CGO_ENABLED=0 go test -c -o .dev/parity.test ./parity
	local flags
	flags=$(awk -F'\t' -v t="$target" '$1 == "target" && $2 == t { print $6 }' kernels/out/objects.txt)
	[ -n "$flags" ] || { echo "no target $target in kernels/out/objects.txt" >&2; exit 1; }
	awk -F'\t' -v t="$target" '$1 == "object" && $2 == t { print $4 "\t" $5 }' kernels/out/objects.txt |
		while IFS=$'\t' read -r src obj; do
			mkdir -p ".dev/co/$(dirname "$obj")"
			# shellcheck disable=SC2086 # flags are a list
			clang-19 $flags -I "$(dirname "$src")" -I kernels/out/include "$src" -o ".dev/co/$obj" ||
				echo "warning: $obj did not build (its family's parity will fail; the model ops do not need it)" >&2
		done
	# The families this script runs, and quantize_q8_1 (the separate half of the fused bench).
	local f
	for f in attention_decode attention_prefill embed gated_delta_net rmsnorm rope sample quantize_q8_1; do
		ls ".dev/co/$target/$f".* >/dev/null 2>&1 || { echo "missing .dev/co/$target/$f" >&2; exit 1; }
	done
	echo "built .dev/parity.test and .dev/co/$target"
}

gpu() {
	local out=${OUT:-.dev/out}
	mkdir -p "$out"
	export STRATA_CO_DIR=.dev/co STRATA_REQUIRE_GPU=1
	local rc=0
	echo "== parity ($families)"
	.dev/parity.test -test.v -test.run "TestParity/.+/($families)/" -test.timeout 400s >"$out/modelops-parity.log" 2>&1 || rc=1
	echo "== bench"
	STRATA_BENCH=1 STRATA_BENCH_OUT="$out" .dev/parity.test -test.v -test.run 'TestBenchModelOps' -test.timeout 170s >"$out/modelops-bench.log" 2>&1 || rc=1
	grep -E "^(parity on|[a-z_0-9]+/($families)/)" "$out/modelops-parity.log" | head -250
	echo "passed: $(grep -cE '^\s*--- PASS: TestParity/.*/.*/.*/' "$out/modelops-parity.log")," \
		"failed: $(grep -cE '^\s*--- FAIL: TestParity/.*/.*/.*/' "$out/modelops-parity.log")"
	grep -E "FAIL|panic|Error|error" "$out/modelops-parity.log" | head -40
	echo
	sed -n '/^model ops on/,$p' "$out/modelops-bench.log" | grep -v -E "^(=== |--- |PASS|ok )" | head -60
	grep -E "FAIL|panic" "$out/modelops-bench.log" | head
	return $rc
}

case ${1:-} in
build) shift; build "$@" ;;
gpu) gpu ;;
*) echo "usage: $0 build [TARGET] | gpu" >&2; exit 2 ;;
esac
