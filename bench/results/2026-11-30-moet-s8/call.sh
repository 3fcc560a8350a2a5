#!/usr/bin/env bash
# Session 8, helper moet, issues 6 and 11: the one device call. moe_prefill's n8-slice token
# tile r64t48 (kernels/prefill.go mmqN8) against r64t32 at the Qwen3-30B-A3B shape, and the
# Q6_K quad form (-DSTRATA_MOE_Q6K_QUAD), then the engine's 30B prefill with r64t48 against
# r64t32 (TilesBest against TilesT32) on one engine.
#
#   call.sh build   build machine, root of the s8-moet worktree (kernels/ committed). Writes
#       parity.test.xz, strata-run.test.xz, trees.tar.xz, this script and commit to $DEV
#       (default /work/main/.dev-moet).
#   call.sh run     device, repository root of the copy (carry .dev-moet), $OUT set; BUDGET
#       seconds in all (default 185).
#   DRY=1 call.sh run   rehearsal with stubs (no GPU, no ptxas).
#
# Trees (moe_prefill cut to the kernels measured; mmq to one small kernel: the bench skips
# families whose object is missing, parity needs none):
#   B    the branch: r64t32 and r64t48 mma kernels (r64t48 with the step fold for Q6_K, IQ2_XS,
#        IQ1_M, as r64t32).
#   G    B built with -DSTRATA_MOE_GROUP_FOLD (the per-group fold for those three: the step
#        fold's 16 partial sums cost r64t32 a block an SM; at r64t48 they may cost more).
#   Q    B built with -DSTRATA_MOE_Q6K_QUAD (Q6_K's quad form, session 7, never measured).
#   B4   B's r64t48 kernels with launch_bounds(128, 4) (moeMinBlocks; held to 128 registers).
#   par  B's r64t48 kernels (mma and dp4a), Q's Q6_K kernels and B4's: parity, every case.
#   eco  the engine's set: every sm_90 object, mmq cut to its r64t64/r64t128 mma tiles,
#        moe_prefill to r64t32/r64t48/r64t64 mma.
# The call runs, in order: ptxas -v of every tree (cubins given to the driver); parity of par
# (STRATA_REQUIRE_GPU=1, fresh seeds) beside the 30B-A3B Q2_0 synthetic model's synthesis;
# TestBenchPrefill at 512 and 2048 tokens, trees alternated (B G Q B4) × 3; TestGPUBench
# 30B prefill 512, tiles t32,best,t32,best on one engine, with the device time per kernel.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)

