#!/usr/bin/env bash
# Second final call: the prefill benchmarks per tile of final.sh, with every tree's PTX
# assembled to cubins by ptxas first (final.sh's call gave the driver's JIT only 15 s).
set -uo pipefail
: "${OUT:?set OUT}"
d=.dev-final4 w=/tmp/final4p t0=$SECONDS
rm -rf $w && mkdir -p $w/logs
tar -C $w -xzf $d/trees.tgz
python3 -c 'import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2], "wb"))' $d/parity.test.xz $w/parity.test && chmod +x $w/parity.test
P=$(command -v ptxas || echo /usr/local/cuda/bin/ptxas)
for f in $w/trees/*/*/sm_90/*.ptx; do
	( "$P" -arch=sm_90 "$f" -o "${f%.ptx}.cubin" >"$f.ptxas.log" 2>&1 && mv "${f%.ptx}.cubin" "$f" ) &
done
wait
echo "ptxas done at $((SECONDS - t0)) s" | tee $w/logs/summary.txt
for t in r128t64 r64t64 r64t128; do
	for T in N O; do
		tt=$t
		[ $t = r64t128 ] && tt="(r64t128|r128t32)"
		mkdir -p $w/logs/prefill-$T-$t
		s=$SECONDS
		STRATA_BENCH=1 STRATA_CO_DIR=$w/trees/$T/$t STRATA_BENCH_OUT=$w/logs/prefill-$T-$t STRATA_BENCH_FILTER="_mma_$tt\$" timeout 30 \
			$w/parity.test -test.run '^TestBenchPrefill$' -test.v -test.timeout 100s >$w/logs/prefill-$T-$t.log 2>&1
		echo "prefill $T $t: exit $? in $((SECONDS - s)) s" | tee -a $w/logs/summary.txt
	done
done
tar -C $w -czf $OUT/prefill-logs.tgz logs
for f in $w/logs/prefill-*/bench_prefill.txt; do echo "--- ${f#$w/logs/}"; grep -E "_mma_" "$f"; done | awk 'NF==5 || /^---/' | head -120
echo "total $((SECONDS - t0)) s"
