#!/usr/bin/env bash
# Session 7, helper moepf, issue 6: the final-call plan for the Q6_K quad form (not measured by
# the helper: its one call had been spent). Parity (STRATA_REQUIRE_GPU=1, fresh seeds) of the
# Q6_K r64t32 mma kernel built with -DSTRATA_MOE_Q6K_QUAD (Q; in a tree with every r64t32 mma
# kernel, as built), then TestBenchPrefill of r64t32 at 512 and 2048 tokens: D (the source as
# committed: the session-6 window form, with the step fold), Q, and QG (Q with
# -DSTRATA_MOE_GROUP_FOLD), alternated D Q QG Q D QG D Q; ptxas -v of every tree. About 60 s of
# command time; timeout_s 120 is ample.
#
#   final.sh build   build machine, repository root (kernels/ committed). Writes parity.test.xz,
#       trees.tgz, this script and commit to $DEV (default /work/main/.dev-moepf).
#   final.sh run     device, repository root of the copy (carry the $DEV folder as DEV_DIR), $OUT set.
#   DRY=1 final.sh run   rehearsal with stubs (no GPU, no ptxas).
# Keep the quad form (make it the default) if Q's Q6_K layer TOPS at 512 + 2048 beat D's.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)

build() {
	set -e
	local d=${DEV:-/work/main/.dev-moepf} tmp flags root inc=kernels/out/sm_90 S
	root=$(cd "$here/../../.." && pwd)
	S=$root/bench/results/2026-11-29-prefill-async/strip_ptx.py
	cd "$root"
	[ -z "$(git status --porcelain -- kernels)" ] || { echo "kernels/ not clean" >&2; exit 1; }
	rm -rf "$d" && mkdir -p "$d"
	tmp=$(mktemp -d)
	CGO_ENABLED=0 go test -c -trimpath -ldflags=-s -tags strata_nodemo -o "$d/parity.test" ./parity
	xz -9 -T2 "$d/parity.test"
	flags=$(awk -F'\t' '$1 == "target" && $2 == "sm_90" { print $6 }' kernels/out/objects.txt)
	# shellcheck disable=SC2086
	clang-19 $flags -I $inc -I kernels/out/include $inc/moe_prefill.cu -o "$tmp/D.ptx" &
	# shellcheck disable=SC2086
	clang-19 $flags -DSTRATA_MOE_Q6K_QUAD -I $inc -I kernels/out/include $inc/moe_prefill.cu -o "$tmp/Q.ptx" &
	# shellcheck disable=SC2086
	clang-19 $flags -DSTRATA_MOE_Q6K_QUAD -DSTRATA_MOE_GROUP_FOLD -I $inc -I kernels/out/include $inc/moe_prefill.cu -o "$tmp/QG.ptx" &
	# shellcheck disable=SC2086
	clang-19 $flags -I $inc -I kernels/out/include $inc/mmq.cu -o "$tmp/mmq.ptx" &
	wait
	python3 "$S" "$tmp/mmq.ptx" "$tmp/mmq1.ptx" '^strata_mmq_q80_dp4a_r64t64$'
	local x
	for x in D Q QG; do
		mkdir -p "$tmp/trees/$x-r64t32/sm_90"
		python3 "$S" "$tmp/$x.ptx" "$tmp/trees/$x-r64t32/sm_90/moe_prefill.ptx" '_mma_r64t32$'
		cp "$tmp/mmq1.ptx" "$tmp/trees/$x-r64t32/sm_90/mmq.ptx"
	done
	mkdir -p "$tmp/trees/par-Q-mma_r64t32/sm_90"
	cp "$tmp/trees/Q-r64t32/sm_90/moe_prefill.ptx" "$tmp/trees/par-Q-mma_r64t32/sm_90/"
	rm -f "$tmp"/*.ptx
	tar -C "$tmp" -czf "$d/trees.tgz" trees
	rm -rf "$tmp"
	cp "$here/final.sh" "$d/"
	{ git rev-parse HEAD; git status --porcelain; } >"$d/commit"
	ls -la "$d" && du -sh "$d"
}

run() {
	local d=${DEV_DIR:-.dev-moepf} w=/tmp/moepf7f t0=$SECONDS dry=${DRY:-0} budget=${BUDGET:-110}
	: "${OUT:?set OUT}"
	rm -rf "$w" && mkdir -p "$w/logs"
	local L=$w/logs pt=$w/parity.test sum=$w/logs/summary.txt NCU P f
	echo "final.sh run $(date -u +%FT%TZ) dry $dry budget $budget commit $(head -1 "$d/commit" 2>/dev/null)" | tee "$sum"
	tar -C "$w" -xzf "$d/trees.tgz"
	if [ "$dry" = 1 ]; then
		printf '#!/bin/sh\necho "stub $0 $*"; env | grep -E "^STRATA_" | sort\nsleep 1\necho "--- PASS: TestParity/sm_90/x/y/z"\nif [ -n "$STRATA_BENCH_OUT" ]; then mkdir -p "$STRATA_BENCH_OUT"; echo "q6k_mma_r64t32 512 1.0 2.0 3.0 4.0 10.0 1.0 1%%" >"$STRATA_BENCH_OUT/bench_prefill.txt"; fi\necho PASS\n' >"$pt"
		chmod +x "$pt"
		printf '#!/bin/sh\necho "$@"; p=; for a; do [ "$p" = -o ] && touch "$a.ncu-rep"; p=$a; done\n' >"$w/ncu"; chmod +x "$w/ncu"
		NCU=$w/ncu P=true
	else
		python3 -c 'import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2], "wb"))' "$d/parity.test.xz" "$pt" && chmod +x "$pt"
		{ nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm,clocks.max.mem --format=csv; nproc; ptxas --version; } >"$L/gpu.txt" 2>&1
		NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
		P=$(command -v ptxas || echo /usr/local/cuda/bin/ptxas)
	fi
	cp "$d/commit" "$L/commit" 2>/dev/null
	# 1. ptxas -v every tree, in parallel.
	for f in "$w"/trees/*/sm_90/*.ptx; do
		("$P" -v -arch=sm_90 "$f" -o "${f%.ptx}.cubin" >"$f.ptxas.log" 2>&1 && mv "${f%.ptx}.cubin" "$f") &
	done
	wait
	echo "ptxas done at $((SECONDS - t0)) s; failed: $(grep -lE 'error|fatal' "$w"/trees/*/sm_90/*.ptxas.log 2>/dev/null | wc -l)" | tee -a "$sum"
	for f in "$w"/trees/{D,Q,QG}-*/sm_90/moe_prefill.ptx.ptxas.log; do
		echo "== ${f#"$w"/trees/}"
		grep -E "Compiling entry|registers|spill|error" "$f" | paste - - - 2>/dev/null | sed -E "s/ptxas info *: //g; s/Function properties for //; s/Compiling entry function //; s/ for 'sm_90'//" | head -20
	done >"$L/ptxas-summary.txt"
	# 2. Parity of Q's Q6_K r64t32 mma kernel (the only kernel the define changes), fresh seeds.
	export STRATA_REQUIRE_GPU=1
	local lim
	lim=$((budget - (SECONDS - t0) - 60))
	[ $lim -gt 40 ] && lim=40
	STRATA_CO_DIR=$w/trees/par-Q-mma_r64t32 timeout $lim "$pt" -test.v -test.timeout "$((lim - 2))s" \
		-test.run 'TestParity/sm_90/moe_prefill/q6k_mma_r64t32/' >"$L/parity-Q-q6k_mma_r64t32.log" 2>&1
	echo "parity exit $? at $((SECONDS - t0)) s (limit $lim)" | tee -a "$sum"
	# 3. Benchmarks, one tree at a time, alternated.
	local g s n=0
	for g in D Q QG Q D QG D Q; do
		n=$((n + 1))
		lim=$((budget - (SECONDS - t0) - 30))
		[ $lim -gt 15 ] && lim=15
		[ $lim -lt 8 ] && { echo "bench $n-$g: skipped, no time" | tee -a "$sum"; continue; }
		mkdir -p "$L/bench-$n-$g"
		s=$SECONDS
		STRATA_BENCH=1 STRATA_CO_DIR=$w/trees/$g-r64t32 STRATA_BENCH_OUT=$L/bench-$n-$g STRATA_BENCH_FILTER='^(q6k|iq2xs)_mma_r64t32$' timeout $lim \
			"$pt" -test.run '^TestBenchPrefill$' -test.v -test.timeout 100s >"$L/bench-$n-$g.log" 2>&1
		echo "bench $n-$g: exit $? in $((SECONDS - s)) s (limit $lim)" | tee -a "$sum"
	done
	cnt() { echo "passed $(cat "$@" | grep -cE '^\s*--- PASS: TestParity/.*/.*/.*/'), failed $(cat "$@" | grep -cE '^\s*--- FAIL: TestParity/.*/.*/.*/'), skipped $(cat "$@" | grep -cE '^\s*--- SKIP: TestParity/.*/.*/.*/')"; }
	{
		echo "## parity: $(cnt "$L"/parity-*.log) $(grep -hE '^(ok|PASS|FAIL)$' "$L"/parity-*.log | tr '\n' ' ')"
		grep -hE "^\s*--- FAIL|panic|test timed out" "$L"/parity-*.log | head -20
		echo "## moe_prefill tables (route, gate/up, down, combine, layer µs, TOPS)"
		for f in "$L"/bench-*/bench_prefill.txt; do echo "--- ${f#"$L"/}"; grep -E "_mma_|ceiling" "$f"; done 2>/dev/null
		grep -hE "FAIL|panic" "$L"/bench-*.log 2>/dev/null | head
		echo "total $((SECONDS - t0)) s"
	} >>"$sum"
	cp "$sum" "$L/ptxas-summary.txt" "$OUT/"
	tar -C "$w" -czf "$OUT/logs.tgz" logs
	cat "$sum"
}

case "${1:-run}" in
build) build ;;
run) run ;;
*) echo "usage: final.sh build|run" >&2; exit 2 ;;
esac
