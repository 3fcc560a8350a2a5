#!/usr/bin/env bash
# PREPARED, NOT RUN: a third call that measures the corrected candidate (branch s4-mmq-cand)
# the way call 2 should have (call 2's benchmark filter named every tile and failed; its
# parity and ncu ran). Trees: O = OLD's kernels/out, C = CAND's, D = CAND with the Q8_0
# software pipelining off (strata_mmq_pipe false, sed on the generated source).
#
#   call3.sh build DEV [OLD] [CAND]   build machine, repository root (Go, clang-19):
#       parity.test (-tags strata_nodemo, xz), trees.tgz (sm_90 PTX stripped to the mma
#       variants of one tile per family), this script; OLD defaults to HEAD, CAND to s4-mmq-cand.
#   call3.sh run DEV                  GPU machine, repository root of the device copy, $OUT set
#       (carry DEV; about 100 s, give timeout_s 150): ptxas, parity of C and D, TestBenchPrefill
#       per tree x tile, ncu of C's Q8_0 r128t64. DRY=1: stubs, no GPU.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
strip=$here/../2026-11-29-prefill-async/strip_ptx.py

build() {
	set -e
	local dev=$1 old=${2:-HEAD} cand=${3:-s4-mmq-cand} tmp T t pt
	tmp=$(mktemp -d)
	rm -rf "$dev" && mkdir -p "$dev"
	CGO_ENABLED=0 go test -c -trimpath -ldflags=-s -tags strata_nodemo -o "$dev/parity.test" ./parity
	xz -9 -T2 "$dev/parity.test"
	local flags
	flags=$(awk -F'\t' '$1 == "target" && $2 == "sm_90" { print $6 }' kernels/out/objects.txt)
	for T in O C D; do
		mkdir -p "$tmp/src/$T"
		git archive "$([ $T = O ] && echo "$old" || echo "$cand")" kernels/out | tar -x -C "$tmp/src/$T"
	done
	sed -i 's/struct strata_mmq_pipe { static constexpr bool v = strata_mmq_wide<QT>::v; };/struct strata_mmq_pipe { static constexpr bool v = false; };/' \
		"$tmp/src/D/kernels/out/sm_90/mmq.cu" "$tmp/src/D/kernels/out/sm_90/moe_prefill.cu"
	grep -q "strata_mmq_pipe { static constexpr bool v = false; }" "$tmp/src/D/kernels/out/sm_90/mmq.cu"
	for T in O C D; do
		for f in mmq moe_prefill; do
			# shellcheck disable=SC2086 # flags are a list
			clang-19 $flags -I "$tmp/src/$T/kernels/out/sm_90" -I kernels/out/include "$tmp/src/$T/kernels/out/sm_90/$f.cu" -o "$tmp/$T-$f.ptx" &
		done
	done
	wait
	! grep -l "__local_depot" "$tmp"/C-*.ptx "$tmp"/D-*.ptx
	for T in O C D; do
		for t in r128t64 r64t64 r64t128; do
			pt=$t
			[ $t = r64t128 ] && pt=r128t32
			mkdir -p "$tmp/trees/$T/$t/sm_90"
			python3 "$strip" "$tmp/$T-mmq.ptx" "$tmp/trees/$T/$t/sm_90/mmq.ptx" "_mma_$t\$"
			python3 "$strip" "$tmp/$T-moe_prefill.ptx" "$tmp/trees/$T/$t/sm_90/moe_prefill.ptx" "_mma_$pt\$"
		done
	done
	tar -C "$tmp" -czf "$dev/trees.tgz" trees
	cp "$here/call3.sh" "$dev/"
	{ git rev-parse "$old" "$cand"; } >"$dev/revs"
	rm -rf "$tmp"
	du -sh "$dev"
}

