#!/usr/bin/env bash
# mmvq (session 9, issue 5): the wide-load decode geometries g10–g14 against the default and
# the measured best kernels, in one H200 call. Trimmed from 2026-11-30-mmvq4-s8/run.sh.
#
#   run.sh build   build machine, repository root: parity.test (CGO_ENABLED=0, -tags
#       strata_nodemo, stripped, xz) and sm_90's mmvq.ptx (clang-19, objects.txt flags) into
#       $DEV (default /work/main/.dev-mmvq).
#   run.sh run     GPU machine, repository root of the device copy (carry .dev-mmvq), $OUT set.
#       STRATA_W_BUDGET seconds in all (default 185). Steps: ptxas -v of mmvq (every entry's
#       registers and spills; the module then loaded as a cubin: no driver JIT in a timing);
#       bench 1 (TestBenchDecode, every type, 4096×14336 n = 1, 2, 4, 8 and the 30B expert
#       shapes; at n = 1 the type's kernel, the default and STRATA_W_GEOMS (default 10,11,12,13,14)
#       in two alternating rounds; at the expert shapes the default and the same geometries
#       alternated; each geometry checked bitwise against the default at 4096×14336; the d2d
#       copy and the copy of each type's bytes); parity (STRATA_W_PARITY: -test.run patterns
#       under TestParity/sm_90/, each its own process; default the new geometries of every
#       type and the Q8_0 / Q6_K defaults they must equal); bench 2 (bench 1 again, if time is
#       left).
#   STRATA_W_DRY=1 run.sh run   the same flow with stub binaries (no GPU).
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)

build() {
	set -e
	cd "$here/../../.."
	local d=${DEV:-/work/main/.dev-mmvq} target=sm_90 flags
	rm -rf "$d" && mkdir -p "$d/co/$target"
	CGO_ENABLED=0 go test -c -trimpath -ldflags=-s -tags strata_nodemo -o "$d/parity.test" ./parity
	xz -9e -T2 "$d/parity.test"
	flags=$(awk -F'\t' -v t="$target" '$1 == "target" && $2 == t { print $6 }' kernels/out/objects.txt)
	# shellcheck disable=SC2086 # flags are a list
	clang-19 $flags -I "kernels/out/$target" -I kernels/out/include "kernels/out/$target/mmvq.cu" -o "$d/co/$target/mmvq.ptx"
	tar -C "$d" -cf - co | xz -9e -T2 >"$d/co.tar.xz" && rm -r "$d/co"
	cp "$here/run.sh" "$d/"
	git rev-parse HEAD >"$d/commit"
	git status --porcelain >>"$d/commit"
	ls -la "$d"
	du -sh "$d"
}

