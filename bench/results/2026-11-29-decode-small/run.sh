#!/usr/bin/env bash
# Small per-token kernels (issues 11, 5), session 4, helper rowk: rmsnorm_row before/after,
# built here, one H200 call.
#
#   run.sh build    build machine (Go + clang-19), from this worktree: parity.test and
#       strata-run.test (CGO_ENABLED=0, strata_nodemo, stripped, xz), the sm_90 code objects
#       of every family the engine launches (mmq and moe_prefill reduced to the r64t64 and
#       r128t64 mma variants, ../2026-11-29-prefill-async/strip_ptx.py) from this tree, and
#       rmsnorm_row's and attention_decode's from main's commit MAIN (default 416cab5): two
#       code-object sets that differ in those two only (co-main, co-new), into $DEV (default
#       /work/main/.dev-rowk)
#   run.sh run      GPU machine, repository root of the device copy (carry .dev-rowk), $OUT
#       set. A background job synthesizes 30B-A3B Q2_0 while the foreground runs ptxas -v on
#       the two changed sm_90 objects (main and new), parity of rmsnorm_row and of
#       attention_decode's split stages up to n = 4096 (new and main, one seed),
#       TestBenchModelOps' rmsnorm_row, attention_small (and once each attention) rows (main,
#       new, main, new), the GPU-vs-CPU tests (new); then TestGPUBench on the 30B, resident,
#       128-token graph-argmax sequences with kernel-time tables, alternating main, new, main,
#       new; then attention_decode's split cases above n = 4096 (new) while time lasts.
#       Everything inside STRATA_RUN_BUDGET seconds (default 195). Writes $OUT/summary.md,
#       $OUT/ptxas.txt, $OUT/modelops.md, $OUT/b*-gpu-engine-*.md, $OUT/logs.tar.gz.
#   STRATA_RUN_DRY=1 run.sh run   the same flow with stub binaries (no GPU).
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)

build() {
	set -e
	cd "$here/../../.."
	local d=${DEV:-/work/main/.dev-rowk} target=sm_90 main=${MAIN:-416cab5}
	rm -rf "$d" && mkdir -p "$d/co-new" "$d/co-main"
	export CGO_ENABLED=0
	go test -c -trimpath -ldflags=-s -tags strata_nodemo -o "$d/strata-run.test" ./cmd/strata-run
	go test -c -trimpath -ldflags=-s -tags strata_nodemo -o "$d/parity.test" ./parity
	xz -9e -T2 "$d/strata-run.test" "$d/parity.test"
	local flags
	flags=$(awk -F'\t' -v t="$target" '$1 == "target" && $2 == t { print $6 }' kernels/out/objects.txt)
	for fam in rmsnorm rmsnorm_row mmvq rope attention_decode quantize_q8_1 moe_decode sample gated_delta_net mmq moe_prefill attention_prefill; do
		awk -F'\t' -v t="$target" -v f="$fam" '$1 == "object" && $2 == t && $3 == f { print $4 "\t" $5 }' kernels/out/objects.txt |
			while IFS=$'\t' read -r src obj; do
				mkdir -p "$d/co-new/$(dirname "$obj")"
				# shellcheck disable=SC2086 # flags are a list
				clang-19 $flags -I "$(dirname "$src")" -I kernels/out/include "$src" -o "$d/co-new/$obj"
				case $fam in
				mmq | moe_prefill)
					python3 "$here/../2026-11-29-prefill-async/strip_ptx.py" "$d/co-new/$obj" "$d/co-new/$obj.s" '_mma_r(64|128)t64$'
					mv "$d/co-new/$obj.s" "$d/co-new/$obj"
					;;
				rmsnorm_row | attention_decode)
					# main's source, rendered there: the same include directory (unchanged)
					local tmp
					tmp=$(mktemp -d)
					git show "$main:$src" >"$tmp/$(basename "$src")"
					git diff --quiet "$main" -- kernels/out/include
					mkdir -p "$d/co-main/$(dirname "$obj")"
					# shellcheck disable=SC2086
					clang-19 $flags -I "$(dirname "$src")" -I kernels/out/include "$tmp/$(basename "$src")" -o "$d/co-main/$obj"
					rm -r "$tmp"
					;;
				esac
			done
	done
	# co-main: every other object of co-new
	(cd "$d/co-new" && find . -type f ! -name 'rmsnorm_row.*' ! -name 'attention_decode.*' -exec cp --parents {} ../co-main/ \;)
	tar -C "$d" -czf "$d/co.tar.gz" co-new co-main && rm -r "$d/co-new" "$d/co-main"
	cp "$here/run.sh" "$d/"
	{ git rev-parse HEAD; git status --porcelain; echo "main: $(git rev-parse "$main")"; } >"$d/commit"
	ls -la "$d"
	du -sh "$d"
}

