#!/usr/bin/env bash
# Session 6, helper moe, issue 6: call 2. Parity (STRATA_REQUIRE_GPU=1, fresh seeds) of every
# sm_90 moe_prefill and mmq variant of the branch, each (family, op, tile) a tree assembled by
# ptxas, one process a tree; then TestBenchPrefill for moe_prefill r64t32 (N, as committed; NB5:
# N with launch_bounds(128, 5) on every r64t32 kernel), N's and main's (O) r64t64 and r128t32
# (N's differ from O's only by each kernel's own shared array); then ncu of N's Q6_K and IQ2_XS
# r64t32 gate/up at 512 tokens.
#
#   call2.sh build   build machine, root of the s6-moe worktree (kernels/ committed). O from
#       /work/main (MAIN=...). Writes parity.test.xz, trees.tgz and this script to $DEV
#       (default /work/main/.dev-moe).
#   call2.sh run     device, repository root of the copy (carry .dev-moe), $OUT set.
#   DRY=1 call2.sh run   rehearsal with stubs.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)

build() {
	set -e
	local d=${DEV:-/work/main/.dev-moe} main=${MAIN:-/work/main} tmp flags root inc=kernels/out/sm_90 S
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
	clang-19 $flags -I $inc -I kernels/out/include $inc/mmq.cu -o "$tmp/mmq.ptx" &
	# shellcheck disable=SC2086
	clang-19 $flags -I $inc -I kernels/out/include $inc/moe_prefill.cu -o "$tmp/N.ptx" &
	# shellcheck disable=SC2086
	(cd "$main" && clang-19 $flags -I $inc -I kernels/out/include $inc/moe_prefill.cu -o "$tmp/O.ptx") &
	wait
	local op t
	for op in mma dp4a; do
		for t in r64t64 r128t64 r128t32 r64t32; do
			mkdir -p "$tmp/trees/par-moe_prefill-${op}_$t/sm_90"
			python3 "$S" "$tmp/N.ptx" "$tmp/trees/par-moe_prefill-${op}_$t/sm_90/moe_prefill.ptx" "_${op}_$t\$"
		done
		for t in r64t64 r128t64 r64t128; do
			mkdir -p "$tmp/trees/par-mmq-${op}_$t/sm_90"
			python3 "$S" "$tmp/mmq.ptx" "$tmp/trees/par-mmq-${op}_$t/sm_90/mmq.ptx" "_${op}_$t\$"
		done
	done
	python3 "$S" "$tmp/mmq.ptx" "$tmp/mmq1.ptx" '^strata_mmq_q80_dp4a_r64t64$'
	for t in r64t32 r64t64 r128t32; do
		mkdir -p "$tmp/trees/N-$t/sm_90" "$tmp/trees/O-$t/sm_90"
		cp "$tmp/trees/par-moe_prefill-mma_$t/sm_90/moe_prefill.ptx" "$tmp/trees/N-$t/sm_90/"
		[ $t = r64t64 ] && python3 "$S" "$tmp/O.ptx" "$tmp/trees/O-$t/sm_90/moe_prefill.ptx" "_mma_$t\$"
		cp "$tmp/mmq1.ptx" "$tmp/trees/N-$t/sm_90/mmq.ptx"
		cp "$tmp/mmq1.ptx" "$tmp/trees/O-$t/sm_90/mmq.ptx"
	done
	rm -rf "$tmp/trees/O-r64t32" "$tmp/trees/O-r128t32"
	# mmq shares the tile name r64t64: those trees carry mmq's r64t64 kernels (benched too)
	cp "$tmp/trees/par-mmq-mma_r64t64/sm_90/mmq.ptx" "$tmp/trees/N-r64t64/sm_90/mmq.ptx"
	cp "$tmp/trees/par-mmq-mma_r64t64/sm_90/mmq.ptx" "$tmp/trees/O-r64t64/sm_90/mmq.ptx"
	local R='"q80/r64t32": 5, "q20/r64t32": 5, "q4k/r64t32": 5, "q6k/r64t32": 5, "iq2xs/r64t32": 5, "iq3xxs/r64t32": 5, "iq3s/r64t32": 5, "iq1m/r64t32": 5,'
	sed -i "s|^var moeMinBlocks = map\[string\]int{|&${R}|" kernels/prefill.go
	go run ./gen >/dev/null
	# shellcheck disable=SC2086
	clang-19 $flags -I $inc -I kernels/out/include $inc/moe_prefill.cu -o "$tmp/NB5.ptx"
	git checkout -- kernels
	mkdir -p "$tmp/trees/NB5-r64t32/sm_90"
	python3 "$S" "$tmp/NB5.ptx" "$tmp/trees/NB5-r64t32/sm_90/moe_prefill.ptx" '_mma_r64t32$'
	cp "$tmp/mmq1.ptx" "$tmp/trees/NB5-r64t32/sm_90/mmq.ptx"
	grep -c minnctapersm "$tmp/trees/NB5-r64t32/sm_90/moe_prefill.ptx"
	rm -f "$tmp"/*.ptx
	tar -C "$tmp" -czf "$d/trees.tgz" trees
	rm -rf "$tmp"
	cp "$here/call2.sh" "$d/"
	{ git rev-parse HEAD; git status --porcelain; echo "O: $(git -C "$main" rev-parse HEAD)"; git -C "$main" status --porcelain -- kernels; } >"$d/commit"
	ls -la "$d" && du -sh "$d"
}

run() {
	local d=${DEV_DIR:-.dev-moe} w=/tmp/moe6b t0=$SECONDS dry=${DRY:-0} budget=${BUDGET:-158}
	: "${OUT:?set OUT}"
	rm -rf "$w" && mkdir -p "$w/logs"
	local L=$w/logs pt=$w/parity.test sum=$w/logs/summary.txt NCU P f
	echo "call2.sh run $(date -u +%FT%TZ) dry $dry budget $budget commit $(head -1 "$d/commit" 2>/dev/null)" | tee "$sum"
	tar -C "$w" -xzf "$d/trees.tgz"
	if [ "$dry" = 1 ]; then
		printf '#!/bin/sh\necho "stub $0 $*"; env | grep -E "^STRATA_" | sort\nsleep 2\necho "--- PASS: TestParity/sm_90/x/y/z"\nif [ -n "$STRATA_BENCH_OUT" ]; then mkdir -p "$STRATA_BENCH_OUT"; echo "q80_mma_stub 512 1.0 1.0 1%%" >"$STRATA_BENCH_OUT/bench_prefill.txt"; fi\necho PASS\n' >"$pt"
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
	for f in "$w"/trees/{N,NB5,O}-*/sm_90/moe_prefill.ptx.ptxas.log; do
		echo "== ${f#"$w"/trees/}"
		grep -E "Compiling entry|registers|spill|error" "$f" | paste - - - 2>/dev/null | sed -E "s/ptxas info *: //g; s/Function properties for //; s/Compiling entry function //; s/ for 'sm_90'//" | head -20
	done >"$L/ptxas-summary.txt"
	# 2. Parity, one process per tree (the driver gets cubins).
	export STRATA_REQUIRE_GPU=1
	local pids=() tr fam ot lim
	lim=$((budget - (SECONDS - t0) - 55))
	[ $lim -gt 100 ] && lim=100
	for tr in "$w"/trees/par-*; do
		tr=${tr##*/} fam=${tr#par-} ot=${fam#*-} fam=${fam%%-*}
		STRATA_CO_DIR=$w/trees/$tr timeout $lim "$pt" -test.v -test.timeout "$((lim - 2))s" -test.run "TestParity/sm_90/$fam/[a-z0-9]+_$ot/" >"$L/parity-$fam-$ot.log" 2>&1 &
		pids+=($!)
	done
	# NB5's r64t32 mma kernels too (they differ from N's by launch_bounds only).
	STRATA_CO_DIR=$w/trees/NB5-r64t32 timeout $lim "$pt" -test.v -test.timeout "$((lim - 2))s" -test.run "TestParity/sm_90/moe_prefill/[a-z0-9]+_mma_r64t32/" >"$L/parity-NB5-moe_prefill-mma_r64t32.log" 2>&1 &
	pids+=($!)
	wait "${pids[@]}"
	echo "parity done at $((SECONDS - t0)) s (limit $lim)" | tee -a "$sum"
	# 3. Benchmarks, one at a time.
	local g s
	for g in N-r64t32 N-r64t64 O-r64t64 N-r128t32 NB5-r64t32; do
		t=${g#*-}
		lim=$((budget - (SECONDS - t0) - 16))
		[ $lim -gt 25 ] && lim=25
		[ $lim -lt 8 ] && { echo "bench $g: skipped, no time" | tee -a "$sum"; continue; }
		mkdir -p "$L/bench-$g"
		s=$SECONDS
		STRATA_BENCH=1 STRATA_CO_DIR=$w/trees/$g STRATA_BENCH_OUT=$L/bench-$g STRATA_BENCH_FILTER="_mma_$t\$" timeout $lim \
			"$pt" -test.run '^TestBenchPrefill$' -test.v -test.timeout 100s >"$L/bench-$g.log" 2>&1
		echo "bench $g: exit $? in $((SECONDS - s)) s (limit $lim)" | tee -a "$sum"
	done
	# 4. ncu of N's gate/up (matched launch 60) at 512 tokens.
	local v
	for v in q6k iq2xs; do
		lim=$((budget - (SECONDS - t0) - 3))
		[ $lim -gt 20 ] && lim=20
		[ $lim -lt 10 ] && { echo "ncu $v: skipped, no time" | tee -a "$sum"; continue; }
		s=$SECONDS
		STRATA_BENCH=1 STRATA_CO_DIR=$w/trees/N-r64t32 STRATA_BENCH_FILTER="^${v}_mma_r64t32\$" timeout "$lim" "$NCU" --clock-control none \
			--section SpeedOfLight --section LaunchStats --section Occupancy --section SchedulerStats --section WarpStateStats \
			--section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis --section InstructionStats \
			-k "regex:strata_moe_prefill_${v}_mma_r64t32\$" --launch-skip 60 -c 1 --kill yes -f -o "$w/ncu-$v" \
			"$pt" -test.run '^TestBenchPrefill$' -test.v -test.timeout 100s >"$L/ncu-$v.log" 2>&1
		echo "ncu $v: exit $? in $((SECONDS - s)) s (limit $lim)" | tee -a "$sum"
		[ -f "$w/ncu-$v.ncu-rep" ] && "$NCU" -i "$w/ncu-$v.ncu-rep" --page details --print-details all >"$L/ncu-$v-r64t32-gu.txt" 2>&1
	done
	cnt() { echo "passed $(cat "$@" | grep -cE '^\s*--- PASS: TestParity/.*/.*/.*/'), failed $(cat "$@" | grep -cE '^\s*--- FAIL: TestParity/.*/.*/.*/'), skipped $(cat "$@" | grep -cE '^\s*--- SKIP: TestParity/.*/.*/.*/')"; }
	{
		echo "## parity: $(cnt "$L"/parity-*.log)"
		for f in "$L"/parity-*.log; do echo "- ${f#"$L"/parity-}: $(cnt "$f") $(grep -E '^(ok|PASS|FAIL)$' "$f" | tr '\n' ' ')"; done
		grep -hE "^\s*--- FAIL|panic|test timed out" "$L"/parity-*.log | head -20
		echo "## moe_prefill tables"
		for f in "$L"/bench-*/bench_prefill.txt; do echo "--- ${f#"$L"/}"; grep -E "_mma_|ceiling" "$f"; done 2>/dev/null
		grep -hE "FAIL|panic" "$L"/bench-*.log 2>/dev/null | head
		echo "## ncu"
		for f in "$L"/ncu-*.txt; do echo "--- ${f#"$L"/}"; grep -E "Duration|Registers Per|Achieved Occupancy|Issue Slots Busy|L1: Data Pipe Lsu|Stall Long|Block Limit Reg" "$f" | sed -E 's/ +/ /g'; done 2>/dev/null
		echo "total $((SECONDS - t0)) s"
	} >>"$sum"
	cp "$sum" "$L/ptxas-summary.txt" "$OUT/"
	tar -C "$w" -czf "$OUT/logs.tgz" logs
	cat "$sum"
}

case "${1:-run}" in
build) build ;;
run) run ;;
*) echo "usage: call2.sh build|run" >&2; exit 2 ;;
esac
