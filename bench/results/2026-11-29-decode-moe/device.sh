#!/usr/bin/env bash
# moe_decode: one H200 call. `device.sh build` on the build machine (worktree root, Go +
# clang-19 + ptxas 11.8) writes $DEV (default /work/main/.dev-moedec); `device.sh run` on the
# GPU machine (repository root of the device copy, carry .dev-moedec, $OUT set) runs:
#   ptxas -v of every moe_decode build; parity of moe_decode (all four phases) and mmvq, every
#   variant, fresh seeds, STRATA_REQUIRE_GPU=1; TestBenchMoeDecode with the new kernels and,
#   in the same process, base (the previous kernels: kernels/out/sm_90/moe_decode.cu at
#   c2fbf9a), nostage (-DSTRATA_MOE_XS_WORDS=9: x and h read from global memory) and small
#   (-DSTRATA_MOE_RP=2 -DSTRATA_MOE_U=1 -DSTRATA_MOE_KU=4: fewer loads per pass).
# STRATA_DRY=1 device.sh run: the flow with stub binaries (no GPU).
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build() {
	set -e
	cd "$here/../../.."
	local d=${DEV:-/work/main/.dev-moedec}
	rm -rf "$d" && mkdir -p "$d/co"
	CGO_ENABLED=0 go test -c -trimpath -ldflags=-s -o "$d/parity.test" ./parity
	xz -6 -T2 "$d/parity.test"
	local f
	f=$(awk -F'\t' '$1 == "target" && $2 == "sm_90" { print $6 }' kernels/out/objects.txt)
	mkdir -p "$d/co/new/sm_90" "$d/co/base/sm_90" "$d/co/nostage/sm_90" "$d/co/small/sm_90"
	# shellcheck disable=SC2086
	{
		clang-19 $f -I kernels/out/sm_90 -I kernels/out/include kernels/out/sm_90/moe_decode.cu -o "$d/co/new/sm_90/moe_decode.ptx"
		clang-19 $f -I kernels/out/sm_90 -I kernels/out/include kernels/out/sm_90/mmvq.cu -o "$d/co/new/sm_90/mmvq.ptx"
		git show c2fbf9a:kernels/out/sm_90/moe_decode.cu >/tmp/moe_decode_base.cu
		clang-19 $f -I kernels/out/sm_90 -I kernels/out/include /tmp/moe_decode_base.cu -o "$d/co/base/sm_90/moe_decode.ptx"
		clang-19 $f -DSTRATA_MOE_XS_WORDS=9 -I kernels/out/sm_90 -I kernels/out/include kernels/out/sm_90/moe_decode.cu -o "$d/co/nostage/sm_90/moe_decode.ptx"
		clang-19 $f -DSTRATA_MOE_RP=2 -DSTRATA_MOE_U=1 -DSTRATA_MOE_KU=4 -I kernels/out/sm_90 -I kernels/out/include kernels/out/sm_90/moe_decode.cu -o "$d/co/small/sm_90/moe_decode.ptx"
	}
	for v in new base nostage small; do
		echo "== $v (ptxas 11.8, build machine)"
		/tmp/cudatk/root/usr/bin/ptxas -arch=sm_90 -v "$d/co/$v/sm_90/moe_decode.ptx" -o /dev/null 2>&1 | grep -E "Compiling|spill|Used" | paste - - - | sed 's/ptxas info *: //g'
	done >"$d/ptxas-build.txt"
	tar -C "$d" -cJf "$d/co.tar.xz" co && rm -r "$d/co"
	cp "$here/device.sh" "$d/"
	git rev-parse HEAD >"$d/commit"
	ls -la "$d"
	du -sh "$d"
}
run() {
	local d=$here w=/tmp/moew dry=${STRATA_DRY:-0}
	: "${OUT:?set OUT}"
	export PATH=$PATH:/usr/local/cuda/bin
	rm -rf "$w" && mkdir -p "$w" && cd "$w" || exit 1
	tar -xJf "$d/co.tar.xz"
	if [ "$dry" = 1 ]; then
		printf '#!/bin/sh\necho "--- PASS: TestParity/sm_90/x/y/z (0.0s)"; echo "stub $*"\n' >"$w/parity.test"
	else
		xz -dc "$d/parity.test.xz" >"$w/parity.test"
	fi
	chmod +x "$w/parity.test"
	cp "$d/ptxas-build.txt" "$d/commit" "$w/" 2>/dev/null
	nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm,clocks.max.mem --format=csv >"$w/gpu.txt" 2>&1
	for v in new base nostage small; do
		echo "== $v (device ptxas)"
		ptxas -arch=sm_90 -v "co/$v/sm_90/moe_decode.ptx" -o /dev/null 2>&1 | grep -E "Compiling|spill|Used" | paste - - - | sed 's/ptxas info *: //g'
	done >"$w/ptxas-device.txt" 2>&1
	export STRATA_REQUIRE_GPU=1
	local s=$SECONDS i=0
	STRATA_CO_DIR=$w/co/new timeout 100 ./parity.test -test.v -test.timeout 98s -test.run 'TestParity/sm_90/moe_decode/' >"$w/par-moe.log" 2>&1 &
	for g in "f16|bf16|q80" "q20|q4k|q6k" "iq2xs|iq3xxs" "iq3s|iq1m"; do
		STRATA_CO_DIR=$w/co/new timeout 100 ./parity.test -test.v -test.timeout 98s -test.run "TestParity/sm_90/mmvq/($g)/" >"$w/par-mmvq-$i.log" 2>&1 &
		i=$((i + 1))
	done
	wait
	echo "parity done in $((SECONDS - s)) s"
	s=$SECONDS
	STRATA_BENCH=1 STRATA_CO_DIR=$w/co/new STRATA_BENCH_OUT=$w STRATA_BENCH_MOE_MODS="base=$w/co/base,nostage=$w/co/nostage,small=$w/co/small" \
		timeout 60 ./parity.test -test.v -test.timeout 58s -test.run TestBenchMoeDecode >"$w/bench-moe.log" 2>&1
	echo "bench exit $? in $((SECONDS - s)) s"
	cnt() { echo "passed $(cat "$@" | grep -cE '^\s*--- PASS: TestParity/.*/.*/.*/'), failed $(cat "$@" | grep -cE '^\s*--- FAIL: TestParity/.*/.*/.*/')"; cat "$@" | grep -E "^\s*--- FAIL|panic|timed out" | head -4; }
	tar -czf "$OUT/logs.tgz" -C "$w" --exclude=co --exclude=parity.test .
	cp "$w/bench-moe.txt" "$OUT/" 2>/dev/null
	cat "$w/gpu.txt" "$w/ptxas-device.txt"
	echo "parity moe_decode: $(cnt "$w/par-moe.log")"
	echo "parity mmvq: $(cnt "$w"/par-mmvq-*.log)"
	grep -E "FAIL|panic" "$w/bench-moe.log" | head -3
	grep -E "d2d|floor|^(new|base|nostage|small) |bitwise" "$w/bench-moe.txt" 2>/dev/null | grep -vE "bitwise equal.*: true" | sed 's/ \+/ /g'
	echo "bitwise equal lines: $(grep -c 'bitwise equal.*: true' "$w/bench-moe.txt" 2>/dev/null) true, $(grep -c 'bitwise equal.*: false' "$w/bench-moe.txt" 2>/dev/null) false"
}
"$@"
