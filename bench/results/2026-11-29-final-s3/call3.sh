#!/usr/bin/env bash
# Third final call: mmq's tile in the engine's batched path, A/B on one engine (30B Q2_0,
# every expert resident): STRATA_BENCH_MMQ_AB=1 runs each prompt at the engine's first mmq
# tile (r128t64 on NVIDIA), at r64t64, at r64t64 again, then at the first tile again.
# Usage (device, carry .dev-engine3): OUT=... bash .dev-engine3/call3.sh
set -uo pipefail
: "${OUT:?set OUT}"
w=/tmp/c3 t0=$SECONDS
rm -rf $w && mkdir -p $w/logs $w/m
tar -C $w -xzf .dev-engine3/co.tar.gz
python3 -c 'import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2], "wb"))' .dev-engine3/strata-run.test.xz $w/sr.test && chmod +x $w/sr.test
export STRATA_REQUIRE_GPU=1 STRATA_CO_DIR=$w/co
STRATA_RUN_ARGS="synth --arch qwen3moe --preset qwen3-30b-a3b --type q2_0 -o $w/m/q30.gguf" timeout 60 $w/sr.test -test.run '^TestCLI$' -test.v -test.timeout 100s >$w/logs/synth.log 2>&1
echo "- synth: exit $? at $((SECONDS - t0)) s" >$w/logs/summary.md
timeout 90 env STRATA_GPU_BENCH=1 STRATA_BENCH_MODEL=$w/m/q30.gguf STRATA_BENCH_OUT=$w/logs STRATA_BENCH_LABEL=q30-q2_0-mmq-ab STRATA_BENCH_POLICIES=decayed \
	STRATA_BENCH_CTX=4608 STRATA_BENCH_BUDGETS_MIB=0 STRATA_BENCH_TOKENS=8 STRATA_BENCH_CHUNK=512 STRATA_BENCH_PATHS=batched STRATA_BENCH_PREFILL=512,4096,512,4096 \
	STRATA_BENCH_MMQ_AB=1 $w/sr.test -test.run '^TestGPUBench$' -test.v -test.timeout 300s >$w/logs/bench-mmq-ab.log 2>&1
echo "- bench: exit $? at $((SECONDS - t0)) s" >>$w/logs/summary.md
rm -f $w/m/*.gguf
grep -E "^ROW |ceilings|load failed|FAIL|panic" $w/logs/bench-mmq-ab.log >>$w/logs/summary.md
cp $w/logs/summary.md $OUT/
tar -C $w -czf $OUT/call3-logs.tgz logs
cat $OUT/summary.md
