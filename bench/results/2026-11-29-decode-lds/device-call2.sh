#!/bin/bash
# decode final call: parity of mmvq for candidates C P2 W2 W4 W5 + dequant + moe_decode; full TestBenchDecode per variant (A = old code, control).
set -uo pipefail
cd "$(dirname "$0")"
tar xJf bundle.tar.xz
O=${OUT:-/tmp/out}; W=/tmp/w; mkdir -p $O $W
VS="A C P2 W2 W4 W5"; PV="C P2 W2 W4 W5"
for v in $VS; do cp -n co/base/sm_90/* co/$v/sm_90/; done
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm,clocks.max.mem --format=csv > $W/gpu.txt 2>&1
export STRATA_REQUIRE_GPU=1
s=$SECONDS
for v in $PV; do i=0; for g in "f16|bf16|q80" "q20|q4k|q6k" "iq2xs|iq3xxs" "iq3s|iq1m"; do
  STRATA_CO_DIR=$PWD/co/$v timeout 110 ./parity.test -test.v -test.timeout 108s -test.run "TestParity/sm_90/mmvq/($g)/" > $W/par-mmvq-$v-$i.log 2>&1 & i=$((i+1)); done; done
for f in dequant moe_decode; do STRATA_CO_DIR=$PWD/co/C timeout 110 ./parity.test -test.v -test.timeout 108s -test.run "TestParity/sm_90/$f/" > $W/par-$f.log 2>&1 & done
wait; echo "parity done in $((SECONDS - s)) s"
export STRATA_BENCH=1
for v in $VS; do
  mkdir -p $W/$v
  STRATA_CO_DIR=$PWD/co/$v STRATA_BENCH_OUT=$W/$v timeout 30 ./parity.test -test.v -test.timeout 28s -test.run TestBenchDecode > $W/bench-$v.log 2>&1; echo "bench $v exit $?"
done
cat $W/gpu.txt
cnt() { echo "passed $(cat "$@" | grep -cE '^\s*--- PASS: TestParity/.*/.*/.*/'), failed $(cat "$@" | grep -cE '^\s*--- FAIL: TestParity/.*/.*/.*/')"; cat "$@" | grep -E "^\s*--- FAIL|panic|timed out" | head -4; }
for v in $PV; do echo "parity mmvq $v: $(cnt $W/par-mmvq-$v-*.log)"; done
for f in dequant moe_decode; do echo "parity $f: $(cnt $W/par-$f.log)"; done
for v in $VS; do echo "--- $v: $(cat co/$v/flags.txt)"; grep -E "floor|d2d copy 1|^(f16|bf16|q|iq).*4096x14336 +1 " $W/$v/bench.txt 2>/dev/null | sed 's/4096x14336 *//; s/ \+/ /g; s/ bytes (.* written)//'; grep -E "FAIL|panic" $W/bench-$v.log | head -3; done
tar czf $O/logs.tgz -C $W .
