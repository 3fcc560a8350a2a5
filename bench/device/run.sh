#!/usr/bin/env bash
# GPU runs for the runtime, the parity suite and the ceilings, in two halves:
#
#   bench/device/run.sh build [TARGET]   on the build machine (Go + clang-19): cross-builds
#                                        the test binaries and TARGET's code objects into .dev/
#   bench/device/run.sh gpu              on the GPU machine (no Go), from the repository root:
#                                        runs everything, full logs to $OUT (default .dev/out),
#                                        summary tables last
#   bench/device/run.sh gpu-launch       on the GPU machine: the launch-overhead breakdown only
#                                        (runtime tests incl. the device-fault test, Go layers vs
#                                        C, a CPU profile of the launch + sync round trip)
#
# TARGET defaults to sm_90 (the H200). .dev/ must be ignored by git (.git/info/exclude).
set -uo pipefail
cd "$(dirname "$0")/../.."

build() {
	local target=${1:-sm_90}
	set -e
	mkdir -p .dev/co
	export CGO_ENABLED=0
	go test -c -o .dev/parity.test ./parity
	go test -c -o .dev/runtime-cuda.test ./runtime/cuda
	go test -c -o .dev/ceilings.test ./bench/ceilings
	go build -o .dev/strata-run ./cmd/strata-run
	# Code objects for TARGET, compiled exactly as kernels/out/objects.txt says.
	local flags
	flags=$(awk -F'\t' -v t="$target" '$1 == "target" && $2 == t { print $6 }' kernels/out/objects.txt)
	[ -n "$flags" ] || { echo "no target $target in kernels/out/objects.txt" >&2; exit 1; }
	awk -F'\t' -v t="$target" '$1 == "object" && $2 == t { print $4 "\t" $5 }' kernels/out/objects.txt |
		while IFS=$'\t' read -r src obj; do
			mkdir -p ".dev/co/$(dirname "$obj")"
			# shellcheck disable=SC2086 # flags are a list
			clang-19 $flags -I "$(dirname "$src")" -I kernels/out/include "$src" -o ".dev/co/$obj"
			echo "built .dev/co/$obj"
		done
}

gpu() {
	local out=${OUT:-.dev/out}
	mkdir -p "$out"
	local rc=0
	step() { # step NAME COMMAND...: full output to $out/NAME.log
		local name=$1
		shift
		echo "== $name: $*"
		"$@" >"$out/$name.log" 2>&1
		local r=$?
		echo "   exit $r"
		[ $r -eq 0 ] || rc=1
	}
	{ nvidia-smi; nvidia-smi --query-gpu=name,pci.bus_id,driver_version,memory.total,clocks.sm,clocks.mem,clocks.max.sm,power.limit --format=csv; } >"$out/nvidia-smi.log" 2>&1
	export STRATA_CO_DIR=.dev/co
	step list-devices sh -c '.dev/strata-run --list-devices; echo; .dev/strata-run --list-devices --json;
		for sel in 0000:00:06.0 h200 cuda:0 1; do echo "--- --device $sel"; .dev/strata-run --list-devices --device $sel; done;
		echo "--- CUDA_VISIBLE_DEVICES= (hides every NVIDIA device)"; CUDA_VISIBLE_DEVICES= .dev/strata-run --list-devices; true'
	step runtime-cuda env STRATA_REQUIRE_GPU=1 .dev/runtime-cuda.test -test.v -test.bench Launch -test.benchtime 20000x
	# Three runs, each with fresh random inputs (its own seed).
	step parity env STRATA_REQUIRE_GPU=1 .dev/parity.test -test.v -test.count 3 -test.run 'TestParity|TestReferences|TestBounds' -test.timeout 300s
	# The driver's own launch cost, from C, for comparison with the purego path.
	step launch-baseline sh -c 'nvcc -O2 -o /tmp/launch_baseline bench/device/launch_baseline.c -L/usr/local/cuda/lib64/stubs -lcuda && /tmp/launch_baseline'
	step ceilings env STRATA_CEILINGS=1 STRATA_CEILINGS_OUT="$out" .dev/ceilings.test -test.v -test.run TestCeilings -test.timeout 300s
	echo
	head -20 "$out/nvidia-smi.log" | grep -E "H200|Driver|MiB" || true
	tail -n 4 "$out/nvidia-smi.log"
	echo
	sed -n '1,12p' "$out/list-devices.log"
	grep -E "^(--- |ok|FAIL|PASS)|mapped alias|Benchmark|ns/op" "$out/runtime-cuda.log" | head -20
	grep -E "^parity on" "$out/parity.log"
	grep -E "^(sm_|case)" "$out/parity.log" | tail -43
	grep -cE "^\s*--- PASS: TestParity/.*/.*/.*/" "$out/parity.log"
	grep -E "FAIL|panic" "$out/parity.log" | head -20
	cat "$out/launch-baseline.log"
	sed -n '/^ceilings on/,/^---/p' "$out/ceilings.log"
	grep -E "FAIL|panic" "$out/ceilings.log" | head
	return $rc
}

gpu_launch() {
	local out=${OUT:-.dev/out}
	mkdir -p "$out"
	local rc=0
	nvidia-smi >"$out/nvidia-smi.log" 2>&1
	echo "== runtime-cuda"
	STRATA_REQUIRE_GPU=1 .dev/runtime-cuda.test -test.v -test.bench 'Launch|RoundTrip' -test.benchtime 20000x >"$out/runtime-cuda.log" 2>&1 || rc=1
	echo "== roundtrip profile"
	STRATA_REQUIRE_GPU=1 .dev/runtime-cuda.test -test.run '^$' -test.bench 'RoundTrip/gpu' -test.benchtime 100000x \
		-test.cpuprofile "$out/roundtrip.prof" >"$out/roundtrip.log" 2>&1 || rc=1
	echo "== launch-baseline"
	{ nvcc -O2 -o /tmp/launch_baseline bench/device/launch_baseline.c -L/usr/local/cuda/lib64/stubs -lcuda && /tmp/launch_baseline; } >"$out/launch-baseline.log" 2>&1 || rc=1
	grep -E "^(--- |ok|FAIL|PASS)|FAULT|POISON|mapped alias|ns/op" "$out/runtime-cuda.log"
	cat "$out/roundtrip.log" "$out/launch-baseline.log"
	return $rc
}

case ${1:-} in
build) shift; build "$@" ;;
gpu) gpu ;;
gpu-launch) gpu_launch ;;
*) echo "usage: $0 build [TARGET] | gpu | gpu-launch" >&2; exit 2 ;;
esac
