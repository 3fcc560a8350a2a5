#!/usr/bin/env bash
# moe_prefill through the slot tables (issue 11; session 5, helper ptab): one H200 call.
#
#   run.sh build    build machine (Go + clang-19), from this checkout: strata-run.test and
#       parity.test (CGO_ENABLED=0, stripped, xz), the sm_90 PTX of every family the engine
#       launches (mmq and moe_prefill cut to the r64t64 and r128t64 mma variants, the
#       engine's "eco" tree, as engine-budgets' bundle) and moe_prefill's whole PTX, into
#       $DEV (default /work/main/.dev-ptab).
#   run.sh run      GPU machine, repository root of the device copy (carry .dev-ptab), $OUT
#       set. ptxas assembles the eco tree and six moe_prefill trees (one per op × tile, each
#       holding only those variants) while the 80B-A3B IQ2_XS and 30B-A3B Q2_0 models are
#       synthesized; then, in parallel: moe_prefill parity (STRATA_REQUIRE_GPU=1, one process
#       per tree, every variant and case) and TestGPUEngineMatchesCPU +
#       TestGPUEngineNextMatchesCPU; then, alone on the GPU, TestGPUBench:
#         80B IQ2_XS at 16384 MiB, misses auto and copy, the 512-token prompt with
#           STRATA_BENCH_PTAB=host,off,auto,host (call 1, at 03a836c, named these modes
#           auto,off,copy,auto: its "auto" was today's "host", its "copy" today's "auto")
#         30B Q2_0 at 12288 MiB, auto (resident: every layer direct), PTAB=auto,all,auto,all
#           (dense stacks against the tables), then at 4096 MiB, auto and copy,
#           PTAB=host,off,auto,host (call 1: auto,off,auto, i.e. host,off,host), each if
#           the time is left
#       Everything inside STRATA_RUN_BUDGET seconds (default 190). Writes $OUT/summary.md,
#       $OUT/rows.md (the ROW lines), $OUT/logs.tar.gz.
#   STRATA_RUN_DRY=1 run.sh run   the same flow with stub binaries (no GPU).
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)

