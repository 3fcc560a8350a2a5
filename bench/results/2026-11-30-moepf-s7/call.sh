#!/usr/bin/env bash
# Session 7, helper moepf, issue 6: the one device call. Parity (STRATA_REQUIRE_GPU=1, fresh
# seeds) of every sm_90 moe_prefill mma r64t32 variant of the branch (N: the step fold of
# kernels/prefill.go moeStepFold; the tree assembled by ptxas, the driver given cubins), then
# TestBenchPrefill at 512 and 2048 tokens for r64t32, N against O (the same source built with
# -DSTRATA_MOE_GROUP_FOLD: the per-group fold, main's PTX), alternated N O N O N O so that
# neither tree always runs first (NB: N at launch_bounds(128, 5), parity too); then ncu of N's and O's Q6_K and IQ2_XS gate/up at 512 tokens.
#
#   call.sh build   build machine, root of the s7-moepf worktree (kernels/ committed). Writes
#       parity.test.xz, trees.tgz, this script and commit to $DEV (default /work/main/.dev-moepf).
#   call.sh run     device, repository root of the copy (carry .dev-moepf), $OUT set.
#   DRY=1 call.sh run   rehearsal with stubs (no GPU, no ptxas, no ncu).
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
	clang-19 $flags -I $inc -I kernels/out/include $inc/moe_prefill.cu -o "$tmp/N.ptx" &
	# shellcheck disable=SC2086
	clang-19 $flags -DSTRATA_MOE_GROUP_FOLD -I $inc -I kernels/out/include $inc/moe_prefill.cu -o "$tmp/O.ptx" &
	# shellcheck disable=SC2086
	clang-19 $flags -I $inc -I kernels/out/include $inc/mmq.cu -o "$tmp/mmq.ptx" &
	wait
	python3 "$S" "$tmp/mmq.ptx" "$tmp/mmq1.ptx" '^strata_mmq_q80_dp4a_r64t64$'
	mkdir -p "$tmp/trees/par-moe_prefill-mma_r64t32/sm_90" "$tmp/trees/N-r64t32/sm_90" "$tmp/trees/O-r64t32/sm_90"
	python3 "$S" "$tmp/N.ptx" "$tmp/trees/N-r64t32/sm_90/moe_prefill.ptx" '_mma_r64t32$'
	python3 "$S" "$tmp/O.ptx" "$tmp/trees/O-r64t32/sm_90/moe_prefill.ptx" '_mma_r64t32$'
	cp "$tmp/trees/N-r64t32/sm_90/moe_prefill.ptx" "$tmp/trees/par-moe_prefill-mma_r64t32/sm_90/"
	cp "$tmp/mmq1.ptx" "$tmp/trees/N-r64t32/sm_90/mmq.ptx"
	cp "$tmp/mmq1.ptx" "$tmp/trees/O-r64t32/sm_90/mmq.ptx"
	# NB: N with launch_bounds(128, 5) on the five step-fold kernels (kernels/prefill.go
	# moeMinBlocks), in case the step's partial sums push them past 96 registers (4 blocks an SM).
	local R='"q6k/r64t32": 5, "iq2xs/r64t32": 5, "iq1m/r64t32": 5, "iq3xxs/r64t32": 5, "iq3s/r64t32": 5,'
	sed -i "s|^var moeMinBlocks = map\[string\]int{|&${R}|" kernels/prefill.go
	go run ./gen >/dev/null
	# shellcheck disable=SC2086
	clang-19 $flags -I $inc -I kernels/out/include $inc/moe_prefill.cu -o "$tmp/NB.ptx"
	git checkout -- kernels
	mkdir -p "$tmp/trees/NB-r64t32/sm_90" "$tmp/trees/par-NB-mma_r64t32/sm_90"
	python3 "$S" "$tmp/NB.ptx" "$tmp/trees/NB-r64t32/sm_90/moe_prefill.ptx" '_mma_r64t32$'
	grep -c minnctapersm "$tmp/trees/NB-r64t32/sm_90/moe_prefill.ptx"
	cp "$tmp/trees/NB-r64t32/sm_90/moe_prefill.ptx" "$tmp/trees/par-NB-mma_r64t32/sm_90/"
	cp "$tmp/mmq1.ptx" "$tmp/trees/NB-r64t32/sm_90/mmq.ptx"
	rm -f "$tmp"/*.ptx
	tar -C "$tmp" -czf "$d/trees.tgz" trees
	rm -rf "$tmp"
	cp "$here/call.sh" "$d/"
	{ git rev-parse HEAD; git status --porcelain; } >"$d/commit"
	ls -la "$d" && du -sh "$d"
}

run() {
	local d=${DEV_DIR:-.dev-moepf} w=/tmp/moepf7 t0=$SECONDS dry=${DRY:-0} budget=${BUDGET:-185}
	: "${OUT:?set OUT}"
	rm -rf "$w" && mkdir -p "$w/logs"
	local L=$w/logs pt=$w/parity.test sum=$w/logs/summary.txt NCU P f
	echo "call.sh run $(date -u +%FT%TZ) dry $dry budget $budget commit $(head -1 "$d/commit" 2>/dev/null)" | tee "$sum"
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
	for f in "$w"/trees/{N,O,NB}-*/sm_90/moe_prefill.ptx.ptxas.log; do
		echo "== ${f#"$w"/trees/}"
		grep -E "Compiling entry|registers|spill|error" "$f" | paste - - - 2>/dev/null | sed -E "s/ptxas info *: //g; s/Function properties for //; s/Compiling entry function //; s/ for 'sm_90'//" | head -20
	done >"$L/ptxas-summary.txt"
	# 2. Parity of N's r64t32 mma kernels (every type; five fold per K step), fresh seeds.
	export STRATA_REQUIRE_GPU=1
	local lim
	lim=$((budget - (SECONDS - t0) - 75))
	[ $lim -gt 60 ] && lim=60
	local tr
	for tr in par-moe_prefill-mma_r64t32 par-NB-mma_r64t32; do
		STRATA_CO_DIR=$w/trees/$tr timeout $lim "$pt" -test.v -test.timeout "$((lim - 2))s" \
			-test.run 'TestParity/sm_90/moe_prefill/[a-z0-9]+_mma_r64t32/' >"$L/parity-${tr#par-}.log" 2>&1 &
	done
	wait
	echo "parity done at $((SECONDS - t0)) s (limit $lim)" | tee -a "$sum"
	# 3. Benchmarks, one tree at a time, alternated.
	local g s n=0
	for g in N O NB O N NB N O; do
		n=$((n + 1))
		lim=$((budget - (SECONDS - t0) - 30))
		[ $lim -gt 15 ] && lim=15
		[ $lim -lt 8 ] && { echo "bench $n-$g: skipped, no time" | tee -a "$sum"; continue; }
		mkdir -p "$L/bench-$n-$g"
		s=$SECONDS
		STRATA_BENCH=1 STRATA_CO_DIR=$w/trees/$g-r64t32 STRATA_BENCH_OUT=$L/bench-$n-$g STRATA_BENCH_FILTER='_mma_r64t32$' timeout $lim \
			"$pt" -test.run '^TestBenchPrefill$' -test.v -test.timeout 100s >"$L/bench-$n-$g.log" 2>&1
		echo "bench $n-$g: exit $? in $((SECONDS - s)) s (limit $lim)" | tee -a "$sum"
	done
	# 4. ncu of N's and O's Q6_K and IQ2_XS gate/up (matched launch 60) at 512 tokens.
	local v
	for g in N O; do
		for v in q6k iq2xs; do
			lim=$((budget - (SECONDS - t0) - 3))
			[ $lim -gt 15 ] && lim=15
			[ $lim -lt 9 ] && { echo "ncu $g $v: skipped, no time" | tee -a "$sum"; continue; }
			s=$SECONDS
			STRATA_BENCH=1 STRATA_CO_DIR=$w/trees/$g-r64t32 STRATA_BENCH_FILTER="^${v}_mma_r64t32\$" timeout "$lim" "$NCU" --clock-control none \
				--section SpeedOfLight --section LaunchStats --section Occupancy --section SchedulerStats --section WarpStateStats \
				--section ComputeWorkloadAnalysis --section InstructionStats \
				-k "regex:strata_moe_prefill_${v}_mma_r64t32\$" --launch-skip 60 -c 1 --kill yes -f -o "$w/ncu-$g-$v" \
				"$pt" -test.run '^TestBenchPrefill$' -test.v -test.timeout 100s >"$L/ncu-$g-$v.log" 2>&1
			echo "ncu $g $v: exit $? in $((SECONDS - s)) s (limit $lim)" | tee -a "$sum"
			[ -f "$w/ncu-$g-$v.ncu-rep" ] && "$NCU" -i "$w/ncu-$g-$v.ncu-rep" --page details --print-details all >"$L/ncu-$g-$v-gu.txt" 2>&1
		done
	done
	cnt() { echo "passed $(cat "$@" | grep -cE '^\s*--- PASS: TestParity/.*/.*/.*/'), failed $(cat "$@" | grep -cE '^\s*--- FAIL: TestParity/.*/.*/.*/'), skipped $(cat "$@" | grep -cE '^\s*--- SKIP: TestParity/.*/.*/.*/')"; }
	{
		echo "## parity: $(cnt "$L"/parity-*.log) $(grep -hE '^(ok|PASS|FAIL)$' "$L"/parity-*.log | tr '\n' ' ')"
		grep -hE "^\s*--- FAIL|panic|test timed out" "$L"/parity-*.log | head -20
		echo "## moe_prefill tables (route, gate/up, down, combine, layer µs, TOPS)"
		for f in "$L"/bench-*/bench_prefill.txt; do echo "--- ${f#"$L"/}"; grep -E "_mma_|ceiling" "$f"; done 2>/dev/null
		grep -hE "FAIL|panic" "$L"/bench-*.log 2>/dev/null | head
		echo "## ncu"
		for f in "$L"/ncu-*-gu.txt; do echo "--- ${f#"$L"/}"; grep -E "Duration|Registers Per|Achieved Occupancy|Issue Slots Busy|Executed Instructions  |Stall Long|Block Limit Reg" "$f" | sed -E 's/ +/ /g'; done 2>/dev/null
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
