#!/usr/bin/env bash
# A resident token as one CUDA graph launch (issue 11), session 4, helper graph: build here,
# one H200 call.
#
#   run.sh build    build machine (Go + clang-19), from this worktree: strata-run.test and
#       runtime-cuda.test (CGO_ENABLED=0, stripped, xz), the sm_90 code objects of every
#       family the engine launches, sample included (mmq and moe_prefill reduced to the
#       r64t64 and r128t64 mma variants, ../2026-11-29-prefill-async/strip_ptx.py), into
#       $DEV (default /work/main/.dev-graph)
#   run.sh run      GPU machine, repository root of the device copy (carry .dev-graph), $OUT
#       set. A background job synthesizes 30B-A3B Q2_0 and 80B-A3B IQ2_XS while the
#       foreground runs: the driver's graph exports and the 13.0 header's prototypes
#       (abi.txt), the runtime's graph replay test and graph benchmarks (675 empty kernels
#       as one graph vs 675 bound launches; one kernel node update), the GPU-vs-CPU tests
#       (resident decode through graphs, and bitwise against NoGraph); then, resident
#       (unlimited budget), ctx 1024, 256-token decode sequences (Reset, 8-token prompt) in
#       the modes of STRATA_BENCH_DECODE (bound: launches once bound per Forward; graph:
#       one replayed graph per token, node updates ahead; graphlate: updates just before
#       the launch), and one sequence with kernel times (events around each launch, graphs
#       off). Everything inside STRATA_RUN_BUDGET seconds (default 220). Writes
#       $OUT/summary.md, $OUT/rows.md (every ROW and BINS line), $OUT/abi.txt,
#       $OUT/bench-rows.tsv, $OUT/logs.tar.gz.
#   STRATA_RUN_DRY=1 run.sh run   the same flow with stub binaries (no GPU): checks the
#       script's logic and time accounting (STRATA_RUN_DRY_SLEEP: seconds per stub call).
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)

build() {
	set -e
	cd "$here/../../.."
	local d=${DEV:-/work/main/.dev-graph} target=sm_90
	rm -rf "$d" && mkdir -p "$d/co"
	export CGO_ENABLED=0
	go test -c -trimpath -ldflags=-s -tags strata_nodemo -o "$d/strata-run.test" ./cmd/strata-run
	xz -9e -T2 "$d/strata-run.test"
	go test -c -trimpath -ldflags=-s -o "$d/runtime-cuda.test" ./runtime/cuda
	xz -9e -T2 "$d/runtime-cuda.test"
	local flags
	flags=$(awk -F'\t' -v t="$target" '$1 == "target" && $2 == t { print $6 }' kernels/out/objects.txt)
	for fam in rmsnorm rmsnorm_row mmvq rope attention_decode quantize_q8_1 moe_decode sample gated_delta_net mmq moe_prefill attention_prefill; do
		awk -F'\t' -v t="$target" -v f="$fam" '$1 == "object" && $2 == t && $3 == f { print $4 "\t" $5 }' kernels/out/objects.txt |
			while IFS=$'\t' read -r src obj; do
				mkdir -p "$d/co/$(dirname "$obj")"
				# shellcheck disable=SC2086 # flags are a list
				clang-19 $flags -I "$(dirname "$src")" -I kernels/out/include "$src" -o "$d/co/$obj"
				case $fam in
				mmq | moe_prefill)
					python3 "$here/../2026-11-29-prefill-async/strip_ptx.py" "$d/co/$obj" "$d/co/$obj.s" '_mma_r(64|128)t64$'
					mv "$d/co/$obj.s" "$d/co/$obj"
					;;
				esac
			done
	done
	tar -C "$d" -czf "$d/co.tar.gz" co && rm -r "$d/co"
	cp "$here/run.sh" "$d/"
	git rev-parse HEAD >"$d/commit"
	git status --porcelain >>"$d/commit"
	ls -la "$d"
	du -sh "$d"
}

