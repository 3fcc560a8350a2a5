#!/usr/bin/env bash
# Post-review check of the final main: runtime/cuda graph and launcher tests, GPU-vs-CPU engine tests.
set -uo pipefail
: "${OUT:?set OUT}"
d=.dev-check w=/tmp/check
rm -rf $w && mkdir -p $w/logs
tar -C $w -xzf $d/co.tar.gz
for b in strata-run runtime-cuda; do python3 -c 'import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2], "wb"))' $d/$b.test.xz $w/$b.test && chmod +x $w/$b.test; done
export STRATA_CO_DIR=$w/co STRATA_REQUIRE_GPU=1
cat $d/commit >$w/logs/commit
timeout 60 $w/runtime-cuda.test -test.run '^(TestGraphReplay|TestLauncherBound|TestLaunch.*|TestFault.*)$' -test.v -test.timeout 55s >$w/logs/runtime-cuda.log 2>&1; echo "runtime/cuda: exit $?" | tee $w/logs/summary.txt
timeout 150 $w/strata-run.test -test.run '^(TestGPUEngineMatchesCPU|TestGPUEngineNextMatchesCPU)$' -test.v -test.timeout 145s >$w/logs/tiny.log 2>&1; echo "engine tests: exit $?" | tee -a $w/logs/summary.txt
grep -E "^(--- |ok|PASS|FAIL)" $w/logs/runtime-cuda.log | head -20 | tee -a $w/logs/summary.txt
grep -E "^--- |^(ok|PASS|FAIL)$|NMSE .* > |panic" $w/logs/tiny.log | head -20 | tee -a $w/logs/summary.txt
grep -cE "^\s+--- PASS" $w/logs/tiny.log | sed 's/^/subtests passed: /' | tee -a $w/logs/summary.txt
grep -cE "^\s+--- FAIL" $w/logs/tiny.log | sed 's/^/subtests failed: /' | tee -a $w/logs/summary.txt
tar -C $w -czf $OUT/check-logs.tgz logs