run() {
	local d=$here w=/tmp/rowk t0=$SECONDS budget=${STRATA_RUN_BUDGET:-195} dry=${STRATA_RUN_DRY:-0}
	: "${OUT:?set OUT}"
	rm -rf "$w" && mkdir -p "$w/logs" "$w/models"
	local out=$w/logs t=$w/sr.test pt=$w/parity.test
	left() { echo $((budget - (SECONDS - t0) - $1)); }
	lim() { local l; l=$(left "$2"); [ "$l" -lt "$1" ] && echo $((l > 5 ? l : 5)) || echo "$1"; }
	if [ "$dry" = 1 ]; then
		printf '#!/bin/sh\necho "stub $0 $*"; env | grep -E "^STRATA_" | sort; sleep %s\ncase "$STRATA_RUN_ARGS" in *" -o "*) f=${STRATA_RUN_ARGS##* -o }; : >"$f";; esac\n[ -n "$STRATA_BENCH_OUT" ] && echo stub >"$STRATA_BENCH_OUT/modelops.txt" && echo stub >"$STRATA_BENCH_OUT/gpu-engine-stub.md"\necho "ROW | stub |"\necho "BINS stub"\necho PASS\n' "${STRATA_RUN_DRY_SLEEP:-1}" >"$t"
		chmod +x "$t"
		cp "$t" "$pt"
		mkdir -p "$w/co-new" "$w/co-main"
	else
		tar -C "$w" -xzf "$d/co.tar.gz"
		for b in strata-run:sr parity:parity; do
			python3 -c 'import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2], "wb"))' "$d/${b%%:*}.test.xz" "$w/${b##*:}.test"
			chmod +x "$w/${b##*:}.test"
		done
		{ nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm --format=csv; nproc; free -g; } >"$out/machine.log" 2>&1
	fi
	export STRATA_REQUIRE_GPU=1
	cat "$d/commit" >"$out/commit" 2>/dev/null
	local sum="$OUT/summary.md"
	echo "# run.sh run ($(date -u +%FT%TZ)), budget ${budget}s, dry $dry" >"$sum"
	echo >>"$sum"
	step() { # step NAME SECONDS-LIMIT LOG CMD...
		local name=$1 secs=$2 log=$3 s=$SECONDS rc
		shift 3
		timeout "$secs" "$@" >"$log" 2>&1
		rc=$?
		echo "- $name: exit $rc in $((SECONDS - s)) s (limit $secs s, $((SECONDS - t0)) s so far)" | tee -a "$sum"
		return $rc
	}
	echo "setup: $((SECONDS - t0)) s" | tee -a "$sum"
	(
		s=$SECONDS
		STRATA_RUN_ARGS="synth --arch qwen3moe --preset qwen3-30b-a3b --type q2_0 -o $w/models/q30.gguf" timeout 90 "$t" -test.run '^TestCLI$' -test.v -test.timeout 300s >"$out/synth-q30.log" 2>&1 &
		echo $! >"$w/synth.pid"
		if wait $!; then echo "$((SECONDS - s))" >"$w/models/q30.ready"; else echo "$((SECONDS - s))" >"$w/models/q30.failed"; fi
	) &
	local synth=$!
	# 0. ptxas on the device: registers and spills of the changed sm_90 kernels
	if [ "$dry" != 1 ]; then
		for f in rmsnorm_row attention_decode; do
			for co in main new; do
				echo "== $f ($co)"
				ptxas -arch=sm_90 -v -o /dev/null "$w/co-$co/sm_90/$f.ptx" 2>&1 | grep -E "Compiling entry|registers|spill"
			done
		done >"$OUT/ptxas.txt" 2>&1
	fi
	# 1. parity of the changed families, new and main code objects, one seed (same bits: the
	# logged errors must be equal); attention_decode: split stages, cases up to n = 4096
	local seed=${STRATA_SEED:-20261129}
	for co in new main; do
		step "parity sm_90/rmsnorm_row ($co)" "$(lim 30 150)" "$out/parity-rms-$co.log" \
			env STRATA_SEED="$seed" STRATA_CO_DIR="$w/co-$co" "$pt" -test.run '^TestParity$/^sm_90$/^rmsnorm_row$' -test.v -test.timeout 120s
		grep -E "^\s*--- FAIL|^(ok|FAIL|PASS)$|panic" "$out/parity-rms-$co.log" | head -20 | sed 's/^/    /' >>"$sum"
		echo "    $(grep -c -- '--- PASS: TestParity/sm_90/rmsnorm_row/[^/]*/' "$out/parity-rms-$co.log") cases passed" >>"$sum"
		step "parity sm_90/attention_decode split, n ≤ 4096 ($co)" "$(lim 30 140)" "$out/parity-attn-$co.log" \
			env STRATA_SEED="$seed" STRATA_CO_DIR="$w/co-$co" "$pt" -test.run '^TestParity$/^sm_90$/^attention_decode$/^split_/^n=[0-9]{1,4},' -test.v -test.timeout 120s
		grep -E "^\s*--- FAIL|^(ok|FAIL|PASS)$|panic" "$out/parity-attn-$co.log" | head -20 | sed 's/^/    /' >>"$sum"
		echo "    $(grep -c -- '--- PASS: TestParity/sm_90/attention_decode/split_[^/]*/' "$out/parity-attn-$co.log") cases passed" >>"$sum"
	done
	# 2. TestBenchModelOps rows, main / new alternating (the large-n attention rows once each)
	local k=0 ops
	for co in main new main new; do
		k=$((k + 1))
		local mo=$out/mo$k-$co
		mkdir -p "$mo"
		ops=rmsnorm_row,attention_small
		[ $k -le 2 ] && ops=$ops,attention
		step "modelops $ops ($co)" "$(lim 25 110)" "$mo.log" \
			env STRATA_CO_DIR="$w/co-$co" STRATA_BENCH=1 STRATA_BENCH_OPS=$ops STRATA_BENCH_OUT="$mo" "$pt" -test.run '^TestBenchModelOps$' -test.v -test.timeout 60s
		{ echo "## modelops #$k ($co)"; echo; cat "$mo/modelops.txt" 2>/dev/null; echo; } >>"$OUT/modelops.md"
	done
	# 3. tiny GPU vs CPU (new)
	step "tiny GPU vs CPU (new)" "$(lim 60 60)" "$out/tiny.log" \
		env STRATA_CO_DIR="$w/co-new" "$t" -test.run '^(TestGPUEngineMatchesCPU|TestGPUEngineNextMatchesCPU)$' -test.v -test.timeout 300s
	grep -E "^\s*--- |^(ok|FAIL|PASS)$|worst logits|panic" "$out/tiny.log" | head -30 | sed 's/^/    /' >>"$sum"
	# 4. 30B Q2_0 resident graph decode, main / new alternating
	while [ ! -e "$w/models/q30.ready" ] && [ ! -e "$w/models/q30.failed" ] && [ "$(left 20)" -gt 5 ]; do sleep 1; done
	echo "  (q30: $(ls "$w/models" | tr '\n' ' ') at $((SECONDS - t0)) s)" | tee -a "$sum"
	if [ -e "$w/models/q30.ready" ]; then
		local i=0
		for co in main new main new; do
			i=$((i + 1))
			[ "$(left 18)" -gt 5 ] || { echo "- bench $co #$i: skipped, out of time" | tee -a "$sum"; continue; }
			mkdir -p "$out/b$i-$co"
			step "bench 30B q2_0 $co #$i" "$(lim 30 3)" "$out/bench$i-$co.log" \
				env STRATA_CO_DIR="$w/co-$co" STRATA_GPU_BENCH=1 STRATA_BENCH_MODEL="$w/models/q30.gguf" STRATA_BENCH_OUT="$out/b$i-$co" STRATA_BENCH_LABEL="q30-$co-$i" \
				STRATA_BENCH_POLICIES=decayed STRATA_BENCH_CTX=1024 STRATA_BENCH_BUDGETS_MIB=0 STRATA_BENCH_TOKENS=128 STRATA_BENCH_BIN=32 \
				STRATA_BENCH_DECODE=graph-argmax,graph-argmax STRATA_BENCH_KT_SPLITS=0 "$t" -test.run '^TestGPUBench$' -test.v -test.timeout 300s
			grep -E "^ROW |^BINS |FAIL|panic" "$out/bench$i-$co.log" | sed "s/^/    [$co #$i] /" >>"$sum"
			for f in "$out/b$i-$co"/gpu-engine-*.md; do [ -e "$f" ] && cp "$f" "$OUT/b$i-$co-$(basename "$f")"; done
		done
	fi
	# 5. the rest of attention_decode's split cases (n > 4096, new), while time lasts
	if [ "$(left 8)" -gt 10 ]; then
		step "parity sm_90/attention_decode split, n > 4096 (new)" "$(lim 60 3)" "$out/parity-attn-large.log" \
			env STRATA_SEED="$seed" STRATA_CO_DIR="$w/co-new" "$pt" -test.run '^TestParity$/^sm_90$/^attention_decode$/^split_/^n=[0-9]{5,},' -test.v -test.timeout 120s
		grep -E "^\s*--- (FAIL|PASS): TestParity/sm_90/attention_decode/split_[^/]*/|^(ok|FAIL|PASS)$|panic" "$out/parity-attn-large.log" | head -20 | sed 's/^/    /' >>"$sum"
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