run() {
	local D=$1 W=/tmp/mmq3 t0=$SECONDS B=${BUDGET:-140} O=${OUT:-/tmp/mmq3-out}
	local L=$W/logs
	rm -rf "$W" && mkdir -p "$L" "$O"
	left() { echo $((B - (SECONDS - t0))); }
	lim() { local l; l=$(left); l=$((l - ${2:-0})); [ "$l" -lt "$1" ] && echo $((l > 3 ? l : 3)) || echo "$1"; }
	tar -C "$W" -xzf "$D/trees.tgz"
	cp "$D/revs" "$L/" 2>/dev/null
	if [ "${DRY:-0}" = 1 ]; then
		printf '#!/bin/sh\necho stub "$@"; echo "--- PASS: TestParity/sm_90/mmq/q80_mma_r64t64/x (0.1s)"\n' >"$W/parity.test"; chmod +x "$W/parity.test"
		printf '#!/bin/sh\necho "$@"; p=; for a; do [ "$p" = -o ] && touch "$a.ncu-rep"; p=$a; done\n' >"$W/ncu"; chmod +x "$W/ncu"
		NCU=$W/ncu
		ptxas_run() { cp "$1" "$2"; echo "ptxas stub"; }
	else
		python3 -c 'import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2], "wb"))' "$D/parity.test.xz" "$W/parity.test"
		chmod +x "$W/parity.test"
		NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
		P=$(command -v ptxas || echo /usr/local/cuda/bin/ptxas)
		ptxas_run() { "$P" -arch=sm_90 -v "$1" -o "$2"; }
	fi
	nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm,clocks.max.mem --format=csv >"$L/gpu.txt" 2>&1
	local f n s pl T t fam tt g l
	for f in "$W"/trees/*/*/sm_90/*.ptx; do
		n=$(echo "${f#"$W"/trees/}" | sed 's|/sm_90/|-|; s|/|-|g; s|\.ptx$||')
		(timeout "$(lim 60 80)" bash -c "$(declare -f ptxas_run); P=${P:-}; ptxas_run '$f' '${f%.ptx}.cubin'" >"$L/ptxas-$n.log" 2>&1
			echo "exit $?" >>"$L/ptxas-$n.log"
			[ -s "${f%.ptx}.cubin" ] && mv "${f%.ptx}.cubin" "$f") &
	done
	wait
	echo "ptxas done at $((SECONDS - t0)) s" | tee "$L/summary.txt"
	s=$SECONDS pl=$(lim 40 75)
	for T in C D; do
		for t in r128t64 r64t64 r64t128; do
			for fam in mmq moe_prefill; do
				tt=$t
				[ "$fam" = moe_prefill ] && [ "$t" = r64t128 ] && tt=r128t32
				STRATA_REQUIRE_GPU=1 STRATA_CO_DIR=$W/trees/$T/$t timeout "$pl" "$W/parity.test" -test.v -test.timeout "$((pl - 2))s" \
					-test.run "TestParity/sm_90/$fam/[a-z0-9]+_mma_$tt\$" >"$L/parity-$T-$fam-$tt.log" 2>&1 &
			done
		done
	done
	wait
	echo "parity done in $((SECONDS - s)) s (limit $pl) at $((SECONDS - t0)) s" | tee -a "$L/summary.txt"
	for g in O/r128t64 C/r128t64 D/r128t64 O/r64t64 C/r64t64 D/r64t64 O/r64t128 C/r64t128 D/r64t128; do
		T=${g%/*} t=${g#*/}
		l=$(left)
		[ "$l" -lt 12 ] && { echo "bench $g: skipped ($l s left)" | tee -a "$L/summary.txt"; continue; }
		l=$(lim 20 0) s=$SECONDS
		tt=$t
		[ "$t" = r64t128 ] && tt="(r64t128|r128t32)"
		mkdir -p "$L/bench-$T-$t"
		STRATA_BENCH=1 STRATA_CO_DIR=$W/trees/$T/$t STRATA_BENCH_OUT=$L/bench-$T-$t STRATA_BENCH_FILTER="_mma_$tt\$" timeout "$l" \
			"$W/parity.test" -test.run '^TestBenchPrefill$' -test.v -test.timeout 100s >"$L/bench-$T-$t.log" 2>&1
		echo "bench $g: exit $? in $((SECONDS - s)) s (limit $l)" | tee -a "$L/summary.txt"
	done
	l=$(left)
	if [ "$l" -ge 14 ]; then
		s=$SECONDS
		STRATA_BENCH=1 STRATA_CO_DIR=$W/trees/C/r128t64 STRATA_BENCH_FILTER='^q80_mma_r128t64$' timeout "$((l - 2))" "$NCU" --clock-control none \
			--section SpeedOfLight --section MemoryWorkloadAnalysis --section MemoryWorkloadAnalysis_Tables --section WarpStateStats --section Occupancy \
			-k regex:strata_mmq_q80_mma_r128t64 --launch-skip 2 -c 1 --kill yes -f -o "$W/ncu-C" \
			"$W/parity.test" -test.run '^TestBenchPrefill$' -test.v -test.timeout 100s >"$L/ncu-C.log" 2>&1
		echo "ncu C: exit $? in $((SECONDS - s)) s" | tee -a "$L/summary.txt"
		[ -f "$W/ncu-C.ncu-rep" ] && "$NCU" -i "$W/ncu-C.ncu-rep" --page details --print-details all >"$L/ncu-C-q80-r128t64.txt" 2>&1
		[ -f "$W/ncu-C.ncu-rep" ] && "$NCU" -i "$W/ncu-C.ncu-rep" --page raw --csv >"$L/ncu-C-q80-r128t64-raw.csv" 2>&1
	fi
	for f in "$L"/ptxas-*.log; do echo "== $(basename "$f" .log)"; grep -E "Compiling|Used|spill|exit" "$f" | paste - - - | sed -E "s/ptxas info *: //g; s/Compiling entry function //; s/ for 'sm_90'//"; done >"$L/ptxas-summary.txt"
	{
		for f in "$L"/parity-*.log; do
			echo "$(basename "$f" .log): passed $(grep -cE '^\s*--- PASS: TestParity/.*/.*/.*/' "$f"), failed $(grep -cE '^\s*--- FAIL: TestParity/.*/.*/.*/' "$f") $(grep -E '^(ok|FAIL|PASS)$' "$f" | tr '\n' ' ')"
			grep -E "^\s*--- FAIL|panic:|timed out" "$f" | head -5
		done
		echo "all: passed $(cat "$L"/parity-*.log | grep -cE '^\s*--- PASS: TestParity/.*/.*/.*/'), failed $(cat "$L"/parity-*.log | grep -cE '^\s*--- FAIL: TestParity/.*/.*/.*/')"
	} >"$L/parity-summary.txt"
	tar -C "$W" -czf "$O/logs.tgz" logs
	cp "$L/summary.txt" "$L/parity-summary.txt" "$L/ptxas-summary.txt" "$O/" 2>/dev/null
	cat "$L/summary.txt" "$L/parity-summary.txt"
	for f in "$L"/bench-*/bench_prefill.txt; do echo "--- $f"; grep -E "_mma_|ceiling" "$f"; done 2>/dev/null
	grep -E "spill" "$L/ptxas-summary.txt" | grep -v " 0 bytes spill stores" | head -20
	echo "total $((SECONDS - t0)) s"
}

case ${1:-} in
build) shift; build "$@" ;;
run) shift; run "$@" ;;
*) echo "usage: $0 build DEV [OLD] [CAND] | run DEV" >&2; exit 2 ;;
esac
