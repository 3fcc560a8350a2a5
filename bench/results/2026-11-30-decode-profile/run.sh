#!/usr/bin/env bash
# Issue 11, session 6, helper pdl: where a resident decode token's GPU time goes (Nsight
# Compute, graph nodes profiled as kernels) and, in the second call, the decode path with
# programmatic dependent launch against the old one on the same binary.
#
#   run.sh build    build machine (Go + clang-19), from this worktree: gpu.test (model/gpu:
#       TestDecodeProfile), strata-run.test (synth, the GPU-vs-CPU engine tests), and when
#       STRATA_RUN_CALL=2 also parity.test and cuda.test (runtime/cuda) (CGO_ENABLED=0,
#       -tags strata_nodemo, stripped, xz), and the sm_90 PTX of every family the engine
#       launches (mmq and moe_prefill cut to the r64t64 and r128t64 mma variants), into
#       $DEV (default /work/main/.dev-pdl).
#   run.sh run      GPU machine, repository root of the device copy (carry .dev-pdl), $OUT
#       set. ptxas assembles every PTX file to a cubin (under the .ptx name, which the
#       driver loads as it would the PTX) while a background job synthesizes 30B-A3B Q2_0 and
#       80B-A3B IQ2_XS; then per model: TestDecodeProfile timed (STRATA_RUN_MODES, 128
#       tokens each) and TestDecodeProfile under
#         ncu --clock-control none --cache-control none --profile-from-start off
#             --graph-profiling node --metrics gpu__time_duration.sum,dram__bytes_read.sum,
#             dram__bytes_write.sum,launch__grid_size,launch__block_size
#       over STRATA_PROFILE_TOKENS (default 1) tokens after 4 warm ones, in the modes of
#       STRATA_RUN_PROFILE (default base). STRATA_RUN_CALL=2 adds, first and in parallel:
#       the runtime/cuda tests, the GPU-vs-CPU engine tests and the parity families of
#       STRATA_RUN_PARITY, then runtime/cuda's BenchmarkGraphDep483. The models of
#       STRATA_RUN_NOPF_MODELS are timed again (STRATA_RUN_NOPF_MODES) on co-nopf: co with
#       mmvq built -DSTRATA_NO_L2_PREFETCH. Everything inside STRATA_RUN_BUDGET seconds (default 180).
#       Writes $OUT/summary.md, $OUT/ncu-*.csv, $OUT/logs.tar.gz.
#   STRATA_RUN_DRY=1 run.sh run   the same flow with stub binaries (no GPU).
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)

