#!/usr/bin/env bash
# Session 6, helper moe, issue 6: call 1 for moe_prefill at the Qwen3-30B-A3B shape.
# Measures main's moe_prefill per phase (every type, its three mma tiles), probes the new
# r64t32 tile in several builds, and profiles (ncu) the gate/up and down kernels of Q6_K
# r64t64 and IQ2_XS r128t32.
#
#   call1.sh build   build machine, at the root of the s6-moe worktree (HEAD committed);
#       O = /work/main's kernels (MAIN=...). Writes parity.test.xz (HEAD), trees.tgz
#       (trees/<tree>/<tile>/sm_90/{mmq,moe_prefill}.ptx: moe_prefill cut to one tile's mma
#       kernels, mmq cut to one small kernel the bench loads and filters out) and this script
#       into $DEV (default /work/main/.dev-moe).
#   call1.sh run     device, repository root of the copy (carry .dev-moe), $OUT set.
#   DRY=1 call1.sh run   the same flow with stubs (rehearsal).
# Probe trees (each a temporary edit of kernels/prefill.go, regenerated, then restored):
#   S   HEAD: r64t32, own shared array per kernel, no min blocks, no skip
#   K   S + the partial-tile skip on every r64t32 kernel
#   B5, B6, B8   S + launch_bounds(128, n) on every r64t32 kernel
#   KB6 K + B6;  W   S with the wide staging form on every r64t32 kernel
#   R5  main's r64t64 kernels (skip as main) + own shared array + launch_bounds(128, 5)
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)

build() {
	set -e
	local d=${DEV:-/work/main/.dev-moe} main=${MAIN:-/work/main} tmp flags root
	root=$(cd "$here/../../.." && pwd)
	cd "$root"
	[ -z "$(git status --porcelain -- kernels)" ] || { echo "kernels/ not clean" >&2; exit 1; }
	rm -rf "$d" && mkdir -p "$d"
	tmp=$(mktemp -d)
	CGO_ENABLED=0 go test -c -trimpath -ldflags=-s -tags strata_nodemo -o "$d/parity.test" ./parity
	xz -9 -T2 "$d/parity.test"
	flags=$(awk -F'\t' '$1 == "target" && $2 == "sm_90" { print $6 }' kernels/out/objects.txt)
	local inc=kernels/out/sm_90
	# shellcheck disable=SC2086
	clang-19 $flags -I $inc -I kernels/out/include kernels/out/sm_90/mmq.cu -o "$tmp/mmq.ptx"
	python3 "$root/bench/results/2026-11-29-prefill-async/strip_ptx.py" "$tmp/mmq.ptx" "$tmp/mmq1.ptx" '^strata_mmq_q80_dp4a_r64t64$'
	# shellcheck disable=SC2086
	(cd "$main" && clang-19 $flags -I $inc -I kernels/out/include kernels/out/sm_90/moe_prefill.cu -o "$tmp/O.ptx")
	mk() { # tree tile ptx
		mkdir -p "$tmp/trees/$1/$2/sm_90"
		python3 "$root/bench/results/2026-11-29-prefill-async/strip_ptx.py" "$3" "$tmp/trees/$1/$2/sm_90/moe_prefill.ptx" "_mma_$2\$"
		cp "$tmp/mmq1.ptx" "$tmp/trees/$1/$2/sm_90/mmq.ptx"
	}
	for t in r64t64 r128t64 r128t32; do mk O $t "$tmp/O.ptx"; done
	gen1() { # tree tile sed-expression
		[ -n "$3" ] && sed -i "$3" kernels/prefill.go
		go run ./gen >/dev/null
		# shellcheck disable=SC2086
		clang-19 $flags -I $inc -I kernels/out/include kernels/out/sm_90/moe_prefill.cu -o "$tmp/$1.ptx"
		git checkout -- kernels
		mk "$1" "$2" "$tmp/$1.ptx"
	}
	local T8='"q80/r64t32": N, "q20/r64t32": N, "q4k/r64t32": N, "q6k/r64t32": N, "iq2xs/r64t32": N, "iq3xxs/r64t32": N, "iq3s/r64t32": N, "iq1m/r64t32": N,'
	gen1 S r64t32 ""
	gen1 K r64t32 "s|^var moePartialSkip = map\[string\]bool{|&${T8//N/true}|"
	gen1 B5 r64t32 "s|^var moeMinBlocks = map\[string\]int{|&${T8//N/5}|"
	gen1 B6 r64t32 "s|^var moeMinBlocks = map\[string\]int{|&${T8//N/6}|"
	gen1 B8 r64t32 "s|^var moeMinBlocks = map\[string\]int{|&${T8//N/8}|"
	gen1 KB6 r64t32 "s|^var moeMinBlocks = map\[string\]int{|&${T8//N/6}|; s|^var moePartialSkip = map\[string\]bool{|&${T8//N/true}|"
	local W='"moe_prefill/q80/r64t32": true, "moe_prefill/q20/r64t32": true, "moe_prefill/q4k/r64t32": true, "moe_prefill/q6k/r64t32": true, "moe_prefill/iq2xs/r64t32": true, "moe_prefill/iq3xxs/r64t32": true, "moe_prefill/iq3s/r64t32": true, "moe_prefill/iq1m/r64t32": true,'
	gen1 W r64t32 "s|^var mmqWideStaging = map\[string\]bool{|&${W}|"
	local R='"q80/r64t64": 5, "q20/r64t64": 5, "q4k/r64t64": 5, "q6k/r64t64": 5, "iq2xs/r64t64": 5, "iq3xxs/r64t64": 5, "iq3s/r64t64": 5, "iq1m/r64t64": 5,'
	gen1 R5 r64t64 "s|^var moeMinBlocks = map\[string\]int{|&${R}|"
	for f in "$tmp"/trees/*/*/sm_90/moe_prefill.ptx; do grep -c "^.visible .entry" "$f" | sed "s|^|$f: |"; done
	grep -h "maxnreg\|minnctapersm" "$tmp"/trees/B6/r64t32/sm_90/moe_prefill.ptx | sort | uniq -c
	tar -C "$tmp" -czf "$d/trees.tgz" trees
	rm -rf "$tmp"
	cp "$here/call1.sh" "$d/"
	{ git rev-parse HEAD; git status --porcelain; echo "O: $(git -C "$main" rev-parse HEAD)"; git -C "$main" status --porcelain -- kernels; } >"$d/commit"
	ls -la "$d" && du -sh "$d"
}

