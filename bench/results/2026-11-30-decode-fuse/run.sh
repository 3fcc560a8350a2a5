#!/usr/bin/env bash
# Fewer launches per decode token (issue 11), session 5, helper fuse: attention_decode's prep
# (per-head q/k norm, rope, k/v store in one launch) and reduceq (reduce + Q8_1 of o). Build
# here, one H200 call.
#
#   run.sh build    build machine (Go + clang-19), from this worktree: strata-run.test
#       (synth, the GPU-vs-CPU engine tests), gpu.test (model/gpu: TestPrepBench), parity.test
#       (CGO_ENABLED=0, stripped, xz) and the sm_90 code objects of every family the engine
#       launches (mmq and moe_prefill cut to the r64t64 and r128t64 mma variants, as
#       ../2026-11-29-engine-graph/run.sh does), into $DEV (default /work/main/.dev-fuse)
#   run.sh run      GPU machine, repository root of the device copy (carry .dev-fuse), $OUT
#       set. Background: synthesize 30B-A3B Q2_0 then 80B-A3B IQ2_XS; parity of rope and
#       of attention_decode's prep (every case) and reduceq (cases of ≤ 4 digits of n) with
#       fresh seeds. Foreground: the GPU-vs-CPU engine tests (prep the default), then, once
#       parity is done, TestPrepBench on each model: old, new, old, new (128 greedy tokens
#       each, graphs, resident) and a kernel-time table per path. Everything inside
#       STRATA_RUN_BUDGET seconds (default 230). Writes $OUT/summary.md, $OUT/bench.md,
#       $OUT/logs.tar.gz.
#   STRATA_RUN_BENCH_ONLY=1 run.sh run   only the syntheses and the benchmarks (the call 1
#       bundle's bench step failed: gpu.test had no backend registered; fixed after it).
#   STRATA_RUN_DRY=1 run.sh run   the same flow with stub binaries (no GPU).
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)

