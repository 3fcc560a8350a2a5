#!/usr/bin/env bash
# Call 2 of bench/results/2026-11-29-mmq-ncu (H200, device repository root, carry .dev-mmq).
# Trees (sm_90 PTX by clang-19, stripped to the mma variants of one tile per family):
#   O = main 39b2b1d, N = 9cb1b89 (wide loads + padded scale tiles), P = N + software-
#   pipelined Q8_0 staging, L = N + launch_bounds(128, 3) on mmq r128t64 / r64t128.
# trees/<T>/<tile>/sm_90/{mmq,moe_prefill}.ptx, tile r128t64 (moe r128t64), r64t64 (moe
# r64t64), r64t128 (moe r128t32); L's moe files are N's.
# 1. ptxas -v of every file to a cubin (in parallel), replacing the PTX under its name.
# 2. parity (STRATA_REQUIRE_GPU=1, fresh seeds) of N, P (every mma variant) and L (mmq).
# 3. TestBenchPrefill per tree x tile (the mma.sync ceiling in every process).
# 4. ncu (same sections as call 1) of mmq Q8_0 r128t64 in N and P, if time is left.
# DRY=1: stubs, no GPU.
set -uo pipefail
D=${D:-.dev-mmq} W=/tmp/mmq2 t0=$SECONDS B=${BUDGET:-140}
O=${OUT:-/tmp/mmq2-out}
L=$W/logs
rm -rf "$W" && mkdir -p "$L" "$O"
left() { echo $((B - (SECONDS - t0))); }
lim() { local l; l=$(left); l=$((l - ${2:-0})); [ "$l" -lt "$1" ] && echo $((l > 3 ? l : 3)) || echo "$1"; }
tar -C "$W" -xzf "$D/trees.tgz"
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
# 1. cubins
for f in "$W"/trees/*/*/sm_90/*.ptx; do
	n=$(echo "${f#"$W"/trees/}" | sed 's|/sm_90/|-|; s|/|-|g; s|\.ptx$||')
	(timeout "$(lim 60 80)" bash -c "$(declare -f ptxas_run); P=${P:-}; ptxas_run '$f' '${f%.ptx}.cubin'" >"$L/ptxas-$n.log" 2>&1
		echo "exit $?" >>"$L/ptxas-$n.log"
		[ -s "${f%.ptx}.cubin" ] && mv "${f%.ptx}.cubin" "$f") &
done
wait
echo "ptxas done at $((SECONDS - t0)) s" | tee "$L/summary.txt"
# 2. parity
s=$SECONDS pl=$(lim 40 75)
for T in N P L; do
	for t in r128t64 r64t64 r64t128; do
		[ -d "$W/trees/$T/$t" ] || continue
		fams="mmq moe_prefill"
		[ "$T" = L ] && fams=mmq
		for fam in $fams; do
			tt=$t
			[ "$fam" = moe_prefill ] && [ "$t" = r64t128 ] && tt=r128t32
			STRATA_REQUIRE_GPU=1 STRATA_CO_DIR=$W/trees/$T/$t timeout "$pl" "$W/parity.test" -test.v -test.timeout "$((pl - 2))s" \
				-test.run "TestParity/sm_90/$fam/[a-z0-9]+_mma_$tt\$" >"$L/parity-$T-$fam-$tt.log" 2>&1 &
		done
	done
done
wait
echo "parity done in $((SECONDS - s)) s (limit $pl) at $((SECONDS - t0)) s" | tee -a "$L/summary.txt"
# 3. benchmarks, one process at a time
for g in O/r128t64 N/r128t64 P/r128t64 L/r128t64 O/r64t64 N/r64t64 P/r64t64 O/r64t128 N/r64t128 P/r64t128 L/r64t128; do
	T=${g%/*} t=${g#*/}
	l=$(left)
	[ "$l" -lt 12 ] && { echo "bench $g: skipped ($l s left)" | tee -a "$L/summary.txt"; continue; }
	l=$(lim 20 0) s=$SECONDS
	mkdir -p "$L/bench-$T-$t"
	STRATA_BENCH=1 STRATA_CO_DIR=$W/trees/$T/$t STRATA_BENCH_OUT=$L/bench-$T-$t STRATA_BENCH_FILTER="_mma_r" timeout "$l" \
		"$W/parity.test" -test.run '^TestBenchPrefill$' -test.v -test.timeout 100s >"$L/bench-$T-$t.log" 2>&1
	echo "bench $g: exit $? in $((SECONDS - s)) s (limit $l)" | tee -a "$L/summary.txt"
done
# 4. ncu of Q8_0 r128t64, N and P
SECS="--section SpeedOfLight --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis --section MemoryWorkloadAnalysis_Tables --section WarpStateStats --section Occupancy --section SourceCounters --section InstructionStats --section LaunchStats --section SchedulerStats"
for T in P N; do
	l=$(left)
	[ "$l" -lt 14 ] && { echo "ncu $T: skipped ($l s left)" | tee -a "$L/summary.txt"; continue; }
	s=$SECONDS
	# shellcheck disable=SC2086
	STRATA_BENCH=1 STRATA_CO_DIR=$W/trees/$T/r128t64 STRATA_BENCH_FILTER='^q80_mma_r128t64$' timeout "$((l - 2))" "$NCU" --clock-control none $SECS \
		-k regex:strata_mmq_q80_mma_r128t64 --launch-skip 2 -c 1 --kill yes -f -o "$W/ncu-$T" \
		"$W/parity.test" -test.run '^TestBenchPrefill$' -test.v -test.timeout 100s >"$L/ncu-$T.log" 2>&1
	echo "ncu $T: exit $? in $((SECONDS - s)) s" | tee -a "$L/summary.txt"
	[ -f "$W/ncu-$T.ncu-rep" ] && {
		"$NCU" -i "$W/ncu-$T.ncu-rep" --page details --print-details all >"$L/ncu-$T-q80-r128t64.txt" 2>&1
		"$NCU" -i "$W/ncu-$T.ncu-rep" --page raw --csv >"$L/ncu-$T-q80-r128t64-raw.csv" 2>&1
		"$NCU" -i "$W/ncu-$T.ncu-rep" --page source --print-source sass --csv >"$L/ncu-$T-q80-r128t64-sass.csv" 2>&1
	}
done
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
grep -h "q80_mma\|iq3xxs_mma\|ceiling" "$L"/bench-*/bench_prefill.txt 2>/dev/null | head -40
grep -E "spill" "$L/ptxas-summary.txt" | grep -v " 0 bytes spill stores" | head -20
echo "total $((SECONDS - t0)) s"