build() {
	set -e
	cd "$here/../../.."
	local d=${DEV:-/work/main/.dev-pdl} target=sm_90 flags
	rm -rf "$d" && mkdir -p "$d/co"
	export CGO_ENABLED=0
	go test -c -trimpath -ldflags=-s -tags strata_nodemo -o "$d/gpu.test" ./model/gpu
	go test -c -trimpath -ldflags=-s -tags strata_nodemo -o "$d/strata-run.test" ./cmd/strata-run
	if [ "${STRATA_RUN_CALL:-1}" = 2 ]; then
		go test -c -trimpath -ldflags=-s -tags strata_nodemo -o "$d/parity.test" ./parity
		go test -c -trimpath -ldflags=-s -tags strata_nodemo -o "$d/cuda.test" ./runtime/cuda
	fi
	xz -9e -T2 "$d"/*.test
	flags=$(awk -F'\t' -v t="$target" '$1 == "target" && $2 == t { print $6 }' kernels/out/objects.txt)
	for fam in rmsnorm rmsnorm_row mmvq rope attention_decode quantize_q8_1 moe_decode sample gated_delta_net mmq moe_prefill attention_prefill embed dequant fill imma_tile prelude_probe; do
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
	# mmvq without the L2 prefetch (measurement): the tree co-nopf is co with this file swapped
	local mobj msrc
	IFS=$'\t' read -r msrc mobj < <(awk -F'\t' -v t="$target" '$1 == "object" && $2 == t && $3 == "mmvq" { print $4 "\t" $5 }' kernels/out/objects.txt)
	mkdir -p "$d/nopf/$(dirname "$mobj")"
	# shellcheck disable=SC2086 # flags are a list
	clang-19 $flags -DSTRATA_NO_L2_PREFETCH -I "$(dirname "$msrc")" -I kernels/out/include "$msrc" -o "$d/nopf/$mobj"
	tar -C "$d" -czf "$d/co.tar.gz" co nopf && rm -r "$d/co" "$d/nopf"
	cp "$here/run.sh" "$d/"
	git rev-parse HEAD >"$d/commit"
	git status --porcelain >>"$d/commit"
	ls -la "$d"
	du -sh "$d"
}

run() {
	local d=$here w=/tmp/pdl t0=$SECONDS budget=${STRATA_RUN_BUDGET:-180} dry=${STRATA_RUN_DRY:-0} call=${STRATA_RUN_CALL:-1}
	: "${OUT:?set OUT}"
	rm -rf "$w" && mkdir -p "$w/logs" "$w/models"
	local out=$w/logs g=$w/gpu.test t=$w/sr.test p=$w/parity.test c=$w/cuda.test NCU
	left() { echo $((budget - (SECONDS - t0) - $1)); }
	# lim WANT RESERVE: WANT seconds, cut to what is left after RESERVE (at least 5)
	lim() { local l; l=$(left "$2"); [ "$l" -lt "$1" ] && echo $((l > 5 ? l : 5)) || echo "$1"; }
	local sum="$OUT/summary.md"
	echo "# run.sh run ($(date -u +%FT%TZ)), call $call, budget ${budget}s, dry $dry, commit $(head -1 "$d/commit" 2>/dev/null)" >"$sum"
	if [ "$dry" = 1 ]; then
		printf '#!/bin/sh\necho "stub $0 $*"; env | grep -E "^STRATA_" | sort; sleep %s\ncase "$STRATA_RUN_ARGS" in *" -o "*) f=${STRATA_RUN_ARGS##* -o }; : >"$f";; esac\necho "ROW | stub |"\necho "PROFILED stub"\necho "--- PASS: stub"\necho PASS\n' "${STRATA_RUN_DRY_SLEEP:-1}" >"$g"
		chmod +x "$g"
		for b in "$t" "$p" "$c"; do cp "$g" "$b"; done
		printf '#!/bin/sh\necho "ncu $*"\nwhile [ $# -gt 0 ]; do case $1 in -o) touch "$2.ncu-rep"; shift;; -i) echo "\\"ID\\",\\"Kernel Name\\""; exit 0;; env) break;; esac; shift; done\n[ $# -gt 0 ] && exec "$@"\n' >"$w/ncu"
		chmod +x "$w/ncu"
		NCU=$w/ncu
		mkdir -p "$w/co/sm_90" "$w/nopf/sm_90" && echo x >"$w/co/sm_90/a.ptx" && echo y >"$w/nopf/sm_90/a.ptx"
	else
		tar -C "$w" -xzf "$d/co.tar.gz"
		for b in gpu:gpu strata-run:sr parity:parity cuda:cuda; do
			[ -f "$d/${b%%:*}.test.xz" ] || continue
			python3 -c 'import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2], "wb"))' "$d/${b%%:*}.test.xz" "$w/${b#*:}.test" && chmod +x "$w/${b#*:}.test"
		done
		NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
		{ nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm,clocks.max.mem --format=csv; nproc; free -g; echo "ncu=$NCU"; "$NCU" --version; } >"$out/machine.log" 2>&1
	fi
	cat "$d/commit" >"$out/commit" 2>/dev/null
	export STRATA_CO_DIR=$w/co STRATA_REQUIRE_GPU=1
	echo "- setup done at $((SECONDS - t0)) s" | tee -a "$sum"
	# Models in the background (CPU only); NAME.ready or NAME.failed when done.
	(
		for spec in "q30-q2_0|qwen3moe --preset qwen3-30b-a3b --type q2_0" "q80-iq2_xs|qwen3next --preset qwen3-next-80b-a3b --type iq2_xs"; do
			name=${spec%%|*}
			s=$SECONDS
			if STRATA_RUN_ARGS="synth --arch ${spec#*|} -o $w/models/$name.gguf" timeout 100 "$t" -test.run '^TestCLI$' -test.v -test.timeout 300s >"$out/synth-$name.log" 2>&1; then
				echo "$((SECONDS - s))" >"$w/models/$name.ready"
			else
				echo "$((SECONDS - s))" >"$w/models/$name.failed"
			fi
		done
	) &
	local synth=$!
	# ptxas: every PTX file to a cubin under its own name, 16 at a time.
	local s=$SECONDS P
	P=$(command -v ptxas || echo /usr/local/cuda/bin/ptxas)
	if [ "$dry" = 1 ]; then
		printf '#!/bin/sh\ncp "$3" "$5"\n' >"$w/ptxas" && chmod +x "$w/ptxas"
		P=$w/ptxas
	fi
	find "$w/co" "$w/nopf" -name '*.ptx' | xargs -P 16 -I{} sh -c '"$1" -v -arch=sm_90 "$2" -o "$2.cubin" >"$2.ptxas.log" 2>&1 && mv "$2.cubin" "$2" || echo "ptxas failed: $2"' _ "$P" {} >"$out/ptxas.log" 2>&1
	find "$w/co" "$w/nopf" -name '*.ptxas.log' | while read -r f; do echo "== $f"; cat "$f"; done >"$out/ptxas-v.log" 2>&1
	echo "- ptxas -v: $(grep -cE '[1-9][0-9]* bytes spill' "$out/ptxas-v.log") functions with spills" | tee -a "$sum"
	# co-nopf: co with nopf's files swapped in
	mkdir -p "$w/co-nopf" && cp -r "$w/co/." "$w/co-nopf/" && cp -r "$w/nopf/." "$w/co-nopf/"
	echo "- ptxas: $(find "$w/co" "$w/nopf" -name '*.ptx' | wc -l) files in $((SECONDS - s)) s, $(grep -c failed "$out/ptxas.log") failed" | tee -a "$sum"
	step() { # step NAME SECONDS-LIMIT CMD...
		local name=$1 secs=$2 s=$SECONDS
		shift 2
		timeout "$secs" "$@" >"$out/$name.log" 2>&1
		echo "- $name: exit $? in $((SECONDS - s)) s (limit $secs s, $((SECONDS - t0)) s so far)" | tee -a "$sum"
	}
	if [ "$call" = 2 ]; then
		local pids=() grp i=0 p1
		p1=$(lim 100 65)
		for grp in ${STRATA_RUN_PARITY:-}; do
			echo "$grp" >"$out/parity-$i.group"
			timeout "$p1" "$p" -test.v -test.timeout "$((p1 - 3))s" -test.run "TestParity/sm_90/$grp" >"$out/parity-$i.log" 2>&1 &
			pids+=($!)
			i=$((i + 1))
		done
		timeout "$p1" "$c" -test.v -test.timeout "$((p1 - 3))s" >"$out/cuda-tests.log" 2>&1 &
		pids+=($!)
		step engine-tests "$p1" "$t" -test.run '^(TestGPUEngineMatchesCPU|TestGPUEngineNextMatchesCPU)$' -test.v -test.timeout "$((p1 - 3))s"
		wait "${pids[@]}"
		echo "- parity and runtime/cuda done at $((SECONDS - t0)) s" | tee -a "$sum"
		step bench-graphdep 30 "$c" -test.run '^$' -test.bench 'GraphDep483' -test.benchtime 300x
	fi
	waitfor() { # waitfor NAME RESERVE: the model is ready (0) or failed / out of time (1)
		while [ ! -e "$w/models/$1.ready" ] && [ ! -e "$w/models/$1.failed" ] && [ "$(left "$2")" -gt 5 ]; do sleep 1; done
		echo "  (waited for $1 until $((SECONDS - t0)) s: $(ls "$w/models" | grep "^$1\." | grep -v gguf | tr '\n' ' '))" | tee -a "$sum"
		[ -e "$w/models/$1.ready" ]
	}
	local m ptok=${STRATA_PROFILE_TOKENS:-1}
	for m in q30-q2_0 q80-iq2_xs; do
		waitfor "$m" 30 || continue
		step "time-$m" "$(lim 45 30)" env STRATA_DECODE_PROFILE=1 STRATA_BENCH_MODEL="$w/models/$m.gguf" \
			STRATA_DECODE_MODES="${STRATA_RUN_MODES:-base}" STRATA_BENCH_TOKENS=128 STRATA_BENCH_CTX=1024 \
			"$g" -test.run '^TestDecodeProfile$' -test.v -test.timeout 300s
		case " ${STRATA_RUN_NOPF_MODELS:-} " in
		*" $m "*)
			step "time-nopf-$m" "$(lim 30 25)" env STRATA_CO_DIR="$w/co-nopf" STRATA_DECODE_PROFILE=1 STRATA_BENCH_MODEL="$w/models/$m.gguf" \
				STRATA_DECODE_MODES="${STRATA_RUN_NOPF_MODES:-nopdl,pdl}" STRATA_BENCH_TOKENS=128 STRATA_BENCH_CTX=1024 \
				"$g" -test.run '^TestDecodeProfile$' -test.v -test.timeout 300s
			;;
		esac
		local pm
		for pm in ${STRATA_RUN_PROFILE-base}; do
			step "ncu-$m-$pm" "$(lim 75 5)" "$NCU" --clock-control none --cache-control none --profile-from-start off \
				--graph-profiling node --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,launch__grid_size,launch__block_size \
				-f -o "$w/ncu-$m-$pm" \
				env STRATA_DECODE_PROFILE=1 STRATA_BENCH_MODEL="$w/models/$m.gguf" STRATA_DECODE_MODES=none \
				STRATA_PROFILE_MODES="$pm" STRATA_PROFILE_TOKENS="$ptok" STRATA_BENCH_CTX=1024 \
				"$g" -test.run '^TestDecodeProfile$' -test.v -test.timeout 300s
			[ -f "$w/ncu-$m-$pm.ncu-rep" ] && "$NCU" -i "$w/ncu-$m-$pm.ncu-rep" --page raw --csv >"$OUT/ncu-$m-$pm.csv" 2>"$out/ncu-import-$m-$pm.log"
		done
	done
	kill "$synth" 2>/dev/null
	rm -f "$w"/models/*.gguf
	{
		echo
		if [ "$call" = 2 ]; then
			echo "## parity"
			for f in "$out"/parity-*.log; do
				[ -e "$f" ] || continue
				echo "- $(cat "${f%.log}.group"): passed $(grep -cE '^\s*--- PASS: TestParity/.*/.*/.*/' "$f"), failed $(grep -cE '^\s*--- FAIL: TestParity/.*/.*/.*/' "$f") $(grep -E '^(ok|PASS|FAIL)$' "$f" | tr '\n' ' ')"
			done
			grep -hE "^\s*--- FAIL|panic|test timed out" "$out"/parity-*.log 2>/dev/null | head -20
			echo "## runtime/cuda"
			grep -E "^\s*--- (FAIL|SKIP|PASS)|^(ok|FAIL|PASS)$|panic" "$out/cuda-tests.log" | head -30
			echo "## engine tests"
			grep -E "^\s*--- |^(ok|FAIL|PASS)$|NMSE|panic" "$out/engine-tests.log" | head -40
			echo "## graph of 483 dependent launches (runtime/cuda BenchmarkGraphDep483)"
			grep -E "^Benchmark|FAIL|panic" "$out/bench-graphdep.log"
		fi
		echo "## decode"
		for f in "$out"/time-*.log; do
			[ -e "$f" ] || continue
			echo "### $(basename "$f" .log)"
			grep -hE "^model |^ROW |^PROFILED |FAIL|panic|differ" "$f"
		done
		grep -hE "^model |^PROFILED |FAIL|panic" "$out"/ncu-*.log 2>/dev/null
		grep -hE "^==(PROF|ERROR|WARNING)==" "$out"/ncu-*.log 2>/dev/null | sort | uniq -c | head -20
		ls -la "$OUT"
		echo "total: $((SECONDS - t0)) s"
	} >>"$sum"
	tar -C "$w" -czf "$OUT/logs.tar.gz" logs
	cat "$sum"
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
