#!/usr/bin/env bash
# top-k in registers (moe_decode) and mmvq Q8_0/Q6_K passes: one H200 call.
# `device.sh build` on the build machine (worktree root, Go + clang-19 + ptxas 11.8) writes
# $DEV (default /work/main/.dev-moedec2); `device.sh run` on the GPU machine (carry
# .dev-moedec2, $OUT set) runs: ptxas -v of every build; parity of moe_decode (new) and of
# mmvq (default and each sweep build, the types each changes), STRATA_REQUIRE_GPU=1, fresh
# seeds; TestBenchMoeDecode new vs base (kernels/out/sm_90/moe_decode.cu at fd761a4) in one
# process; TestBenchDecode (mmvq) for the default and the sweep builds.
# mmvq builds (sm_90 flags from objects.txt plus): def (none: the committed PTX),
#   u3 (-DSTRATA_MMVQ_U1_Q80=3 -DSTRATA_MMVQ_U1_Q6K=3), u4 (=4, =4), pf (-DSTRATA_MMVQ_PFALL=1),
#   h6p1 (-DSTRATA_MMVQ_Q6KH=1 -DSTRATA_MMVQ_Q80P=1: Q6_K by half-blocks, Q8_0 by block pairs,
#   one pair per lane per pass), h6p2 (the same with two pairs per pass).
# STRATA_DRY=1 device.sh run: the flow with stub binaries (no GPU).
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
MV="def u3 u4 pf h6p1 h6p2"
flags() {
	case $1 in
	def) echo "" ;;
	u3) echo "-DSTRATA_MMVQ_U1_Q80=3 -DSTRATA_MMVQ_U1_Q6K=3" ;;
	u4) echo "-DSTRATA_MMVQ_U1_Q80=4 -DSTRATA_MMVQ_U1_Q6K=4" ;;
	pf) echo "-DSTRATA_MMVQ_PFALL=1" ;;
	h6p1) echo "-DSTRATA_MMVQ_Q6KH=1 -DSTRATA_MMVQ_Q80P=1" ;;
	h6p2) echo "-DSTRATA_MMVQ_Q6KH=1 -DSTRATA_MMVQ_Q80P=2" ;;
	esac
}
build() {
	set -e
	cd "$here/../../.."
	local d=${DEV:-/work/main/.dev-moedec2} f v
	rm -rf "$d" && mkdir -p "$d/co"
	CGO_ENABLED=0 go test -c -trimpath -ldflags=-s -o "$d/parity.test" ./parity
	xz -6 -T2 "$d/parity.test"
	f=$(awk -F'\t' '$1 == "target" && $2 == "sm_90" { print $6 }' kernels/out/objects.txt)
	mkdir -p "$d/co/new/sm_90" "$d/co/base/sm_90"
	git show fd761a4:kernels/out/sm_90/moe_decode.cu >/tmp/moe_decode_base.cu
	# shellcheck disable=SC2086
	{
		clang-19 $f -I kernels/out/sm_90 -I kernels/out/include kernels/out/sm_90/moe_decode.cu -o "$d/co/new/sm_90/moe_decode.ptx"
		clang-19 $f -I kernels/out/sm_90 -I kernels/out/include /tmp/moe_decode_base.cu -o "$d/co/base/sm_90/moe_decode.ptx"
		for v in $MV; do
			mkdir -p "$d/co/m$v/sm_90"
			clang-19 $f $(flags $v) -I kernels/out/sm_90 -I kernels/out/include kernels/out/sm_90/mmvq.cu -o "$d/co/m$v/sm_90/mmvq.ptx"
		done
	}
	cp "$d/co/mdef/sm_90/mmvq.ptx" "$d/co/new/sm_90/"
	# The Q8_0/Q6_K-only builds keep just those two entries (less JIT on the device).
	for v in u3 u4 h6p1 h6p2; do
		python3 - "$d/co/m$v/sm_90/mmvq.ptx" <<'PY'
import re, sys
p = sys.argv[1]
s = open(p).read()
out, i = [], 0
for m in re.finditer(r'^\.visible \.entry (\w+)\(', s, re.M):
    if m.start() < i:
        continue
    end = s.index('\n}\n', m.start()) + 3
    out.append(s[i:m.start()])
    if m.group(1) in ('strata_mmvq_q80', 'strata_mmvq_q6k'):
        out.append(s[m.start():end])
    i = end
out.append(s[i:])
open(p, 'w').write(''.join(out))
PY
	done
	for v in new base $(printf 'm%s ' $MV); do
		for p in "$d/co/$v/sm_90/"*.ptx; do
			echo "== $v $(basename "$p") (ptxas 11.8, build machine)"
			/tmp/cudatk/root/usr/bin/ptxas -arch=sm_90 -v "$p" -o /dev/null 2>&1 | grep -E "Compiling entry|spill|Used" | paste - - - | sed 's/ptxas info *: //g'
		done
	done >"$d/ptxas-build.txt"
	tar -C "$d" -cJf "$d/co.tar.xz" co && rm -r "$d/co"
	cp "$here/device.sh" "$d/"
	git rev-parse HEAD >"$d/commit"
	ls -la "$d"
	du -sh "$d"
}
run() {
	local d=$here w=/tmp/topkw dry=${STRATA_DRY:-0} v
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
	# device ptxas -v of every build, in the background (one job per file; joined below)
	local pj=0
	for v in new base $(printf 'm%s ' $MV); do
		for p in co/$v/sm_90/*.ptx; do
			pj=$((pj + 1))
			{
				echo "== $v $(basename "$p") (device ptxas)"
				ptxas -arch=sm_90 -v "$p" -o /dev/null 2>&1 | grep -E "Compiling entry|spill|Used" | paste - - - | sed 's/ptxas info *: //g'
			} >"$w/ptxas-$pj.part" 2>&1 &
		done
	done
	export STRATA_REQUIRE_GPU=1
	local s=$SECONDS i=0
	for g in "q80|q20" "q4k|q6k" "iq2xs|iq3xxs" "iq3s|iq1m"; do
		STRATA_CO_DIR=$w/co/new timeout 100 ./parity.test -test.v -test.timeout 98s -test.run "TestParity/sm_90/moe_decode/($g)/" >"$w/par-moe-$i.log" 2>&1 &
		i=$((i + 1))
	done
	i=0
	for g in "f16|bf16|q80" "q20|q4k|q6k" "iq2xs|iq3xxs" "iq3s|iq1m"; do
		for v in def pf; do
			STRATA_CO_DIR=$w/co/m$v timeout 100 ./parity.test -test.v -test.timeout 98s -test.run "TestParity/sm_90/mmvq/($g)/" >"$w/par-mmvq-$v-$i.log" 2>&1 &
		done
		i=$((i + 1))
	done
	for v in u3 u4 h6p1 h6p2; do
		STRATA_CO_DIR=$w/co/m$v timeout 100 ./parity.test -test.v -test.timeout 98s -test.run "TestParity/sm_90/mmvq/(q80|q6k)/" >"$w/par-mmvq-$v-0.log" 2>&1 &
	done
	wait
	cat "$w"/ptxas-*.part >"$w/ptxas-device.txt" 2>/dev/null
	echo "parity (and device ptxas) done in $((SECONDS - s)) s" | tee "$w/times.txt"
	s=$SECONDS
	STRATA_BENCH=1 STRATA_CO_DIR=$w/co/new STRATA_BENCH_OUT=$w STRATA_BENCH_MOE_MODS="base=$w/co/base" \
		timeout 40 ./parity.test -test.v -test.timeout 38s -test.run TestBenchMoeDecode >"$w/bench-moe.log" 2>&1
	echo "bench moe exit $? in $((SECONDS - s)) s" | tee -a "$w/times.txt"
	s=$SECONDS
	# mmvq: the default in full, then n = 1 at 4096x14336 for every build twice, interleaved.
	mkdir -p "$w/mdef"
	STRATA_BENCH=1 STRATA_CO_DIR=$w/co/mdef STRATA_BENCH_OUT=$w/mdef timeout 30 ./parity.test -test.v -test.timeout 28s -test.run TestBenchDecode >"$w/bench-mdef.log" 2>&1
	for r in 1 2; do
		for v in $MV; do
			mkdir -p "$w/n1-$v-$r"
			local ty=""
			case $v in u3 | u4 | h6p1 | h6p2) ty=q80,q6k ;; esac # the builds stripped to these two
			STRATA_BENCH=1 STRATA_BENCH_NS=1 STRATA_BENCH_EXPERTS=0 STRATA_BENCH_TYPES=$ty STRATA_CO_DIR=$w/co/m$v STRATA_BENCH_OUT=$w/n1-$v-$r \
				timeout 20 ./parity.test -test.v -test.timeout 18s -test.run TestBenchDecode >"$w/bench-n1-$v-$r.log" 2>&1
		done
	done
	echo "bench mmvq in $((SECONDS - s)) s" | tee -a "$w/times.txt"
	cnt() { echo "passed $(cat "$@" | grep -cE '^\s*--- PASS: TestParity/.*/.*/.*/'), failed $(cat "$@" | grep -cE '^\s*--- FAIL: TestParity/.*/.*/.*/')"; cat "$@" | grep -E "^\s*--- FAIL|panic|timed out" | head -4; }
	tar -czf "$OUT/logs.tgz" -C "$w" --exclude=co --exclude=parity.test .
	cp "$w/bench-moe.txt" "$OUT/" 2>/dev/null
	cp "$w/mdef/bench.txt" "$OUT/bench-mmvq.txt" 2>/dev/null
	cat "$w/gpu.txt"
	grep -E "spill|Used" "$w/ptxas-device.txt" | grep -vE " 0 bytes spill stores" | head -5
	echo "device ptxas: $(grep -c '0 bytes spill stores' "$w/ptxas-device.txt") entries without spills of $(grep -c 'Compiling entry' "$w/ptxas-device.txt")"
	echo "parity moe_decode: $(cnt "$w"/par-moe-*.log)"
	for v in $MV; do echo "parity mmvq $v: $(cnt "$w"/par-mmvq-$v-*.log)"; done
	grep -hE "FAIL|panic" "$w"/bench-*.log | head -3
	grep -E "d2d|floor|^(new|base) " "$w/bench-moe.txt" 2>/dev/null | sed 's/ \+/ /g'
	echo "bitwise equal lines: $(grep -c 'bitwise equal.*: true' "$w/bench-moe.txt" 2>/dev/null) true, $(grep -c 'bitwise equal.*: false' "$w/bench-moe.txt" 2>/dev/null) false"
	for r in 1 2; do for v in $MV; do echo "$v/$r: $(grep -E '^(q80|q6k|q4k|q20|iq2xs|iq1m) .*4096x14336 +1 ' "$w/n1-$v-$r/bench.txt" 2>/dev/null | awk '{printf "%s %s %s; ", $1, $4, $6}')"; done; done
}
"$@"