run() {
	local d=$here w=/tmp/graph t0=$SECONDS budget=${STRATA_RUN_BUDGET:-220} dry=${STRATA_RUN_DRY:-0}
	: "${OUT:?set OUT}"
	rm -rf "$w" && mkdir -p "$w/logs" "$w/models"
	local out=$w/logs t=$w/sr.test rt=$w/rc.test
	left() { echo $((budget - (SECONDS - t0) - $1)); }
	# lim WANT RESERVE: WANT seconds, cut to what is left after RESERVE (at least 5)
	lim() { local l; l=$(left "$2"); [ "$l" -lt "$1" ] && echo $((l > 5 ? l : 5)) || echo "$1"; }
	if [ "$dry" = 1 ]; then
		printf '#!/bin/sh\necho "stub $0 $*"; env | grep -E "^STRATA_" | sort; sleep %s\ncase "$STRATA_RUN_ARGS" in *" -o "*) f=${STRATA_RUN_ARGS##* -o }; : >"$f";; esac\necho "ROW | stub |"\necho "BINS stub"\necho PASS\n' "${STRATA_RUN_DRY_SLEEP:-1}" >"$t"
		chmod +x "$t"
		cp "$t" "$rt"
		mkdir -p "$w/co"
	else
		tar -C "$w" -xzf "$d/co.tar.gz"
		python3 -c 'import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2], "wb"))' "$d/strata-run.test.xz" "$t" && chmod +x "$t"
		python3 -c 'import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2], "wb"))' "$d/runtime-cuda.test.xz" "$rt" && chmod +x "$rt"
		{ nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm --format=csv; nproc; df -h /tmp; free -g; } >"$out/machine.log" 2>&1
	fi
	export STRATA_CO_DIR=$w/co STRATA_REQUIRE_GPU=1
	cat "$d/commit" >"$out/commit" 2>/dev/null
	local sum="$OUT/summary.md"
	echo "# run.sh run ($(date -u +%FT%TZ)), budget ${budget}s, dry $dry" >"$sum"
	echo >>"$sum"
	step() { # step NAME SECONDS-LIMIT LOG CMD...: run, record exit status and time
		local name=$1 secs=$2 log=$3 s=$SECONDS rc
		shift 3
		timeout "$secs" "$@" >"$log" 2>&1
		rc=$?
		echo "- $name: exit $rc in $((SECONDS - s)) s (limit $secs s, $((SECONDS - t0)) s so far)" | tee -a "$sum"
		return $rc
	}
	echo "setup: $((SECONDS - t0)) s" | tee -a "$sum"
	# Models, in the order the benchmarks want them; NAME.ready (or NAME.failed) when done.
	(
		for spec in "q30-q2_0|qwen3moe --preset qwen3-30b-a3b --type q2_0" "q80-iq2_xs|qwen3next --preset qwen3-next-80b-a3b --type iq2_xs"; do
			name=${spec%%|*}
			s=$SECONDS
			STRATA_RUN_ARGS="synth --arch ${spec#*|} -o $w/models/$name.gguf" timeout 100 "$t" -test.run '^TestCLI$' -test.v -test.timeout 300s >"$out/synth-$name.log" 2>&1 &
			echo $! >"$w/synth.pid"
			if wait $!; then
				echo "$((SECONDS - s))" >"$w/models/$name.ready"
			else
				echo "$((SECONDS - s))" >"$w/models/$name.failed"
			fi
		done
	) &
	local synth=$!
	# waitfor NAME RESERVE: wait until the model is ready (0) or failed / out of time (1)
	waitfor() {
		while [ ! -e "$w/models/$1.ready" ] && [ ! -e "$w/models/$1.failed" ] && [ "$(left "$2")" -gt 5 ]; do sleep 1; done
		echo "  (waited for $1 until $((SECONDS - t0)) s: $(ls "$w/models" | grep "^$1\." | grep -v gguf | tr '\n' ' '))" | tee -a "$sum"
		[ -e "$w/models/$1.ready" ]
	}
	# 0. what the driver exports and the 13.0 header declares for the graph calls
	{
		python3 -c 'import ctypes
l = ctypes.CDLL("libcuda.so.1")
v = ctypes.c_int(); l.cuDriverGetVersion(ctypes.byref(v)); print("cuDriverGetVersion", v.value)
for n in ["cuStreamBeginCapture_v2", "cuStreamEndCapture", "cuStreamGetCaptureInfo_v2", "cuStreamGetCaptureInfo_v3", "cuStreamGetCaptureInfo", "cuGraphInstantiateWithFlags", "cuGraphExecKernelNodeSetParams_v2", "cuGraphExecKernelNodeSetParams", "cuGraphLaunch", "cuGraphExecDestroy", "cuGraphDestroy"]:
    print(n, "exported" if hasattr(l, n) else "MISSING")'
		h=$(ls /usr/local/cuda*/include/cuda.h 2>/dev/null | head -1)
		echo "header: $h"
		[ -n "$h" ] && grep -nE "define cuStreamGetCaptureInfo |define cuGraphExecKernelNodeSetParams |define cuStreamBeginCapture |CUresult CUDAAPI cuStreamGetCaptureInfo(_v[23])?\(|CUresult CUDAAPI cuGraphExecKernelNodeSetParams(_v2)?\(|CUresult CUDAAPI cuStreamBeginCapture(_v2)?\(|CUresult CUDAAPI cuGraphInstantiateWithFlags\(|CU_STREAM_CAPTURE_MODE_RELAXED|CU_STREAM_CAPTURE_STATUS_ACTIVE" "$h"
		[ -n "$h" ] && grep -nA14 "typedef struct CUDA_KERNEL_NODE_PARAMS_v2_st" "$h"
	} >"$OUT/abi.txt" 2>&1
	# 1. the runtime: graph replay on the device; graph vs bound launches of empty kernels
	step "runtime/cuda TestGraphReplay, TestLauncherBound, graph benchmarks" "$(lim 30 150)" "$out/runtime-cuda.log" \
		"$rt" -test.run '^(TestGraphReplay|TestLauncherBound)$' -test.bench '^(BenchmarkGraphLaunch675|BenchmarkBound675)$' -test.benchtime 400x -test.count 3 -test.v -test.timeout 120s
	grep -E "^(--- |ok|FAIL|PASS)|^Benchmark.*ns/op|panic|graph_test" "$out/runtime-cuda.log" | head -20 | sed 's/^/    /' >>"$sum"
	step "runtime/cuda BenchmarkGraphSet, BenchmarkLaunchBound" "$(lim 15 140)" "$out/runtime-cuda-set.log" \
		"$rt" -test.run '^$' -test.bench '^(BenchmarkGraphSet|BenchmarkLaunchBound)$' -test.benchtime 20000x -test.count 3 -test.timeout 60s
	grep -E "^(ok|FAIL|PASS)|^Benchmark.*ns/op|panic" "$out/runtime-cuda-set.log" | head -10 | sed 's/^/    /' >>"$sum"
	# 1. tiny GPU vs CPU, both prompt paths, ForwardArgmax and LastLogits against the logits
	step "tiny GPU vs CPU (TestGPUEngineMatchesCPU, TestGPUEngineNextMatchesCPU)" "$(lim 80 90)" "$out/tiny.log" \
		"$t" -test.run '^(TestGPUEngineMatchesCPU|TestGPUEngineNextMatchesCPU)$' -test.v -test.timeout 300s
	grep -E "^\s*--- |^(ok|FAIL|PASS)|chunk [0-9]+: |near tie|NMSE .* > |bitwise|ForwardArgmax|graph|panic" "$out/tiny.log" | head -60 | sed 's/^/    /' >>"$sum"
	bench() { # bench NAME MODEL SECONDS RESERVE ENV...: TestGPUBench on MODEL
		local name=$1 m=$2 secs=$3 res=$4
		shift 4
		step "bench $name" "$(lim "$secs" "$res")" "$out/bench-$name.log" \
			env STRATA_GPU_BENCH=1 STRATA_BENCH_MODEL="$m" STRATA_BENCH_OUT="$out" STRATA_BENCH_LABEL="$name" STRATA_BENCH_POLICIES=decayed \
			STRATA_BENCH_CTX=1024 STRATA_BENCH_BUDGETS_MIB=0 STRATA_BENCH_TOKENS=256 STRATA_BENCH_BIN=32 "$@" "$t" -test.run '^TestGPUBench$' -test.v -test.timeout 300s
		grep -E "ceilings|load failed|FAIL|panic" "$out/bench-$name.log" | head -5 | sed 's/^/    /' >>"$sum"
	}
	# 2. resident decode A/B: each mode a 256-token sequence on one engine, alternating; then
	# one sequence with kernel times (graphs off while they are on)
	if waitfor q30-q2_0 60; then
		bench q30-q2_0 "$w/models/q30-q2_0.gguf" 50 40 STRATA_BENCH_DECODE=bound-argmax,graph-argmax,graphlate-argmax,bound-logits,graph-logits,bound-argmax,graph-argmax \
			STRATA_BENCH_KT_SPLITS=0
	fi
	if waitfor q80-iq2_xs 5; then
		bench q80-iq2_xs "$w/models/q80-iq2_xs.gguf" 60 3 STRATA_BENCH_DECODE=bound-argmax,graph-argmax,graphlate-argmax,bound-argmax,graph-argmax \
			STRATA_BENCH_KT_SPLITS=0
	fi
	# a synthesis still running (its wait ran out of time): stop it and its subshell, by id
	kill "$synth" 2>/dev/null
	[ -e "$w/synth.pid" ] && kill "$(cat "$w/synth.pid")" 2>/dev/null
	rm -f "$w"/models/*.gguf
	grep -h "^wrote" "$out"/synth-*.log | sed 's/^/    /' >>"$sum"
	{
		echo "## rows (as measured: ROW and BINS lines of the bench logs, in order)"
		echo
		echo "| budget MiB | policy | phase | cache slots | of experts | hit rate | MB copied/token | copy GB/s | launches/token | host µs/launch | sync ms/token | ms/token | tok/s | bound ms | bound/achieved | load s |"
		echo "|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
		for f in q30-q2_0 q80-iq2_xs; do
			[ -e "$out/bench-$f.log" ] || continue
			echo "| **$f** |"
			grep -E "^ROW " "$out/bench-$f.log" | sed 's/^ROW //'
		done
		for f in q30-q2_0 q80-iq2_xs; do
			[ -e "$out/bench-$f.log" ] || continue
			echo
			echo "$f:"
			echo
			grep -E "^BINS " "$out/bench-$f.log" | sed 's/^BINS /    /'
		done
	} >"$OUT/rows.md"
	cp "$out"/bench-rows.tsv "$OUT/" 2>/dev/null
	cp "$out"/gpu-engine-*.md "$OUT/" 2>/dev/null
	echo "total: $((SECONDS - t0)) s" | tee -a "$sum"
	tar -C "$w" -czf "$OUT/logs.tar.gz" logs
	true
}

case "${1:-run}" in
build) build ;;
run) run ;;
*)
	echo "usage: $0 build | run" >&2
	exit 2
	;;
esac
