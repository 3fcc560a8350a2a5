#!/usr/bin/env bash
# Second call of session 5's final: the code after the final review, on the H200 — the
# runtime/cuda tests (TestLoadModuleWrongTarget's fix), the GPU-vs-CPU engine tests (the
# reviewed gpuVsCPU: auto must map wherever map loads) and TestMappingProbeGPU.
#   build: DEV=/work/main/.dev-check5 bash bench/results/2026-11-30-final-s5/final.sh build
#          cp bench/results/2026-11-30-final-s5/check.sh /work/main/.dev-check5/
#   run (carry .dev-check5): OUT=$OUT bash .dev-check5/check.sh
set -uo pipefail
: "${OUT:?set OUT}"
d=$(cd "$(dirname "$0")" && pwd) w=/tmp/check5 t0=$SECONDS
rm -rf $w && mkdir -p $w/logs
tar -C $w -xzf $d/co.tar.gz
for b in parity strata-run cuda; do
	python3 -c 'import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2], "wb"))' $d/$b.test.xz $w/$b.test && chmod +x $w/$b.test
done
(cd $w/co && find . -type f) | while read -r rel; do
	mkdir -p "$w/eco/$(dirname "$rel")"
	case $rel in
	*/mmq.ptx | */moe_prefill.ptx) python3 $d/strip_ptx.py "$w/co/$rel" "$w/eco/$rel" '_mma_r(64|128)t64$' >/dev/null ;;
	*) cp "$w/co/$rel" "$w/eco/$rel" ;;
	esac
done
export STRATA_REQUIRE_GPU=1
cat $d/commit >$w/logs/commit
STRATA_CO_DIR=$w/eco timeout 150 $w/cuda.test -test.v -test.timeout 140s >$w/logs/cuda-tests.log 2>&1 &
c=$!
STRATA_CO_DIR=$w/co timeout 60 $w/parity.test -test.v -test.timeout 50s -test.run '^TestMappingProbeGPU$' >$w/logs/probe-test.log 2>&1 &
p=$!
STRATA_CO_DIR=$w/eco timeout 170 $w/strata-run.test -test.run '^(TestGPUEngineMatchesCPU|TestGPUEngineNextMatchesCPU)$' -test.v -test.timeout 160s >$w/logs/engine-tests.log 2>&1
echo "engine tests: exit $? at $((SECONDS - t0)) s" | tee $OUT/summary.txt
wait $c; echo "runtime/cuda tests: exit $? at $((SECONDS - t0)) s" | tee -a $OUT/summary.txt
wait $p; echo "TestMappingProbeGPU: exit $? at $((SECONDS - t0)) s" | tee -a $OUT/summary.txt
{
	echo "commit $(head -1 $d/commit)"
	grep -hE "^\s*--- (PASS|FAIL|SKIP)|^(ok|PASS|FAIL)$|panic|NMSE .* > |auto" $w/logs/cuda-tests.log $w/logs/probe-test.log $w/logs/engine-tests.log | head -80
} | tee -a $OUT/summary.txt
tar -C $w -czf $OUT/check-logs.tgz logs