build() {
	set -e
	local d=${DEV:-/work/main/.dev-moet} tmp flags root inc=kernels/out/sm_90 S x
	root=$(cd "$here/../../.." && pwd)
	S=$root/bench/results/2026-11-29-prefill-async/strip_ptx.py
	cd "$root"
	[ -z "$(git status --porcelain -- kernels)" ] || { echo "kernels/ not clean" >&2; exit 1; }
	rm -rf "$d" && mkdir -p "$d"
	tmp=$(mktemp -d)
	export CGO_ENABLED=0
	go test -c -trimpath -ldflags=-s -tags strata_nodemo -o "$d/parity.test" ./parity
	go test -c -trimpath -ldflags=-s -tags strata_nodemo -o "$d/strata-run.test" ./cmd/strata-run
	xz -9 -T2 "$d/parity.test" "$d/strata-run.test"
	flags=$(awk -F'\t' '$1 == "target" && $2 == "sm_90" { print $6 }' kernels/out/objects.txt)
	# shellcheck disable=SC2086
	{
		clang-19 $flags -I $inc -I kernels/out/include $inc/moe_prefill.cu -o "$tmp/B.ptx" &
		clang-19 $flags -DSTRATA_MOE_GROUP_FOLD -I $inc -I kernels/out/include $inc/moe_prefill.cu -o "$tmp/G.ptx" &
		clang-19 $flags -DSTRATA_MOE_Q6K_QUAD -I $inc -I kernels/out/include $inc/moe_prefill.cu -o "$tmp/Q.ptx" &
		wait
	}
	# the engine's set: every other sm_90 object as built
	mkdir -p "$tmp/trees/eco/sm_90"
	awk -F'\t' '$1 == "object" && $2 == "sm_90" { print $4 "\t" $5 }' kernels/out/objects.txt |
		while IFS=$'\t' read -r src obj; do
			case $obj in */moe_prefill.ptx) continue ;; esac
			# shellcheck disable=SC2086
			clang-19 $flags -I "$(dirname "$src")" -I kernels/out/include "$src" -o "$tmp/trees/eco/$obj"
		done
	python3 "$S" "$tmp/trees/eco/sm_90/mmq.ptx" "$tmp/mmqe.ptx" '_mma_r64t(64|128)$' && mv "$tmp/mmqe.ptx" "$tmp/trees/eco/sm_90/mmq.ptx"
	python3 "$S" "$tmp/B.ptx" "$tmp/trees/eco/sm_90/moe_prefill.ptx" '_mma_r64t(32|48|64)$'
	python3 "$S" "$tmp/trees/eco/sm_90/mmq.ptx" "$tmp/mmq1.ptx" '^strata_mmq_q80_mma_r64t64$'
	for x in B G Q; do
		mkdir -p "$tmp/trees/$x/sm_90"
		python3 "$S" "$tmp/$x.ptx" "$tmp/trees/$x/sm_90/moe_prefill.ptx" '_mma_r64t(32|48)$'
		cp "$tmp/mmq1.ptx" "$tmp/trees/$x/sm_90/mmq.ptx"
	done
	mkdir -p "$tmp/trees/parB/sm_90" "$tmp/trees/parQ/sm_90"
	python3 "$S" "$tmp/B.ptx" "$tmp/trees/parB/sm_90/moe_prefill.ptx" '_r64t48$'
	python3 "$S" "$tmp/Q.ptx" "$tmp/trees/parQ/sm_90/moe_prefill.ptx" '^strata_moe_prefill_q6k_mma_r64t(32|48)$'
	# B4: B with launch_bounds(128, 4) on every r64t48 kernel (kernels/prefill.go moeMinBlocks),
	# in case r64t48's 8 more accumulators (and 8 more step sums) take a kernel past 128
	# registers (3 blocks an SM instead of 4).
	local R='"q80/r64t48": 4, "q20/r64t48": 4, "q4k/r64t48": 4, "q6k/r64t48": 4, "iq2xs/r64t48": 4, "iq3xxs/r64t48": 4, "iq3s/r64t48": 4, "iq1m/r64t48": 4'
	sed -i "s|^var moeMinBlocks = map\[string\]int{}|var moeMinBlocks = map[string]int{${R}}|" kernels/prefill.go
	go run ./gen >/dev/null
	# shellcheck disable=SC2086
	clang-19 $flags -I $inc -I kernels/out/include $inc/moe_prefill.cu -o "$tmp/B4.ptx"
	git checkout -- kernels
	mkdir -p "$tmp/trees/B4/sm_90" "$tmp/trees/parB4/sm_90"
	python3 "$S" "$tmp/B4.ptx" "$tmp/trees/B4/sm_90/moe_prefill.ptx" '_mma_r64t48$'
	echo "B4: $(grep -c minnctapersm "$tmp/trees/B4/sm_90/moe_prefill.ptx") kernels with a minimum of blocks"
	cp "$tmp/mmq1.ptx" "$tmp/trees/B4/sm_90/mmq.ptx"
	cp "$tmp/trees/B4/sm_90/moe_prefill.ptx" "$tmp/trees/parB4/sm_90/"
	rm -f "$tmp"/*.ptx
	tar -C "$tmp" -cf - trees | xz -9 -T2 >"$d/trees.tar.xz"
	rm -rf "$tmp"
	cp "$here/call.sh" "$d/"
	{ git rev-parse HEAD; git status --porcelain; } >"$d/commit"
	ls -la "$d" && du -sh "$d"
}

run() {
	local d=${DEV_DIR:-.dev-moet} w=/tmp/moet8 t0=$SECONDS dry=${DRY:-0} budget=${BUDGET:-185}
	: "${OUT:?set OUT}"
	rm -rf "$w" && mkdir -p "$w/logs" "$w/models"
	local L=$w/logs pt=$w/parity.test st=$w/sr.test sum=$w/logs/summary.txt P f
	left() { echo $((budget - (SECONDS - t0) - $1)); }
	# lim WANT RESERVE: WANT seconds, cut to what is left after RESERVE (at least 5)
	lim() { local l; l=$(left "$2"); [ "$l" -lt "$1" ] && echo $((l > 5 ? l : 5)) || echo "$1"; }
	say() { echo "$* at $((SECONDS - t0)) s" | tee -a "$sum"; }
	echo "call.sh run $(date -u +%FT%TZ) dry $dry budget $budget commit $(head -1 "$d/commit" 2>/dev/null)" | tee "$sum"
	python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' "$d/trees.tar.xz" "$w"
	if [ "$dry" = 1 ]; then
		printf '#!/bin/sh\necho "stub $0 $*"; env | grep -E "^STRATA_" | sort\nsleep 1\ncase "$STRATA_RUN_ARGS" in *" -o "*) f=${STRATA_RUN_ARGS##* -o }; : >"$f";; esac\necho "--- PASS: TestParity/sm_90/x/y/z"\necho "ROW | stub |"\nif [ -n "$STRATA_BENCH_OUT" ]; then mkdir -p "$STRATA_BENCH_OUT"; echo "q6k_mma_r64t48 512 1.0 2.0 3.0 4.0 10.0 1.0 1%%" >"$STRATA_BENCH_OUT/bench_prefill.txt"; fi\necho PASS\n' >"$pt"
		chmod +x "$pt" && cp "$pt" "$st"
		printf '#!/bin/sh\nwhile [ $# -gt 1 ]; do case $1 in -o) shift; o=$1;; *) i=$1;; esac; shift; done\ncp "$i" "$o"; echo "ptxas stub: Used 128 registers, 0 bytes spill stores"\n' >"$w/ptxas" && chmod +x "$w/ptxas"
		P=$w/ptxas
	else
		for b in parity:parity strata-run:sr; do
			python3 -c 'import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2], "wb"))' "$d/${b%%:*}.test.xz" "$w/${b#*:}.test" && chmod +x "$w/${b#*:}.test"
		done
		{ nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm,clocks.max.mem --format=csv; nproc; ptxas --version; } >"$L/gpu.txt" 2>&1
		P=$(command -v ptxas || echo /usr/local/cuda/bin/ptxas)
	fi
	cp "$d/commit" "$L/commit" 2>/dev/null
	# 0. The 30B synthetic model, in the background (CPU; done before the benchmarks start).
	(
		STRATA_CO_DIR=$w/trees/eco STRATA_RUN_ARGS="synth --arch qwen3moe --preset qwen3-30b-a3b --type q2_0 -o $w/models/q30.gguf" timeout 60 "$st" -test.run '^TestCLI$' -test.v >"$L/synth.log" 2>&1
		echo $? >"$w/models/q30.done"
	) &
	# 1. ptxas -v every tree, in parallel (the driver gets cubins: no JIT inside a timing).
	find "$w/trees" -name '*.ptx' | xargs -P 16 -I{} sh -c '"$1" -v -arch=sm_90 "$2" -o "$2.cubin" >"$2.log" 2>&1 && mv "$2.cubin" "$2" || echo "ptxas failed: $2"' _ "$P" {} >"$L/ptxas.log" 2>&1
	say "ptxas: $(grep -c failed "$L/ptxas.log") failed"
	for f in B G Q B4 parB; do
		echo "== $f"
		grep -E "Compiling entry|registers|spill|error" "$w/trees/$f/sm_90/moe_prefill.ptx.log" | paste - - - 2>/dev/null | sed -E "s/ptxas info *: //g; s/Function properties for //; s/Compiling entry function //; s/ for 'sm_90'//"
	done >"$L/ptxas-summary.txt"
	cp "$w/trees/eco/sm_90/moe_prefill.ptx.log" "$L/ptxas-eco-moe_prefill.log" 2>/dev/null
	# 2. Parity of B's r64t48 kernels (mma, dp4a) and Q's Q6_K kernels, fresh seeds, every case.
	export STRATA_REQUIRE_GPU=1
	local lim tr pids=()
	lim=$(lim 50 130)
	for tr in 'parB|[a-z0-9]+_(mma|dp4a)_r64t48' 'parQ|q6k_mma_r64t(32|48)' 'parB4|[a-z0-9]+_mma_r64t48'; do
		STRATA_CO_DIR=$w/trees/${tr%%|*} timeout "$lim" "$pt" -test.v -test.timeout "$((lim - 2))s" \
			-test.run "TestParity/sm_90/moe_prefill/${tr#*|}/" >"$L/parity-${tr%%|*}.log" 2>&1 &
		pids+=($!)
	done
	wait "${pids[@]}"
	say "parity done (limit $lim)"
	while [ ! -e "$w/models/q30.done" ] && [ "$(left 100)" -gt 0 ]; do sleep 1; done
	say "synth: $(cat "$w/models/q30.done" 2>/dev/null)"
	# 3. Benchmarks, one tree at a time, alternated (G and Q only the kernels they change, and
	#    a control whose PTX is B's: Q8_0 for G, IQ2_XS for Q).
	local g s n=0 flt
	for g in B G Q B4 B G Q B4 B G Q B4; do
		n=$((n + 1))
		case $g in
		B) flt='_mma_r64t(32|48)$' ;;
		G) flt='^(q80|q6k|iq2xs|iq1m)_mma_r64t(32|48)$' ;;
		Q) flt='^(q6k|iq2xs)_mma_r64t(32|48)$' ;;
		B4) flt='_mma_r64t48$' ;;
		esac
		lim=$(lim 20 45)
		[ "$lim" -lt 8 ] && { say "bench $n-$g: skipped, no time"; continue; }
		mkdir -p "$L/bench-$n-$g"
		s=$SECONDS
		STRATA_BENCH=1 STRATA_CO_DIR=$w/trees/$g STRATA_BENCH_OUT=$L/bench-$n-$g STRATA_BENCH_FILTER=$flt timeout "$lim" \
			"$pt" -test.run '^TestBenchPrefill$' -test.v -test.timeout 100s >"$L/bench-$n-$g.log" 2>&1
		say "bench $n-$g: exit $? in $((SECONDS - s)) s (limit $lim)"
	done
	# 4. The engine: 30B-A3B Q2_0 prefill 512, r64t32 (t32) against r64t48 (best) on one engine.
	lim=$(lim 40 3)
	if [ -s "$w/models/q30.gguf" ] || [ "$dry" = 1 ]; then
		STRATA_CO_DIR=$w/trees/eco STRATA_GPU_BENCH=1 STRATA_BENCH_MODEL=$w/models/q30.gguf STRATA_BENCH_OUT=$L STRATA_BENCH_LABEL=q30 \
			STRATA_BENCH_POLICIES=decayed STRATA_BENCH_BUDGETS_MIB=0 STRATA_BENCH_CTX=4096 STRATA_BENCH_TOKENS=1 STRATA_BENCH_CHUNK=512 \
			STRATA_BENCH_PREFILL=512 STRATA_BENCH_PTILES=t32,best,t32,best STRATA_BENCH_PKTIMES=512 \
			timeout "$lim" "$st" -test.run '^TestGPUBench$' -test.v -test.timeout "$((lim - 2))s" >"$L/gpubench-q30.log" 2>&1
		say "gpubench-q30 exit $? (limit $lim)"
	else
		say "gpubench-q30: no model"
	fi
	rm -f "$w"/models/*.gguf
	cnt() { echo "passed $(cat "$@" | grep -cE '^\s*--- PASS: TestParity/.*/.*/.*/'), failed $(cat "$@" | grep -cE '^\s*--- FAIL: TestParity/.*/.*/.*/'), skipped $(cat "$@" | grep -cE '^\s*--- SKIP: TestParity/.*/.*/.*/')"; }
	{
		for tr in parB parQ parB4; do echo "## parity $tr: $(cnt "$L/parity-$tr.log") $(grep -hE '^(ok|PASS|FAIL)$' "$L/parity-$tr.log" | tr '\n' ' ')"; done
		grep -hE "^\s*--- FAIL|panic|test timed out" "$L"/parity-*.log | head -20
		echo "## ptxas (registers, spills)"
		cat "$L/ptxas-summary.txt"
		echo "## moe_prefill tables (route, gate/up, down, combine, layer µs, TOPS)"
		for f in "$L"/bench-*/bench_prefill.txt; do echo "--- ${f#"$L"/}"; grep -E "_mma_|ceiling" "$f"; done 2>/dev/null
		grep -hE "FAIL|panic" "$L"/bench-*.log 2>/dev/null | head
		echo "## engine prefill (TestGPUBench)"
		grep -hE "^ROW|FAIL|panic|tiles=[a-z0-9+]+: " "$L/gpubench-q30.log" 2>/dev/null | head -20
		grep -hA40 "device time per token by kernel" "$L/gpubench-q30.log" 2>/dev/null | grep -E "^\s*\||prefill" | head -60
		echo "total $((SECONDS - t0)) s"
	} >>"$sum"
	cp "$sum" "$L/ptxas-summary.txt" "$OUT/"
	tar -C "$w" -czf "$OUT/logs.tgz" logs
	cat "$sum"
}

case "${1:-run}" in
build) build ;;
run) run ;;
*) echo "usage: call.sh build|run" >&2; exit 2 ;;
esac