run() {
	local d=${DEV_DIR:-.dev-moe} w=/tmp/moe6 t0=$SECONDS dry=${DRY:-0} budget=${BUDGET:-190}
	: "${OUT:?set OUT}"
	rm -rf "$w" && mkdir -p "$w/logs"
	local L=$w/logs pt=$w/parity.test sum=$w/logs/summary.txt NCU
	echo "call1.sh run $(date -u +%FT%TZ) dry $dry budget $budget commit $(head -1 "$d/commit" 2>/dev/null)" | tee "$sum"
	tar -C "$w" -xzf "$d/trees.tgz"
	if [ "$dry" = 1 ]; then
		printf '#!/bin/sh\necho "stub $0 $*"; env | grep -E "^STRATA_" | sort\nsleep 1\nif [ -n "$STRATA_BENCH_OUT" ]; then mkdir -p "$STRATA_BENCH_OUT"; echo "q80_mma_stub 512 1.0 1.0 1%%" >"$STRATA_BENCH_OUT/bench_prefill.txt"; fi\necho PASS\n' >"$pt"
		chmod +x "$pt"
		printf '#!/bin/sh\necho "$@"; p=; for a; do [ "$p" = -o ] && touch "$a.ncu-rep"; p=$a; done\n' >"$w/ncu"; chmod +x "$w/ncu"
		NCU=$w/ncu
	else
		python3 -c 'import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2], "wb"))' "$d/parity.test.xz" "$pt" && chmod +x "$pt"
		{ nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm,clocks.max.mem --format=csv; nproc; ptxas --version; ncu --version; } >"$L/gpu.txt" 2>&1
		NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
	fi
	cp "$d/commit" "$L/commit" 2>/dev/null
	# 1. ptxas -v every tree (parallel, CPU only).
	local P f
	P=$(command -v ptxas || echo /usr/local/cuda/bin/ptxas)
	for f in "$w"/trees/*/*/sm_90/*.ptx; do
		if [ "$dry" = 1 ]; then echo "dry ptxas $f" >"$f.ptxas.log"; continue; fi
		("$P" -v -arch=sm_90 "$f" -o "${f%.ptx}.cubin" >"$f.ptxas.log" 2>&1 && mv "${f%.ptx}.cubin" "$f") &
	done
	wait
	echo "ptxas done at $((SECONDS - t0)) s" | tee -a "$sum"
	for f in "$w"/trees/*/*/sm_90/moe_prefill.ptx.ptxas.log; do
		echo "== ${f#"$w"/trees/}"
		grep -E "Compiling entry|registers|spill|error" "$f" | paste - - - 2>/dev/null | sed -E "s/ptxas info *: //g; s/Function properties for //; s/Compiling entry function //; s/ for 'sm_90'//" | head -20
	done >"$L/ptxas-summary.txt"
	# 2. Benchmarks, one process at a time.
	local T t s lim
	for g in O/r64t64 O/r128t32 S/r64t32 K/r64t32 B5/r64t32 B6/r64t32 B8/r64t32 KB6/r64t32 W/r64t32 R5/r64t64 O/r128t64; do
		T=${g%/*} t=${g#*/}
		lim=$((budget - (SECONDS - t0) - 60))
		[ $lim -gt 25 ] && lim=25
		[ $lim -lt 8 ] && { echo "bench $g: skipped, no time" | tee -a "$sum"; continue; }
		mkdir -p "$L/bench-$T-$t"
		s=$SECONDS
		STRATA_BENCH=1 STRATA_CO_DIR=$w/trees/$T/$t STRATA_BENCH_OUT=$L/bench-$T-$t STRATA_BENCH_FILTER="_mma_$t\$" timeout $lim \
			"$pt" -test.run '^TestBenchPrefill$' -test.v -test.timeout 100s >"$L/bench-$T-$t.log" 2>&1
		echo "bench $g: exit $? in $((SECONDS - s)) s (limit $lim)" | tee -a "$sum"
	done
	# 3. ncu: gate/up (matched launch 60: 55 route launches, 1 route, then phase 1) and down
	#    (launch 115) at 512 tokens.
	local k v sk
	for k in "q6k r64t64 60 gu" "q6k r64t64 115 dn" "iq2xs r128t32 60 gu" "iq2xs r128t32 115 dn" "q6k r64t32 60 gu-S" "q6k r64t32 115 dn-S"; do
		read -r v t sk nm <<<"$k"
		T=O
		[ $t = r64t32 ] && T=S
		lim=$((budget - (SECONDS - t0) - 4))
		[ $lim -gt 40 ] && lim=40
		[ $lim -lt 15 ] && { echo "ncu $k: skipped, no time" | tee -a "$sum"; continue; }
		s=$SECONDS
		STRATA_BENCH=1 STRATA_CO_DIR=$w/trees/$T/$t STRATA_BENCH_FILTER="^${v}_mma_$t\$" timeout "$lim" "$NCU" --clock-control none \
			--section SpeedOfLight --section LaunchStats --section Occupancy --section SchedulerStats --section WarpStateStats \
			--section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis --section InstructionStats \
			-k "regex:strata_moe_prefill_${v}_mma_$t\$" --launch-skip "$sk" -c 1 --kill yes -f -o "$w/ncu-$v-$t-$nm" \
			"$pt" -test.run '^TestBenchPrefill$' -test.v -test.timeout 100s >"$L/ncu-$v-$t-$nm.log" 2>&1
		echo "ncu $k: exit $? in $((SECONDS - s)) s (limit $lim)" | tee -a "$sum"
		[ -f "$w/ncu-$v-$t-$nm.ncu-rep" ] && "$NCU" -i "$w/ncu-$v-$t-$nm.ncu-rep" --page details --print-details all >"$L/ncu-$v-$t-$nm.txt" 2>&1
	done
	{
		echo "## moe_prefill tables"
		for f in "$L"/bench-*/bench_prefill.txt; do echo "--- ${f#"$L"/}"; grep -E "_mma_|ceiling" "$f"; done 2>/dev/null
		grep -hE "FAIL|panic" "$L"/bench-*.log 2>/dev/null | head
		echo "## ncu"
		for f in "$L"/ncu-*.txt; do echo "--- ${f#"$L"/}"; grep -E "Duration|Registers Per|Achieved Occupancy|Theoretical Occupancy|Issue Slots Busy|No Eligible|Warp Cycles Per Issued|Block Limit" "$f" | sed -E 's/ +/ /g'; done 2>/dev/null
		echo "total $((SECONDS - t0)) s"
	} >>"$sum"
	cp "$sum" "$L/ptxas-summary.txt" "$OUT/"
	tar -C "$w" -czf "$OUT/logs.tgz" logs
	cat "$sum"
}

case "${1:-run}" in
build) build ;;
run) run ;;
*) echo "usage: call1.sh build|run" >&2; exit 2 ;;
esac
