#!/usr/bin/env bash
# Call 1 (H200): baseline mmvq bench, prefetch sweep variants, device ptxas/SASS, Nsight
# Compute profile of one n = 1 4096×14336 launch per quantized type.
#   build (worktree root): DEV=/work/main/.dev-mmvq bash call1.sh build
#   run (device, repo root of the device copy, carry .dev-mmvq): OUT=$OUT bash .dev-mmvq/call1.sh
#   STRATA_DRY=1: stub binary and stub tools (rehearsal on the build machine).
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
variants="base pf1 pf2"

build() {
	set -e
	local d=${DEV:-/work/main/.dev-mmvq} flags
	rm -rf "$d" && mkdir -p "$d"
	CGO_ENABLED=0 go test -c -trimpath -ldflags=-s -tags strata_nodemo -o "$d/parity.test" ./parity
	xz -9 -T2 "$d/parity.test"
	flags=$(awk -F'\t' '$1 == "target" && $2 == "sm_90" { print $6 }' kernels/out/objects.txt)
	for v in $variants; do
		local def=""
		case $v in pf1) def=-DSTRATA_MMVQ_PF=1 ;; pf2) def=-DSTRATA_MMVQ_PF=2 ;; esac
		mkdir -p "$d/co-$v/sm_90"
		# shellcheck disable=SC2086 # flags are a list
		clang-19 $flags $def -I kernels/out/sm_90 -I kernels/out/include kernels/out/sm_90/mmvq.cu -o "$d/co-$v/sm_90/mmvq.ptx"
	done
	tar -C "$d" -czf "$d/co.tar.gz" $(for v in $variants; do echo "co-$v"; done) && rm -r "$d"/co-*
	cp "$here/call1.sh" "$d/"
	{ git rev-parse HEAD; git status --porcelain; } >"$d/commit"
	du -sh "$d"
}

run() {
	: "${OUT:?set OUT}"
	local d=$here w=/tmp/mmvq t0=$SECONDS dry=${STRATA_DRY:-0}
	rm -rf "$w" && mkdir -p "$w/logs"
	local L=$w/logs pt=$w/parity.test
	tar -C "$w" -xzf "$d/co.tar.gz"
	if [ "$dry" = 1 ]; then
		printf '#!/bin/sh\necho "stub $0 $*"; env | grep STRATA_BENCH | sort\necho "d2d copy 1 GiB: 1 GB/s"\necho "q80      4096x14336                           1      21.85    2859.9    67.1%%     62476288"\n' >"$pt"
		chmod +x "$pt"
		mkdir -p "$w/stub"
		for x in ncu ptxas cuobjdump; do printf '#!/bin/sh\necho "stub %s $*"\n' "$x" >"$w/stub/$x"; chmod +x "$w/stub/$x"; done
		export PATH=$w/stub:$PATH
	else
		python3 -c 'import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2], "wb"))' "$d/parity.test.xz" "$pt"
		chmod +x "$pt"
		export PATH=$PATH:/usr/local/cuda/bin:$(ls -d /opt/nvidia/nsight-compute/*/ 2>/dev/null | tail -1)
		nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,temperature.gpu,power.draw --format=csv >"$L/gpu.txt" 2>&1
	fi
	cp "$d/commit" "$L/commit"
	export STRATA_REQUIRE_GPU=1
	# 1. device ptxas (CUDA 13) resource report and SASS of the shipped PTX and the variants.
	for v in $variants; do
		timeout 60 ptxas -arch=sm_90 -v "$w/co-$v/sm_90/mmvq.ptx" -o "$w/$v.cubin" >"$L/ptxas-$v.txt" 2>&1
	done
	timeout 30 cuobjdump -sass "$w/base.cubin" >"$L/sass-base.txt" 2>&1
	echo "ptxas done at $((SECONDS - t0)) s"
	# 2. benches: n = 1 dense, every type, variants interleaved, two rounds; one full baseline.
	b() { # b NAME VARIANT ENV...
		local name=$1 v=$2
		shift 2
		env STRATA_BENCH=1 STRATA_CO_DIR="$w/co-$v" "$@" timeout 60 "$pt" -test.v -test.timeout 55s -test.run '^TestBenchDecode$' >"$L/$name.log" 2>&1
		grep -E "^(floor|d2d|[a-z0-9]+ +[0-9]+x)" "$L/$name.log" >"$L/$name.txt"
	}
	for r in 1 2; do
		for v in $variants; do b "bench-$v-$r" "$v" STRATA_BENCH_NS=1 STRATA_BENCH_EXPERTS=0; done
	done
	b bench-base-full base
	echo "benches done at $((SECONDS - t0)) s"
	# 3. Nsight Compute: one launch per quantized type (n = 1, 4096×14336), full set.
	local types=q80,q20,q4k,q6k,iq2xs,iq3xxs,iq3s,iq1m
	timeout 90 ncu --clock-control none --set full --import-source no -k 'regex:^strata_mmvq_' -c 8 -f -o "$w/prof-base" \
		env STRATA_BENCH=1 STRATA_CO_DIR="$w/co-base" STRATA_BENCH_REPS=0,1 STRATA_BENCH_FLOORS=0 STRATA_BENCH_NS=1 STRATA_BENCH_EXPERTS=0 \
		STRATA_BENCH_TYPES=$types "$pt" -test.run '^TestBenchDecode$' -test.timeout 85s >"$L/ncu-run.log" 2>&1
	echo "ncu exit $? at $((SECONDS - t0)) s" | tee -a "$L/ncu-run.log"
	if [ -f "$w/prof-base.ncu-rep" ]; then
		timeout 30 ncu -i "$w/prof-base.ncu-rep" --page details --print-details all >"$L/ncu-details.txt" 2>&1
		timeout 30 ncu -i "$w/prof-base.ncu-rep" --page source --csv --print-source sass >"$L/ncu-source.csv" 2>&1
		gzip -f "$L/ncu-source.csv"
		cp "$w/prof-base.ncu-rep" "$OUT/" 2>/dev/null
	fi
	echo "ncu pages done at $((SECONDS - t0)) s"
	tar -C "$w" -czf "$OUT/logs.tgz" logs
	# Summary: n = 1 table of each variant and round, side by side.
	{
		grep -h "ptxas info.*Used" "$L/ptxas-base.txt" | head -12
		grep -h "^d2d\|^floor" "$L/bench-base-1.txt"
		for f in "$L"/bench-*-[12].txt; do echo "--- $(basename "$f")"; grep -E " 4096x14336 " "$f" | awk '{print $1, $4, $6}' | paste -sd' '; done
		grep -E "Duration|DRAM Throughput|Registers Per|Achieved Occupancy|Issue Slots Busy|No Eligible" "$L/ncu-details.txt" 2>/dev/null | head -80
		echo "total $((SECONDS - t0)) s"
	} | tee "$OUT/summary.txt"
}

case "${1:-run}" in
build) build ;;
run) run ;;
*) echo "usage: $0 build | run" >&2; exit 2 ;;
esac