build() {
	set -e
	cd "$here/../../.."
	local d=${DEV:-/work/main/.dev-fuse} target=sm_90
	rm -rf "$d" && mkdir -p "$d/co"
	export CGO_ENABLED=0
	go test -c -trimpath -ldflags=-s -tags strata_nodemo -o "$d/strata-run.test" ./cmd/strata-run
	go test -c -trimpath -ldflags=-s -tags strata_nodemo -o "$d/gpu.test" ./model/gpu
	go test -c -trimpath -ldflags=-s -tags strata_nodemo -o "$d/parity.test" ./parity
	xz -9e -T2 "$d/strata-run.test" "$d/gpu.test" "$d/parity.test"
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
	local d=$here w=/tmp/fuse t0=$SECONDS budget=${STRATA_RUN_BUDGET:-230} dry=${STRATA_RUN_DRY:-0} only=${STRATA_RUN_BENCH_ONLY:-0}
	: "${OUT:?set OUT}"
	rm -rf "$w" && mkdir -p "$w/logs" "$w/models"
	local out=$w/logs t=$w/sr.test g=$w/gpu.test p=$w/parity.test
	left() { echo $((budget - (SECONDS - t0) - $1)); }
	# lim WANT RESERVE: WANT seconds, cut to what is left after RESERVE (at least 5)
	lim() { local l; l=$(left "$2"); [ "$l" -lt "$1" ] && echo $((l > 5 ? l : 5)) || echo "$1"; }
	if [ "$dry" = 1 ]; then
		printf '#!/bin/sh\necho "stub $0 $*"; env | grep -E "^STRATA_" | sort; sleep %s\ncase "$STRATA_RUN_ARGS" in *" -o "*) f=${STRATA_RUN_ARGS##* -o }; : >"$f";; esac\necho "ROW | stub |"\necho "KT stub"\necho "--- PASS: stub"\necho PASS\n' "${STRATA_RUN_DRY_SLEEP:-1}" >"$t"
		chmod +x "$t"
		cp "$t" "$g"
		cp "$t" "$p"
		mkdir -p "$w/co"
	else
		tar -C "$w" -xzf "$d/co.tar.gz"
		for b in strata-run:sr gpu:gpu parity:parity; do
			python3 -c 'import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2], "wb"))' "$d/${b%%:*}.test.xz" "$w/${b#*:}.test" && chmod +x "$w/${b#*:}.test"
		done
		{ nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm --format=csv; nproc; df -h /tmp; free -g; } >"$out/machine.log" 2>&1
	fi
	export STRATA_CO_DIR=$w/co STRATA_REQUIRE_GPU=1
	cat "$d/commit" >"$out/commit" 2>/dev/null
	local sum="$OUT/summary.md"
	echo "# run.sh run ($(date -u +%FT%TZ)), budget ${budget}s, dry $dry, bench only $only" >"$sum"
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
	waitfor() { # waitfor NAME RESERVE: the model is ready (0) or failed / out of time (1)
		while [ ! -e "$w/models/$1.ready" ] && [ ! -e "$w/models/$1.failed" ] && [ "$(left "$2")" -gt 5 ]; do sleep 1; done
		echo "  (waited for $1 until $((SECONDS - t0)) s: $(ls "$w/models" | grep "^$1\." | grep -v gguf | tr '\n' ' '))" | tee -a "$sum"
		[ -e "$w/models/$1.ready" ]
	}
	# Parity (background, fresh seeds): rope (its template changed form), attention_decode
	# prep on every case, reduceq on the cases of n < 10000 (the larger ones take the
	# float64 reference ~90 s; reduceq's split is the split variant's, unchanged).
	[ "$only" = 1 ] || (
		s=$SECONDS
		timeout 100 "$p" -test.run '^TestParity$/^sm_90$/^(rope|attention_decode)$/^(neox|prep_f16|prep_q8)$' -test.v -test.timeout 300s >"$out/parity-prep.log" 2>&1
		echo "- parity rope + attention_decode prep: exit $? in $((SECONDS - s)) s" >"$w/parity1.done"
		s=$SECONDS
		timeout 100 "$p" -test.run '^TestParity$/^sm_90$/^attention_decode$/^(reduceq_f16|reduceq_q8)$/^n=[0-9]{1,4},' -test.v -test.timeout 300s >"$out/parity-reduceq.log" 2>&1
		echo "- parity attention_decode reduceq (n < 10000): exit $? in $((SECONDS - s)) s" >"$w/parity2.done"
	) &
	local par=$!
	# 1. tiny GPU vs CPU, both prompt paths, prep and reduceq the default
	[ "$only" = 1 ] || step "tiny GPU vs CPU (TestGPUEngineMatchesCPU, TestGPUEngineNextMatchesCPU)" "$(lim 80 100)" "$out/tiny.log" \
		"$t" -test.run '^(TestGPUEngineMatchesCPU|TestGPUEngineNextMatchesCPU)$' -test.v -test.timeout 300s
	[ "$only" = 1 ] || grep -E "^\s*--- |^(ok|FAIL|PASS)|chunk [0-9]+: |near tie|NMSE .* > |bitwise|panic" "$out/tiny.log" | head -60 | sed 's/^/    /' >>"$sum"
	# parity must be done before the benchmarks (they share the GPU)
	while kill -0 "$par" 2>/dev/null && [ "$(left 75)" -gt 5 ]; do sleep 1; done
	kill "$par" 2>/dev/null
	cat "$w"/parity*.done 2>/dev/null | tee -a "$sum"
	for f in $(ls "$out"/parity-*.log 2>/dev/null); do
		grep -E "^\s*--- FAIL|^(ok|FAIL|PASS)|panic|seed [0-9]+|^parity on" "$f" | head -20 | sed 's/^/    /' >>"$sum"
		grep -E "attention_decode/|rope/" "$f" | grep -vE "^\s*(---|===)" | head -80 >>"$OUT/parity.md"
	done
	bench() { # bench NAME SECONDS RESERVE: TestPrepBench on the model NAME
		step "bench $1" "$(lim "$2" "$3")" "$out/bench-$1.log" \
			env STRATA_PREP_BENCH=1 STRATA_BENCH_MODEL="$w/models/$1.gguf" STRATA_PREP_MODES=old,new,old,new STRATA_BENCH_TOKENS=128 \
			STRATA_BENCH_KT_TOKENS=16 STRATA_BENCH_CTX=1024 "$g" -test.run '^TestPrepBench$' -test.v -test.timeout 300s
		{
			echo "## $1"
			echo
			grep -E "^model |^\| path|^\|---" "$out/bench-$1.log" | head -3
			grep -E "^ROW " "$out/bench-$1.log" | sed 's/^ROW //'
			sed -n '/^KT /,$p' "$out/bench-$1.log" | grep -vE "^(--- |PASS|ok|FAIL)"
			echo
		} >>"$OUT/bench.md"
		grep -E "FAIL|panic|Error" "$out/bench-$1.log" | head -5 | sed 's/^/    /' >>"$sum"
	}
	if waitfor q30-q2_0 60; then
		bench q30-q2_0 60 35
	fi
	if waitfor q80-iq2_xs 5; then
		bench q80-iq2_xs 60 3
	fi
	kill "$synth" 2>/dev/null
	[ -e "$w/synth.pid" ] && kill "$(cat "$w/synth.pid")" 2>/dev/null
	rm -f "$w"/models/*.gguf
	grep -h "^wrote" "$out"/synth-*.log | sed 's/^/    /' >>"$sum"
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
