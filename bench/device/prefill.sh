#!/usr/bin/env bash
# Prefill kernels (mmq, moe_prefill) on a GPU machine, in two halves like run.sh:
#
#   bench/device/prefill.sh build [DIR]   build machine (Go + clang-19): parity.test and the
#                                         sm_90 mmq / moe_prefill PTX (as objects.txt says)
#                                         into DIR (default .dev)
#   bench/device/prefill.sh gpu [DIR]     GPU machine, repository root, DIR as built:
#                                         1. ptxas -v of both PTX files (registers, spills),
#                                            in the background;
#                                         2. parity of mmq and moe_prefill, one process per
#                                            family × op × tile in parallel, fresh seeds,
#                                            STRATA_REQUIRE_GPU=1, each under PLIMIT s;
#                                         3. TestBenchPrefill alone (under BLIMIT s;
#                                            STRATA_BENCH_FILTER passes through);
#                                         4. bench/device/intmm.py: torch._int_mm (cuBLASLt) on
#                                            the same shapes, alone.
#                                         Tables to stdout; $OUT gets the tables and one
#                                         archive of every log.
set -uo pipefail
cd "$(dirname "$0")/../.."

build() {
	local dev=${1:-.dev}
	set -e
	mkdir -p "$dev/co/sm_90"
	CGO_ENABLED=0 go test -c -o "$dev/parity.test" ./parity
	local flags
	flags=$(awk -F'\t' '$1 == "target" && $2 == "sm_90" { print $6 }' kernels/out/objects.txt)
	for f in mmq moe_prefill; do
		# shellcheck disable=SC2086 # flags are a list
		clang-19 $flags -I kernels/out/sm_90 -I kernels/out/include "kernels/out/sm_90/$f.cu" -o "$dev/co/sm_90/$f.ptx" &
	done
	wait
	cp bench/device/intmm.py "$dev/"
}

gpu() {
	local dev=${1:-.dev}
	local final=${OUT:-$dev/out} work=/tmp/strata-prefill
	mkdir -p "$final" "$work"
	export STRATA_CO_DIR=$PWD/$dev/co STRATA_REQUIRE_GPU=1
	export CUDA_CACHE_PATH=/tmp/strata-cuda-cache CUDA_CACHE_MAXSIZE=4294967296
	nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm,clocks.max.mem --format=csv >"$work/gpu.txt" 2>&1
	local p
	p=$(command -v ptxas || echo /usr/local/cuda/bin/ptxas)
	for f in mmq moe_prefill; do
		(timeout 300 "$p" -arch=sm_90 -v "$dev/co/sm_90/$f.ptx" -o /dev/null 2>&1 | grep -E "entry function|spill|Used" | paste - - - |
			sed -E "s/ptxas info *: //g; s/Compiling entry function //; s/ for 'sm_90'//" >"$work/ptxas-$f.txt") &
	done
	local s=$SECONDS
	local fam op tile
	for fam in mmq moe_prefill; do
		for op in mma dp4a; do
			for tile in r64t64 r128t64 r64t128 r128t32; do
				timeout "${PLIMIT:-120}" "$dev/parity.test" -test.v -test.count "${PCOUNT:-1}" -test.timeout "$((${PLIMIT:-120} - 5))s" \
					-test.run "TestParity/sm_90/$fam/[a-z0-9]+_${op}_${tile}\$" >"$work/parity-$fam-$op-$tile.log" 2>&1 &
			done
		done
	done
	wait
	echo "parity + ptxas: $((SECONDS - s)) s"
	s=$SECONDS
	STRATA_BENCH=1 STRATA_BENCH_OUT="$work" timeout "${BLIMIT:-150}" "$dev/parity.test" -test.v -test.timeout "${BLIMIT:-150}s" \
		-test.run TestBenchPrefill >"$work/bench-prefill.log" 2>&1
	echo "bench: exit $? in $((SECONDS - s)) s"
	s=$SECONDS
	PYTHONUNBUFFERED=1 timeout "${ILIMIT:-60}" python3 "$dev/intmm.py" "$work/intmm.txt" >"$work/intmm.log" 2>&1 </dev/null
	echo "intmm: exit $? in $((SECONDS - s)) s"
	cat "$work/gpu.txt"
	for l in "$work"/parity-*.log; do
		echo "$(basename "$l" .log): passed $(grep -cE '^\s*--- PASS: TestParity/.*/.*/.*/' "$l"), failed $(grep -cE '^\s*--- FAIL: TestParity/.*/.*/.*/' "$l")," \
			"$(grep -E '^(ok|FAIL|PASS)$|no tests to run' "$l" | tr '\n' ' ')"
		grep -E "^\s*--- FAIL|panic:|timed out" "$l" | head -8
	done
	cat "$work"/ptxas-*.txt
	cat "$work/bench_prefill.txt" 2>/dev/null || tail -30 "$work/bench-prefill.log"
	cat "$work/intmm.txt" 2>/dev/null || tail -20 "$work/intmm.log"
	tar czf "$final/prefill-logs.tgz" -C "$work" .
	cp "$work"/{bench_prefill.txt,intmm.txt,ptxas-mmq.txt,ptxas-moe_prefill.txt} "$final"/ 2>/dev/null
	true
}

# The asynchronous-staging runs (abuild/agpu: bench/results/2026-11-29-prefill-async;
# jbuild/jgpu: bench/results/2026-11-29-prefill-jit) measured a kernel path since removed;
# they are in git history (981208d's tree).

case ${1:-} in
build) shift; build "$@" ;;
gpu) shift; gpu "$@" ;;
*) echo "usage: $0 build [DIR] | gpu [DIR]" >&2; exit 2 ;;
esac