run() {
	local d=$here w=/tmp/mw t0=$SECONDS budget=${STRATA_W_BUDGET:-185} dry=${STRATA_W_DRY:-0}
	: "${OUT:?set OUT}"
	rm -rf "$w" && mkdir -p "$w/logs"
	local L=$w/logs pt=$w/parity.test P
	left() { echo $((budget - (SECONDS - t0) - $1)); }
	lim() { local l; l=$(left "$2"); [ "$l" -lt "$1" ] && echo $((l > 5 ? l : 5)) || echo "$1"; }
	local sum="$OUT/summary.md"
	echo "# mmvq-s9 run.sh run ($(date -u +%FT%TZ)), budget ${budget}s, dry $dry, commit $(head -1 "$d/commit" 2>/dev/null)" >"$sum"
	say() { echo "- $* at $((SECONDS - t0)) s" | tee -a "$sum"; }
	P=$(command -v ptxas || echo /usr/local/cuda/bin/ptxas)
	if [ "$dry" = 1 ]; then
		printf '#!/bin/sh\necho "stub $0 $*"; env | grep -E "^STRATA_(CO_DIR|BENCH_[A-Z_]+)=" | sort; sleep %s\nif [ -n "$STRATA_BENCH_OUT" ]; then echo "stub bench" >"$STRATA_BENCH_OUT/bench.txt"; fi\necho "--- PASS: TestParity/sm_90/mmvq/q80_g10/x"\necho PASS\n' "${STRATA_W_DRY_SLEEP:-1}" >"$pt"
		chmod +x "$pt"
		mkdir -p "$w/co/sm_90" && echo "// stub" >"$w/co/sm_90/mmvq.ptx"
		printf '#!/bin/sh\nwhile [ $# -gt 1 ]; do case $1 in -o) shift; o=$1;; -arch=*|-v|--split-compile) ;; *) i=$1;; esac; shift; done\ncp "$i" "$o"; echo "ptxas info    : Compiling entry function '"'"'strata_mmvq_q80_g10'"'"' for '"'"'sm_90'"'"'"; echo "ptxas info    : Used 128 registers, used 1 barriers, 36864 bytes smem"; echo "ptxas info    :     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads"\n' >"$w/ptxas" && chmod +x "$w/ptxas"
		P=$w/ptxas
	else
		python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' "$d/co.tar.xz" "$w"
		python3 -c 'import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2], "wb"))' "$d/parity.test.xz" "$pt" && chmod +x "$pt"
		{ nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv; "$P" --version; } >"$L/machine.log" 2>&1
	fi
	cat "$d/commit" >"$L/commit" 2>/dev/null
	export STRATA_REQUIRE_GPU=1
	local m=$w/co/sm_90/mmvq.ptx
	"$P" -v -arch=sm_90 "$m" -o "$m.cubin" >"$L/ptxas-mmvq.log" 2>&1 && mv "$m.cubin" "$m" || say "ptxas FAILED"
	say "ptxas: spills: $(grep -cE ' [1-9][0-9]* bytes spill' "$L/ptxas-mmvq.log")"
	bench() { # bench N RESERVE
		local lb
		lb=$(lim 80 "$2")
		mkdir -p "$L/bench-$1"
		STRATA_CO_DIR=$w/co STRATA_BENCH=1 STRATA_BENCH_GEOMS=${STRATA_W_GEOMS:-10,11,12,13,14} STRATA_BENCH_ALT=2 STRATA_BENCH_EXPERT_GEOMS=1 STRATA_BENCH_OUT=$L/bench-$1 \
			timeout "$lb" "$pt" -test.v -test.timeout "$((lb - 2))s" -test.run '^TestBenchDecode$' >"$L/bench-$1.log" 2>&1
		say "bench $1 exit $?"
	}
	bench 1 75
	local pids=() g i=0 p1
	p1=$(lim 45 30)
	for g in ${STRATA_W_PARITY-mmvq/^(q80|q6k)_g1[0-4]$/ mmvq/^(q20|q4k|iq2xs|iq3xxs|iq3s|iq1m)_g1[0-4]$/ mmvq/^(q80|q6k)$/}; do
		echo "$g" >"$L/parity-$i.group"
		STRATA_CO_DIR=$w/co timeout "$p1" "$pt" -test.v -test.timeout "$((p1 - 3))s" -test.run "TestParity/sm_90/$g" >"$L/parity-$i.log" 2>&1 &
		pids+=($!)
		i=$((i + 1))
	done
	wait "${pids[@]}"
	say "parity done"
	if [ "$(left 35)" -gt 0 ]; then bench 2 3; else say "bench 2 skipped (time)"; fi
	{
		echo
		echo "## parity"
		for f in "$L"/parity-*.log; do echo "- $(cat "${f%.log}.group"): passed $(grep -cE '^\s*--- PASS: TestParity/.*/.*/.*/' "$f"), failed $(grep -cE '^\s*--- FAIL: TestParity/.*/.*/.*/' "$f"), skipped $(grep -cE '^\s*--- SKIP: TestParity/.*/.*/.*/' "$f") $(grep -E '^(ok|PASS|FAIL)$' "$f" | tr '\n' ' ')"; done
		grep -hE "^\s*--- FAIL|panic|timed out" "$L"/parity-*.log | head -20
		echo "## ptxas -v (registers, spills) by entry"
		python3 - "$L/ptxas-mmvq.log" <<'PY'
import re, sys
name, regs, spill = None, {}, {}
for line in open(sys.argv[1]):
    m = re.search(r"(?:Compiling entry function|Function properties for) '?(\w+)'?", line)
    if m: name = m.group(1); continue
    m = re.search(r"Used (\d+) registers", line)
    if m and name: regs[name] = m.group(1)
    m = re.search(r"(\d+) bytes spill stores, (\d+) bytes spill loads", line)
    if m and name: spill[name] = f"{m.group(1)}/{m.group(2)}"
for n in regs: print(f"{n} regs {regs[n]} spill {spill.get(n, '?')}")
PY
		for n in 1 2; do
			echo "## bench $n"
			cat "$L/bench-$n/bench.txt" 2>/dev/null || grep -vhE "^(=== |--- PASS|PASS$|ok )" "$L/bench-$n.log" 2>/dev/null | head -150
			grep -hE "^\s*--- FAIL|bench_test.go.*differ|panic" "$L/bench-$n.log" 2>/dev/null | head
		done
		echo
		echo "total: $((SECONDS - t0)) s"
	} >>"$sum"
	cp "$L"/bench-1/bench.txt "$OUT/bench1.txt" 2>/dev/null
	cp "$L"/bench-2/bench.txt "$OUT/bench2.txt" 2>/dev/null
	tar -C "$w" -czf "$OUT/logs.tgz" logs
	cat "$sum"
	true
}

case "${1:-run}" in
build) build ;;
run) run ;;
*)
	echo "usage: $0 build | run" >&2
	exit 2
	;;
esac