build() {
	set -e
	cd "$here/../../.."
	local d=${DEV:-/work/main/.dev-ptab} target=sm_90 flags strip=bench/results/2026-11-29-prefill-async/strip_ptx.py
	rm -rf "$d" && mkdir -p "$d/co" "$d/mp"
	export CGO_ENABLED=0
	go test -c -trimpath -ldflags=-s -tags strata_nodemo -o "$d/strata-run.test" ./cmd/strata-run
	go test -c -trimpath -ldflags=-s -tags strata_nodemo -o "$d/parity.test" ./parity
	xz -9e -T2 "$d"/*.test
	flags=$(awk -F'\t' -v t="$target" '$1 == "target" && $2 == t { print $6 }' kernels/out/objects.txt)
	for fam in rmsnorm rmsnorm_row mmvq rope attention_decode quantize_q8_1 moe_decode sample gated_delta_net mmq moe_prefill attention_prefill embed dequant; do
		awk -F'\t' -v t="$target" -v f="$fam" '$1 == "object" && $2 == t && $3 == f { print $4 "\t" $5 }' kernels/out/objects.txt |
			while IFS=$'\t' read -r src obj; do
				mkdir -p "$d/co/$(dirname "$obj")"
				# shellcheck disable=SC2086 # flags are a list
				clang-19 $flags -I "$(dirname "$src")" -I kernels/out/include "$src" -o "$d/co/$obj"
				case $fam in
				moe_prefill)
					cp "$d/co/$obj" "$d/mp/moe_prefill.ptx"
					python3 "$strip" "$d/co/$obj" "$d/co/$obj.s" '_mma_r(64|128)t64$'
					mv "$d/co/$obj.s" "$d/co/$obj"
					;;
				mmq)
					python3 "$strip" "$d/co/$obj" "$d/co/$obj.s" '_mma_r(64|128)t64$'
					mv "$d/co/$obj.s" "$d/co/$obj"
					;;
				esac
			done
	done
	tar -C "$d" -czf "$d/co.tar.gz" co mp && rm -r "$d/co" "$d/mp"
	cp "$here/run.sh" "$strip" "$d/"
	git rev-parse HEAD >"$d/commit"
	git status --porcelain >>"$d/commit"
	ls -la "$d"
	du -sh "$d"
}

stub() {
	cat >"$1" <<STUB
#!/bin/sh
echo "stub \$0 \$*"; env | grep -E "^STRATA_" | sort
sleep ${STRATA_RUN_DRY_SLEEP:-1}
case "\$STRATA_RUN_ARGS" in *" -o "*) f=\${STRATA_RUN_ARGS##* -o }; : >"\$f";; esac
echo "--- PASS: TestParity/sm_90/moe_prefill/q80_mma_r64t64/x"
[ -n "\${STRATA_BENCH_BUDGETS_MIB:-}" ] || { echo PASS; exit 0; }
for b in \$(echo "\$STRATA_BENCH_BUDGETS_MIB" | tr , ' '); do
	for m in \$(echo "\${STRATA_BENCH_MISSES:-auto}" | tr , ' '); do
		echo "ROW | \$b | decayed/\$m | decode | 1 | 2 | 0.9 | 1 | 1 | 1 | 1 | 1 | 1 | 100.0 | 1 | 1 | 1 |"
		for p in \$(echo "\${STRATA_BENCH_PTAB:-auto}" | tr , ' '); do
			echo "ROW | \$b | decayed/\$m | prefill 512 batched (moe_prefill 48, fallback 0) tables=\$p | 1 | 2 | 0.9 | 1 | 1 | 1 | 1 | 1 | 1 | 2000.0 | 1 | 1 | 1 |"
		done
	done
done
echo PASS
STUB
	chmod +x "$1"
}

run() {
	local d=$here w=/tmp/ptab t0=$SECONDS budget=${STRATA_RUN_BUDGET:-190} dry=${STRATA_RUN_DRY:-0}
	: "${OUT:?set OUT}"
	rm -rf "$w" && mkdir -p "$w/logs" "$w/models"
	local out=$w/logs st=$w/sr.test pt=$w/parity.test
	left() { echo $((budget - (SECONDS - t0) - $1)); }
	lim() { local l; l=$(left "$2"); [ "$l" -lt "$1" ] && echo $((l > 5 ? l : 5)) || echo "$1"; }
	local sum="$OUT/summary.md" trees="mma_r64t64 mma_r128t64 mma_r128t32 dp4a_r64t64 dp4a_r128t64 dp4a_r128t32" tr
	echo "# run.sh run ($(date -u +%FT%TZ)), budget ${budget}s, dry $dry, commit $(head -1 "$d/commit" 2>/dev/null)" >"$sum"
	echo >>"$sum"
	local ptx=""
	if [ "$dry" = 1 ]; then
		stub "$st" && stub "$pt"
		mkdir -p "$w/co"
		for tr in $trees; do mkdir -p "$w/mp-$tr/sm_90"; done
	else
		tar -C "$w" -xzf "$d/co.tar.gz"
		for b in strata-run:sr parity:parity; do
			python3 -c 'import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2], "wb"))' "$d/${b%%:*}.test.xz" "$w/${b#*:}.test" && chmod +x "$w/${b#*:}.test"
		done
		for tr in $trees; do
			mkdir -p "$w/mp-$tr/sm_90"
			python3 "$d/strip_ptx.py" "$w/mp/moe_prefill.ptx" "$w/mp-$tr/sm_90/moe_prefill.ptx" "_${tr}\$" 2>>"$out/strip.log"
		done
		{ nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm --format=csv; nproc; free -g; } >"$out/machine.log" 2>&1
		local P
		P=$(command -v ptxas || ls /usr/local/cuda*/bin/ptxas 2>/dev/null | head -1)
		(
			for f in "$w"/co/sm_90/*.ptx "$w"/mp-*/sm_90/*.ptx; do
				(timeout 90 "$P" -arch=sm_90 "$f" -o "$f.cubin" >"$f.ptxas.log" 2>&1 && mv "$f.cubin" "$f") &
			done
			wait
		) &
		ptx=$!
	fi
	export STRATA_REQUIRE_GPU=1
	cat "$d/commit" >"$out/commit" 2>/dev/null
	echo "- setup: $((SECONDS - t0)) s" | tee -a "$sum"
	(
		for spec in "q80-iq2_xs|qwen3next --preset qwen3-next-80b-a3b --type iq2_xs" "q30-q2_0|qwen3moe --preset qwen3-30b-a3b --type q2_0"; do
			name=${spec%%|*}
			s=$SECONDS
			if STRATA_CO_DIR=$w/co STRATA_RUN_ARGS="synth --arch ${spec#*|} -o $w/models/$name.gguf" timeout 100 "$st" -test.run '^TestCLI$' -test.v -test.timeout 300s >"$out/synth-$name.log" 2>&1; then
				echo "$((SECONDS - s))" >"$w/models/$name.ready"
			else
				echo "$((SECONDS - s))" >"$w/models/$name.failed"
			fi
		done
	) &
	local synth=$!
	if [ -n "$ptx" ]; then
		wait "$ptx"
		echo "- ptxas: $(ls "$w"/co/sm_90/*.ptx "$w"/mp-*/sm_90/*.ptx | wc -l) files, $(grep -lE "error|fatal" "$w"/co/sm_90/*.ptxas.log "$w"/mp-*/sm_90/*.ptxas.log 2>/dev/null | wc -l) failed, done at $((SECONDS - t0)) s" | tee -a "$sum"
		cat "$w"/co/sm_90/*.ptxas.log "$w"/mp-*/sm_90/*.ptxas.log >"$out/ptxas.log" 2>/dev/null
	fi
	# Phase 1: parity (a process per tree) and the engine tests, in parallel.
	local p1 pids=()
	p1=$(lim 75 105)
	for tr in $trees; do
		STRATA_CO_DIR=$w/mp-$tr timeout "$p1" "$pt" -test.v -test.timeout "$((p1 - 3))s" -test.run "TestParity/sm_90/moe_prefill/[a-z0-9]+_$tr/" >"$out/parity-$tr.log" 2>&1 &
		pids+=($!)
	done
	STRATA_CO_DIR=$w/co timeout "$p1" "$st" -test.run '^(TestGPUEngineMatchesCPU|TestGPUEngineNextMatchesCPU)$' -test.v -test.timeout 300s >"$out/engine-tests.log" 2>&1 &
	local eng=$!
	wait "${pids[@]}"
	echo "- parity: done at $((SECONDS - t0)) s (limit $p1 s)" | tee -a "$sum"
	wait "$eng"
	echo "- engine tests: exit $? at $((SECONDS - t0)) s" | tee -a "$sum"
	waitfor() {
		while [ ! -e "$w/models/$1.ready" ] && [ ! -e "$w/models/$1.failed" ] && [ "$(left "$2")" -gt 5 ]; do sleep 1; done
		[ -e "$w/models/$1.ready" ]
	}
	step() { # step NAME SECONDS-LIMIT CMD...
		local name=$1 secs=$2 s=$SECONDS
		shift 2
		timeout "$secs" "$@" >"$out/$name.log" 2>&1
		echo "- $name: exit $? in $((SECONDS - s)) s (limit $secs s, $((SECONDS - t0)) s so far)" | tee -a "$sum"
	}
	bench() { # bench NAME MODEL SECONDS RESERVE BUDGETS MISSES PTAB
		step "bench-$1" "$(lim "$3" "$4")" env STRATA_CO_DIR="$w/co" STRATA_GPU_BENCH=1 STRATA_BENCH_MODEL="$2" STRATA_BENCH_OUT="$out" STRATA_BENCH_LABEL="$1" \
			STRATA_BENCH_POLICIES=decayed STRATA_BENCH_CTX=1024 STRATA_BENCH_TOKENS=16 STRATA_BENCH_CHUNK=512 STRATA_BENCH_PREFILL=512 \
			STRATA_BENCH_BUDGETS_MIB="$5" STRATA_BENCH_MISSES="$6" STRATA_BENCH_PTAB="$7" "$st" -test.run '^TestGPUBench$' -test.v -test.timeout 300s
		grep -E "ceilings:|expert misses|load failed|FAIL|panic" "$out/bench-$1.log" | head -8 | sed 's/^/    /' >>"$sum"
	}
	if waitfor q80-iq2_xs 30; then
		bench q80-iq2_xs "$w/models/q80-iq2_xs.gguf" 60 25 16384 auto,copy host,off,auto,host
	else
		echo "- bench q80: model not ready ($(left 0) s left)" | tee -a "$sum"
	fi
	rm -f "$w/models/q80-iq2_xs.gguf"
	if waitfor q30-q2_0 5 && [ "$(left 0)" -ge 20 ]; then
		bench q30-q2_0-res "$w/models/q30-q2_0.gguf" 20 10 12288 auto auto,all,auto,all
	else
		echo "- bench q30-q2_0-res: skipped ($(left 0) s left)" | tee -a "$sum"
	fi
	if [ -e "$w/models/q30-q2_0.ready" ] && [ "$(left 0)" -ge 20 ]; then
		bench q30-q2_0-4g "$w/models/q30-q2_0.gguf" 30 2 4096 auto,copy host,off,auto,host
	else
		echo "- bench q30-q2_0-4g: skipped ($(left 0) s left)" | tee -a "$sum"
	fi
	kill "$synth" 2>/dev/null
	rm -f "$w"/models/*.gguf
	{
		echo
		echo "## parity (moe_prefill, sm_90, one process per op_tile tree)"
		for tr in $trees; do
			echo "- $tr: passed $(grep -cE '^\s*--- PASS: TestParity/.*/.*/.*/' "$out/parity-$tr.log"), failed $(grep -cE '^\s*--- FAIL: TestParity/.*/.*/.*/' "$out/parity-$tr.log"), tables cases passed $(grep -cE '^\s*--- PASS: TestParity/.*tables' "$out/parity-$tr.log"); $(tail -1 "$out/parity-$tr.log")"
		done
		echo
		echo "## engine tests"
		grep -E "^(--- |PASS|FAIL|ok)|^    --- (PASS|FAIL)" "$out/engine-tests.log" | head -20
		grep -E "through moe_prefill/moe_decode|bitwise equal to" "$out/engine-tests.log" | head -20
		echo
		echo "## rows"
		echo
		echo "| budget MiB | policy/misses | phase | cache slots | of experts | hit rate | MB copied/token | copy GB/s | launches/token | host µs/launch | sync ms/token | ms/token | tok/s | bound ms | bound/achieved | load s |"
		echo "|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
		for f in q80-iq2_xs q30-q2_0-res q30-q2_0-4g; do
			[ -e "$out/bench-$f.log" ] || continue
			echo "| **$f** |"
			grep -E "^ROW " "$out/bench-$f.log" | sed 's/^ROW //'
		done
		echo
		echo "- total: $((SECONDS - t0)) s"
	} >>"$sum"
	grep -E "^ROW " "$out"/bench-*.log >"$OUT/rows.md" 2>/dev/null
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
