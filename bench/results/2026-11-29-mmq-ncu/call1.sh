#!/usr/bin/env bash
# Call 1 of bench/results/2026-11-29-mmq-ncu (H200, device repository root, carry .dev-mmq):
# ptxas cubins of the sm_90 mma variants (one file per family x tile, in parallel), SASS of
# the profiled ones, Nsight Compute on mmq Q8_0 / IQ2_XS r64t64 and r128t64 and moe_prefill
# IQ2_XS r64t64 (gate/up and down launches), 512 tokens, then the baseline TestBenchPrefill
# rows of the r64t64 and r128t64 tiles. DRY=1: stubs, no GPU.
set -uo pipefail
D=${D:-.dev-mmq} W=/tmp/mmq1 t0=$SECONDS B=${BUDGET:-140}
O=${OUT:-/tmp/mmq1-out}
L=$W/logs
rm -rf "$W" && mkdir -p "$L" "$O"
left() { echo $((B - (SECONDS - t0))); }
lim() { local l; l=$(left); l=$((l - ${2:-0})); [ "$l" -lt "$1" ] && echo $((l > 3 ? l : 3)) || echo "$1"; }
tar -C "$W" -xzf "$D/g.tgz"
if [ "${DRY:-0}" = 1 ]; then
	printf '#!/bin/sh\necho stub "$@"\n' >"$W/parity.test"; chmod +x "$W/parity.test"
	printf '#!/bin/sh\necho "$@"; p=; for a; do [ "$p" = -o ] && touch "$a.ncu-rep"; p=$a; done; echo "Section: GPU Speed Of Light"\n' >"$W/ncu"; chmod +x "$W/ncu"
	NCU=$W/ncu CUOBJ=echo
	ptxas_run() { cp "$1" "$2"; echo "ptxas stub"; }
else
	python3 -c 'import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2], "wb"))' "$D/parity.test.xz" "$W/parity.test"
	chmod +x "$W/parity.test"
	NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
	P=$(command -v ptxas || echo /usr/local/cuda/bin/ptxas)
	CUOBJ=$(command -v cuobjdump || echo /usr/local/cuda/bin/cuobjdump)
	ptxas_run() { "$P" -arch=sm_90 -v "$1" -o "$2"; }
