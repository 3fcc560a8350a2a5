#!/usr/bin/env bash
# Second final call (after all.sh): all.sh's engine bundle had the mmq PTX stripped to r64t64,
# so the batched prompts (mmq now at r128t64) could not load, and the attention/delta-net
# parity group ran out of time among 15 parallel processes. This call: that parity group
# alone (background), the GPU-vs-CPU engine tests, and batched prompt tok/s for 30B Q2_0.
# Usage (device, carry .dev-final3 and .dev-engine3): OUT=... bash .dev-final3/call2.sh
set -uo pipefail
: "${OUT:?set OUT}"
w=/tmp/c2 t0=$SECONDS
rm -rf $w && mkdir -p $w/logs $w/m $w/pco
tar -C $w -xzf .dev-engine3/co.tar.gz
tar -C $w/pco -xzf .dev-final3/co.tar.gz
unxz() { python3 -c 'import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2], "wb"))' "$1" "$2" && chmod +x "$2"; }
unxz .dev-engine3/strata-run.test.xz $w/sr.test
unxz .dev-final3/parity.test.xz $w/parity.test
export STRATA_REQUIRE_GPU=1
STRATA_CO_DIR=$w/pco/co timeout 150 $w/parity.test -test.v -test.timeout 145s -test.run 'TestParity/sm_90/(attention_decode|attention_prefill|gated_delta_net)/' >$w/logs/parity-attn.log 2>&1 &
pp=$!
export STRATA_CO_DIR=$w/co
STRATA_RUN_ARGS="synth --arch qwen3moe --preset qwen3-30b-a3b --type q2_0 -o $w/m/q30.gguf" timeout 60 $w/sr.test -test.run '^TestCLI$' -test.v -test.timeout 100s >$w/logs/synth.log 2>&1 &
sp=$!
timeout 80 $w/sr.test -test.run '^(TestGPUEngineMatchesCPU|TestGPUEngineNextMatchesCPU)$' -test.v -test.timeout 300s >$w/logs/tiny.log 2>&1
echo "- tiny: exit $? at $((SECONDS - t0)) s" >$w/logs/summary.md
wait $sp; echo "- synth: exit $? at $((SECONDS - t0)) s" >>$w/logs/summary.md
wait $pp; echo "- parity attention/gdn: exit $? at $((SECONDS - t0)) s" >>$w/logs/summary.md
timeout 60 env STRATA_GPU_BENCH=1 STRATA_BENCH_MODEL=$w/m/q30.gguf STRATA_BENCH_OUT=$w/logs STRATA_BENCH_LABEL=q30-q2_0-prompt STRATA_BENCH_POLICIES=decayed \
	STRATA_BENCH_CTX=4608 STRATA_BENCH_BUDGETS_MIB=0 STRATA_BENCH_TOKENS=8 STRATA_BENCH_CHUNK=512 STRATA_BENCH_PATHS=batched STRATA_BENCH_PREFILL=512,4096 \
	$w/sr.test -test.run '^TestGPUBench$' -test.v -test.timeout 300s >$w/logs/bench-prompt.log 2>&1
echo "- prompt bench: exit $? at $((SECONDS - t0)) s" >>$w/logs/summary.md
rm -f $w/m/*.gguf
{
	echo "## parity attention/gdn: passed $(grep -cE '^\s*--- PASS: TestParity/sm_90/[a-z_]+/[^/]+/' $w/logs/parity-attn.log), failed $(grep -cE '^\s*--- FAIL: TestParity/sm_90/[a-z_]+/[^/]+/' $w/logs/parity-attn.log)"
	grep -E "^(ok|PASS|FAIL)|panic|timed out" $w/logs/parity-attn.log | head
	echo "## tiny"
	grep -E "^\s*--- |^(ok|FAIL|PASS)|NMSE|near tie|ForwardArgmax|panic|Error|error" $w/logs/tiny.log | head -60
	echo "## prompt"
	grep -E "^ROW |\| unlimited|ceilings|load failed|FAIL|panic" $w/logs/bench-prompt.log | head
} >>$w/logs/summary.md
cp $w/logs/summary.md $OUT/
tar -C $w -czf $OUT/call2-logs.tgz logs
cat $OUT/summary.md
