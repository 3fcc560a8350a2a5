#!/bin/bash
# Lead's final H200 call (session 2): mmvq/dequant/moe_decode parity (merged main: spill fix,
# K = 33024/40960 segmented cases) in the background, then the batched-prefill final.sh run
# (GPU-vs-CPU tests, rmsnorm_row parity, synth, prompt tok/s). Usage: OUT=... bash .dev-final/all.sh
set -uo pipefail
d=$(cd "$(dirname "$0")" && pwd); W=/tmp/mv; mkdir -p $W/co
tar -C $W -xzf $d/co.tar.gz
python3 -c 'import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2], "wb"))' $d/parity.test.xz $W/parity.test && chmod +x $W/parity.test
s=$SECONDS
(
  export STRATA_REQUIRE_GPU=1 STRATA_CO_DIR=$W/co
  i=0
  for g in f16 bf16 "q80|q20|q4k" "q6k|iq2xs|iq3xxs" "iq3s|iq1m"; do
    timeout 105 $W/parity.test -test.v -test.timeout 100s -test.run "TestParity/sm_90/mmvq/($g)/" > $W/par-mmvq-$i.log 2>&1 &
    i=$((i+1))
  done
  for f in dequant moe_decode; do
    timeout 105 $W/parity.test -test.v -test.timeout 100s -test.run "TestParity/sm_90/$f/" > $W/par-$f.log 2>&1 &
  done
  P=$(command -v ptxas || echo /usr/local/cuda/bin/ptxas)
  { "$P" --version 2>&1 | tail -1; timeout 30 "$P" -arch=sm_90 -v $W/co/sm_90/mmvq.ptx -o /dev/null 2>&1 | grep -E "entry function|spill|Used" | paste - - - |
    sed -E "s/ptxas info *: //g; s/Compiling entry function //; s/ for 'sm_90'//"; } > $W/ptxas-mmvq.log 2>&1 &
  wait
  echo "mmvq/dequant/moe_decode parity + ptxas done at $((SECONDS - s)) s" > $W/time.log
) &
bg=$!
STRATA_FINAL_BUDGET=${BUDGET:-140} bash $d/final.sh run
wait $bg
cnt() { echo "passed $(cat "$@" | grep -cE '^\s*--- PASS: TestParity/.*/.*/.*/'), failed $(cat "$@" | grep -cE '^\s*--- FAIL: TestParity/.*/.*/.*/'), skipped $(cat "$@" | grep -cE '^\s*--- SKIP: TestParity/.*/.*/.*/')"; cat "$@" | grep -E "^\s*--- FAIL|panic|timed out" | head -8; }
{
  cat $W/time.log
  echo "parity mmvq: $(cnt $W/par-mmvq-*.log)"
  for f in dequant moe_decode; do echo "parity $f: $(cnt $W/par-$f.log)"; done
  echo "--- k=33024 / k=40960 cases"
  grep -hE "^sm_90/mmvq/.*k=(33024|40960)" $W/par-mmvq-*.log
  echo "--- ptxas on the device"; cat $W/ptxas-mmvq.log
} > $OUT/mmvq-summary.log 2>&1
tar czf $OUT/mmvq-logs.tgz -C $W --exclude=co --exclude=parity.test .
cat $OUT/mmvq-summary.log
