#!/bin/bash
# mmvq final check (branch mmvq): parity of mmvq (incl. the new K = 40960 cases that reach the
# segmented activation staging), dequant and moe_decode on sm_90, fresh seeds, each process
# under `timeout 120`, all in parallel; the device's ptxas -v of the new mmvq.ptx alongside;
# then, only if time is left (elapsed < 70 s), the F16/BF16 n = 1,2,4,8 benchmark at
# 4096x14336 for the new and the previous mmvq.ptx (the spill fix touches only F16/BF16 at
# >= 3 columns). Usage: OUT=<dir> bash .dev-mmvq/final.sh   (from the repository root)
set -uo pipefail
cd "$(dirname "$0")"
O=${OUT:-/tmp/out}; W=/tmp/mmvq-w; mkdir -p "$O" "$W"
export STRATA_REQUIRE_GPU=1
T=./parity.test
s=$SECONDS
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm --format=csv > $W/gpu.txt 2>&1
i=0
for g in f16 bf16 "q80|q20|q4k" "q6k|iq2xs|iq3xxs" "iq3s|iq1m"; do
  STRATA_CO_DIR=$PWD/co timeout 120 $T -test.v -test.timeout 115s -test.run "TestParity/sm_90/mmvq/($g)/" > $W/mmvq-par-mmvq-$i.log 2>&1 &
  i=$((i+1))
done
for f in dequant moe_decode; do
  STRATA_CO_DIR=$PWD/co timeout 120 $T -test.v -test.timeout 115s -test.run "TestParity/sm_90/$f/" > $W/mmvq-par-$f.log 2>&1 &
done
P=$(command -v ptxas || echo /usr/local/cuda/bin/ptxas)
{ "$P" --version 2>&1 | tail -2; timeout 30 "$P" -arch=sm_90 -v co/sm_90/mmvq.ptx -o /dev/null 2>&1 | grep -E "entry function|spill|Used" | paste - - - |
  sed -E "s/ptxas info *: //g; s/Compiling entry function //; s/ for 'sm_90'//"; } > $W/mmvq-ptxas.log 2>&1 &
wait
echo "parity + ptxas done in $((SECONDS - s)) s" | tee $W/mmvq-time.log
if [ $((SECONDS - s)) -lt 70 ]; then
  for v in co co-old; do
    mkdir -p $W/bench-$v
    STRATA_BENCH=1 STRATA_BENCH_TYPES=f16,bf16 STRATA_BENCH_EXPERTS=0 STRATA_BENCH_OUT=$W/bench-$v STRATA_CO_DIR=$PWD/$v \
      timeout 22 $T -test.v -test.timeout 20s -test.run TestBenchDecode > $W/mmvq-bench-$v.log 2>&1
    echo "bench $v exit $? at $((SECONDS - s)) s" | tee -a $W/mmvq-time.log
  done
else
  echo "bench skipped: parity took $((SECONDS - s)) s" | tee -a $W/mmvq-time.log
fi
cnt() { echo "passed $(cat "$@" | grep -cE '^\s*--- PASS: TestParity/.*/.*/.*/'), failed $(cat "$@" | grep -cE '^\s*--- FAIL: TestParity/.*/.*/.*/'), skipped $(cat "$@" | grep -cE '^\s*--- SKIP: TestParity/.*/.*/.*/')"; cat "$@" | grep -E "^\s*--- FAIL|panic|timed out|Error|error" | head -8; }
{
  cat $W/gpu.txt
  echo "parity mmvq: $(cnt $W/mmvq-par-mmvq-*.log)"
  for f in dequant moe_decode; do echo "parity $f: $(cnt $W/mmvq-par-$f.log)"; done
  echo "--- k=40960 cases (y-long bound: quantized 5.2e-6, F16/BF16 4.6e-6)"
  grep -h "^sm_90/mmvq/.*k=40960" $W/mmvq-par-mmvq-*.log
  echo "--- worst y / y-long per mmvq variant"
  grep -h "^sm_90/mmvq/" $W/mmvq-par-mmvq-*.log | awk '{ split($1, a, "/"); for (i = 4; i <= NF; i++) if ($i ~ /^y(-long)?:/) {
    split($i, b, "[:/]"); k = a[3] " " b[1]; if (!(k in m) || b[3] + 0 > m[k]) m[k] = b[3] + 0 } }
    END { for (k in m) printf "%s %.3g\n", k, m[k] }' | sort
  echo "--- ptxas on the device"; cat $W/mmvq-ptxas.log
  cat $W/mmvq-time.log
  for v in co co-old; do [ -f $W/bench-$v/bench.txt ] && { echo "--- bench $v"; grep -E "d2d|floor|^(f16|bf16)" $W/bench-$v/bench.txt; }; grep -hE "FAIL|panic" $W/mmvq-bench-$v.log 2>/dev/null | head -3; done
} > $W/mmvq-summary.log 2>&1
cp $W/mmvq-summary.log "$O"/mmvq-summary.log
tar czf "$O"/mmvq-logs.tgz -C $W .
cat "$O"/mmvq-summary.log
