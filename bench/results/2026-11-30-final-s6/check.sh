#!/usr/bin/env bash
# Second call of session 6's final: main after final-s6 call 1's two fixes (mmvq's L2
# prefetch only when the engine asks; moe_decode without its prefetch) — mmvq and
# moe_decode parity, the GPU-vs-CPU engine tests, the decode benchmarks (mmvq, moe_decode)
# and the decode token with and without programmatic launches (now with and without the
# prefetch too) on one engine per model.
#   build: DEV=/work/main/.dev-check6 bash bench/results/2026-11-30-final-s6/final.sh build
#          cp bench/results/2026-11-30-final-s6/check.sh /work/main/.dev-check6/
#          (then rm .dev-check6/cuda.test.xz .dev-check6/moe-mods.tar.gz: not used)
#   run (carry .dev-check6): OUT=$OUT bash .dev-check6/check.sh      (STRATA_CHECK_DRY=1: stubs)
#   STRATA_CHECK_PARITY: parity groups (default mmvq and moe_decode; empty: none);
#   STRATA_CHECK_MODES: TestDecodeProfile modes (default base,nopdl,base,nopdl).
set -uo pipefail
: "${OUT:?set OUT}"
d=$(cd "$(dirname "$0")" && pwd) w=/tmp/check6 t0=$SECONDS
rm -rf $w && mkdir -p $w/logs $w/models
L=$w/logs
if [ "${STRATA_CHECK_DRY:-0}" = 1 ]; then
	printf '#!/bin/sh\necho "stub $0 $*"; env | grep -E "^STRATA_" | sort\necho PASS\n' >$w/stub && chmod +x $w/stub
	for b in parity sr gpu; do cp $w/stub $w/$b.test; done
	mkdir -p $w/co $w/eco
else
	python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' $d/co.tar.xz $w
	for b in parity:parity strata-run:sr gpu:gpu; do
		python3 -c 'import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2], "wb"))' "$d/${b%%:*}.test.xz" "$w/${b#*:}.test" && chmod +x "$w/${b#*:}.test"
	done
	(cd $w/co && find . -type f) | while read -r rel; do
		mkdir -p "$w/eco/$(dirname "$rel")"
		case $rel in
		*/mmq.ptx | */moe_prefill.ptx) python3 $d/strip_ptx.py "$w/co/$rel" "$w/eco/$rel" '_mma_r(64|128)t64$' >/dev/null ;;
		*) cp "$w/co/$rel" "$w/eco/$rel" ;;
		esac
	done
	# assemble what the benchmarks and the engine load (no driver JIT inside a timing)
	P=$(command -v ptxas || echo /usr/local/cuda/bin/ptxas)
	find $w/eco -name '*.ptx' | xargs -P 16 -I{} sh -c '"$1" -arch=sm_90 "$2" -o "$2.cubin" >/dev/null 2>&1 && mv "$2.cubin" "$2"' _ "$P" {}
fi
export STRATA_REQUIRE_GPU=1
cat $d/commit >$L/commit
echo "# check.sh ($(date -u +%FT%TZ)), commit $(head -1 $d/commit)" >$OUT/summary.md
say() { echo "- $* at $((SECONDS - t0)) s" | tee -a $OUT/summary.md; }
say setup
(
	STRATA_CO_DIR=$w/eco STRATA_RUN_ARGS="synth --arch qwen3moe --preset qwen3-30b-a3b --type q2_0 -o $w/models/q30-q2_0.gguf" timeout 100 $w/sr.test -test.run '^TestCLI$' -test.v >$L/synth-30b.log 2>&1
	STRATA_CO_DIR=$w/eco STRATA_RUN_ARGS="synth --arch qwen3next --preset qwen3-next-80b-a3b --type iq2_xs -o $w/models/q80-iq2_xs.gguf" timeout 100 $w/sr.test -test.run '^TestCLI$' -test.v >$L/synth-80b.log 2>&1
) &
syn=$!
pids=()
for g in ${STRATA_CHECK_PARITY-"mmvq/(f16|bf16|q80|q20|q4k)" "mmvq/(q6k|iq2xs|iq3xxs|iq3s|iq1m)" "moe_decode"}; do
	STRATA_CO_DIR=$w/co timeout 100 $w/parity.test -test.v -test.timeout 95s -test.run "TestParity/sm_90/$g/" >"$L/parity-${#pids[@]}.log" 2>&1 &
	pids+=($!)
done
STRATA_CO_DIR=$w/eco timeout 110 $w/sr.test -test.run '^(TestGPUEngineMatchesCPU|TestGPUEngineNextMatchesCPU)$' -test.v -test.timeout 105s >$L/engine-tests.log 2>&1
say "engine tests exit $?"
wait "${pids[@]}"
say "parity done"
STRATA_CO_DIR=$w/eco STRATA_BENCH=1 STRATA_BENCH_OUT=$L timeout 60 $w/parity.test -test.v -test.timeout 55s -test.run '^TestBenchDecode$' >$L/bench-decode.log 2>&1
say "bench-decode exit $?"
STRATA_CO_DIR=$w/eco STRATA_BENCH=1 STRATA_BENCH_OUT=$L timeout 40 $w/parity.test -test.v -test.timeout 35s -test.run '^TestBenchMoeDecode$' >$L/bench-moe.log 2>&1
say "bench-moe exit $?"
wait $syn
say synth
for m in q30-q2_0 q80-iq2_xs; do
	STRATA_CO_DIR=$w/eco STRATA_DECODE_PROFILE=1 STRATA_BENCH_MODEL=$w/models/$m.gguf STRATA_DECODE_MODES=${STRATA_CHECK_MODES:-base,nopdl,base,nopdl} \
		STRATA_BENCH_TOKENS=128 STRATA_BENCH_CTX=1024 timeout 60 $w/gpu.test -test.run '^TestDecodeProfile$' -test.v -test.timeout 55s >$L/time-$m.log 2>&1
	say "time-$m exit $?"
done
rm -f $w/models/*.gguf
{
	echo
	echo "## parity"
	for f in $L/parity-*.log; do echo "- $f: passed $(grep -cE '^\s*--- PASS: TestParity/.*/.*/.*/' $f), failed $(grep -cE '^\s*--- FAIL: TestParity/.*/.*/.*/' $f) $(grep -E '^(ok|PASS|FAIL)$' $f | tr '\n' ' ')"; done
	grep -hE "^\s*--- FAIL|panic" $L/parity-*.log | head
	echo "## engine tests"
	grep -E "^\s*--- (PASS|FAIL): TestGPU|^(ok|FAIL|PASS)$|panic" $L/engine-tests.log | head
	echo "## decode benchmarks"
	cat $L/bench.txt $L/bench-moe.txt 2>/dev/null
	echo "## decode token"
	grep -hE "^model|^ROW|differ|FAIL|panic" $L/time-*.log
} >>$OUT/summary.md
cp $L/bench.txt $L/bench-moe.txt $OUT/ 2>/dev/null
tar -C $w -czf $OUT/check-logs.tgz logs
grep -vE "^(iq|q[0-9]|f16|bf16)" $OUT/summary.md | head -60