fi
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm,clocks.max.mem --format=csv >"$L/gpu.txt" 2>&1
{ echo "ncu=$NCU"; "$NCU" --version; } >"$L/tools.txt" 2>&1
# 1. cubins: g/<m|p>-<tile>/sm_90/<family>.ptx -> cubin under the same name.
for f in "$W"/g/*/sm_90/*.ptx; do
	g=$(basename "$(dirname "$(dirname "$f")")")
	(timeout "$(lim 75 60)" bash -c "$(declare -f ptxas_run); P=${P:-}; ptxas_run '$f' '${f%.ptx}.cubin'" >"$L/ptxas-$g.log" 2>&1
		echo "exit $?" >>"$L/ptxas-$g.log"
		[ -s "${f%.ptx}.cubin" ] && mv "${f%.ptx}.cubin" "$f") &
done
wait
echo "ptxas done at $((SECONDS - t0)) s" | tee "$L/summary.txt"
# combined code-object dirs (both families) per tile
for t in r64t64 r128t64; do
	mkdir -p "$W/c-$t/sm_90"
	cp "$W/g/m-$t/sm_90/mmq.ptx" "$W/c-$t/sm_90/mmq.ptx"
	cp "$W/g/p-$t/sm_90/moe_prefill.ptx" "$W/c-$t/sm_90/moe_prefill.ptx"
done
for g in m-r128t64 m-r64t64 p-r64t64; do
	f=$(ls "$W/g/$g/sm_90/"*.ptx)
	"$CUOBJ" --dump-sass "$f" >"$L/sass-$g.txt" 2>&1 &
done
wait
# 2. ncu: name, code-object dir, bench filter, kernel regex, launch-skip, count
SECS="--section SpeedOfLight --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis --section MemoryWorkloadAnalysis_Tables --section WarpStateStats --section Occupancy --section SourceCounters --section InstructionStats --section LaunchStats --section SchedulerStats"
prof() {
	local name=$1 dir=$2 filt=$3 kre=$4 skip=$5 cnt=$6 s=$SECONDS l
	l=$(lim 40 25)
	# shellcheck disable=SC2086
	STRATA_BENCH=1 STRATA_CO_DIR=$W/$dir STRATA_BENCH_FILTER=$filt timeout "$l" "$NCU" --clock-control none $SECS \
		-k "regex:$kre" --launch-skip "$skip" -c "$cnt" --kill yes -f -o "$W/ncu-$name" \
		"$W/parity.test" -test.run '^TestBenchPrefill$' -test.v -test.timeout 120s >"$L/ncu-$name.log" 2>&1
	echo "ncu $name: exit $? in $((SECONDS - s)) s (limit $l)" | tee -a "$L/summary.txt"
	if [ -f "$W/ncu-$name.ncu-rep" ]; then
		"$NCU" -i "$W/ncu-$name.ncu-rep" --page details --print-details all >"$L/ncu-$name.txt" 2>&1
		"$NCU" -i "$W/ncu-$name.ncu-rep" --page source --print-source sass --csv >"$L/ncu-$name-sass.csv" 2>&1
		"$NCU" -i "$W/ncu-$name.ncu-rep" --page raw --csv >"$L/ncu-$name-raw.csv" 2>&1
	fi
}
prof q80-r128t64 c-r128t64 '^q80_mma_r128t64$' 'strata_mmq_q80_mma_r128t64' 2 1
if ! grep -q "Disconnected\|SpeedOfLight\|Section: GPU Speed" "$L/ncu-q80-r128t64.txt" 2>/dev/null; then
	echo "Go binary not profiled: python fallback" | tee -a "$L/summary.txt"
	s=$SECONDS
	timeout "$(lim 40 25)" "$NCU" --clock-control none $SECS -k regex:strata_mmq_q80_mma_r128t64 --launch-skip 1 -c 1 -f -o "$W/ncu-q80-r128t64py" \
		python3 "$D/mmq_launch.py" "$W/g/m-r128t64/sm_90/mmq.ptx" strata_mmq_q80_mma_r128t64 34 >"$L/ncu-q80-r128t64py.log" 2>&1
	echo "ncu py: exit $? in $((SECONDS - s)) s" | tee -a "$L/summary.txt"
	[ -f "$W/ncu-q80-r128t64py.ncu-rep" ] && {
		"$NCU" -i "$W/ncu-q80-r128t64py.ncu-rep" --page details --print-details all >"$L/ncu-q80-r128t64py.txt" 2>&1
		"$NCU" -i "$W/ncu-q80-r128t64py.ncu-rep" --page source --print-source sass --csv >"$L/ncu-q80-r128t64py-sass.csv" 2>&1
	}
else
	prof iq2xs-r128t64 c-r128t64 '^iq2xs_mma_r128t64$' 'strata_mmq_iq2xs_mma_r128t64' 2 1
	prof moe-iq2xs-r64t64 c-r64t64 '^iq2xs_mma_r64t64$' 'strata_moe_prefill_iq2xs_mma_r64t64' 1 2
	prof q80-r64t64 c-r64t64 '^q80_mma_r64t64$' 'strata_mmq_q80_mma_r64t64' 2 1
fi
# 3. baseline rows (r128t64 then r64t64 tile, both families)
for t in r128t64 r64t64; do
	s=$SECONDS l=$(lim 30 0)
	mkdir -p "$L/bench-$t"
	STRATA_BENCH=1 STRATA_CO_DIR=$W/c-$t STRATA_BENCH_OUT=$L/bench-$t STRATA_BENCH_FILTER="_mma_$t\$" timeout "$l" \
		"$W/parity.test" -test.run '^TestBenchPrefill$' -test.v -test.timeout 100s >"$L/bench-$t.log" 2>&1
	echo "bench $t: exit $? in $((SECONDS - s)) s (limit $l)" | tee -a "$L/summary.txt"
done
grep -h "Used\|spill" "$L"/ptxas-*.log | head -0
for f in "$L"/ptxas-*.log; do echo "== $f"; grep -E "Compiling|Used|spill|exit" "$f" | paste - - - | sed -E "s/ptxas info *: //g"; done >"$L/ptxas-summary.txt"
tar -C "$W" -czf "$O/logs.tgz" logs
cp "$L/summary.txt" "$L/ptxas-summary.txt" "$O/" 2>/dev/null
cat "$L/summary.txt"; cat "$L/bench-r128t64/bench_prefill.txt" "$L/bench-r64t64/bench_prefill.txt" 2>/dev/null | grep -v "^$"
grep -E "Duration|Throughput|Registers|Achieved Occ|Theoretical Occ|Warp Cycles Per Issued|Issue Slots Busy|Bank" "$L"/ncu-*.txt 2>/dev/null | head -60
echo "total $((SECONDS - t0)) s"
