#!/usr/bin/env bash
# Every kernel family on one GPU in one device call: parity (fresh random inputs) of all
# families, then the decode, prefill and model-op benchmarks, then ptxas's register/spill
# report for the sm_90 PTX. Two halves like run.sh:
#
#   bench/device/all.sh build     build machine (Go + clang-19): run.sh build (parity.test,
#                                 strata-run, sm_90 code objects into .dev/co)
#   bench/device/all.sh gpu       GPU machine, repository root: everything, each step under
#                                 its own time limit so the call ends inside 10 minutes;
#                                 full logs to $OUT (default .dev/out), tables last
set -uo pipefail
cd "$(dirname "$0")/../.."

gpu() {
	# Everything is written to a work folder; $OUT gets the tables and one archive of all logs
	# (the device tool returns at most 8 files).
	local final=${OUT:-.dev/out} out=/tmp/strata-all
	mkdir -p "$final" "$out"
	export STRATA_CO_DIR=$PWD/.dev/co STRATA_REQUIRE_GPU=1
	local t=.dev/parity.test
	nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm,clocks.max.mem --format=csv >"$out/gpu.txt" 2>&1
	step() { # step NAME SECONDS ARGS...: the parity binary under a time limit, log to $out/NAME.log
		local name=$1 secs=$2
		shift 2
		echo "== $name ($secs s): $*"
		local s=$SECONDS
		timeout "$secs" "$t" -test.v -test.timeout "$((secs - 5))s" "$@" >"$out/$name.log" 2>&1
		echo "   exit $? in $((SECONDS - s)) s"
	}
	# Per-area time limits (seconds) fit one 10-minute call; STRATA_ALL_SCALE=2 doubles them.
	local k=${STRATA_ALL_SCALE:-1}
	step parity-base $((15 * k)) -test.run 'TestParity/sm_90/(quantize_q8_1|imma_tile)/'
	step parity-decode $((75 * k)) -test.run 'TestParity/sm_90/(mmvq|dequant|moe_decode)/'
	step parity-modelops $((75 * k)) -test.run 'TestParity/sm_90/(rmsnorm|rope|embed|sample|attention_decode|attention_prefill|gated_delta_net)/'
	step parity-prefill $((75 * k)) -test.run 'TestParity/sm_90/(mmq|moe_prefill)/'
	STRATA_BENCH=1 STRATA_BENCH_OUT="$out" step bench-decode $((40 * k)) -test.run TestBenchDecode
	STRATA_BENCH=1 STRATA_BENCH_OUT="$out" step bench-modelops $((60 * k)) -test.run TestBenchModelOps
	STRATA_BENCH=1 STRATA_BENCH_OUT="$out" step bench-prefill $((60 * k)) -test.run TestBenchPrefill
	local p
	p=$(command -v ptxas || echo /usr/local/cuda/bin/ptxas)
	for f in .dev/co/sm_90/{mmvq,attention_decode}.ptx; do
		echo "== $f"
		timeout 15 "$p" -arch=sm_90 -v "$f" -o /dev/null 2>&1 | grep -E "entry function|spill|Used" | paste - - - |
			sed -E "s/ptxas info *: //g; s/Compiling entry function //; s/ for 'sm_90'//"
	done >"$out/ptxas.txt" 2>&1
	echo
	cat "$out/gpu.txt"
	local a
	for a in base decode modelops prefill; do
		echo "parity-$a: passed $(grep -cE '^\s*--- PASS: TestParity/.*/.*/.*/' "$out/parity-$a.log")," \
			"failed $(grep -cE '^\s*--- FAIL: TestParity/.*/.*/.*/' "$out/parity-$a.log")," \
			"skipped $(grep -cE '^\s*--- SKIP: TestParity/.*/.*/.*/' "$out/parity-$a.log")"
		grep -E "^\s*--- FAIL|panic|test timed out" "$out/parity-$a.log" | head -12
	done
	echo "ptxas spills: $(grep -cE '[1-9][0-9]* bytes spill' "$out/ptxas.txt") kernels with spill stores/loads"
	for f in bench.txt modelops.txt bench_prefill.txt; do
		[ -f "$out/$f" ] && { echo "--- $f"; cat "$out/$f"; }
	done
	grep -hE "FAIL|panic" "$out"/bench-*.log | head
	tar czf "$final/all-logs.tgz" -C "$out" .
	cp "$out"/{bench.txt,modelops.txt,bench_prefill.txt,ptxas.txt} "$final"/ 2>/dev/null
	true
}

case ${1:-} in
build) shift; exec bench/device/run.sh build "$@" ;;
gpu) gpu ;;
*) echo "usage: $0 build | gpu" >&2; exit 2 ;;
esac
