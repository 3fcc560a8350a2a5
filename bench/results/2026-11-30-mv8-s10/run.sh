#!/usr/bin/env bash
# mv8 (session 10, issue 5): the streaming ceiling of every type at 4096×14336 beside the mmvq
# rows, and Q8_0 / Q6_K decode geometries g15–g19 (DRAM-side depth: L2 prefetches P2 passes
# ahead, the .L2::256B fetch hint) against the default and g10, in one H200 call. Trimmed from
# 2026-11-30-mmvq-s9/run.sh.
#
#   run.sh build   build machine, repository root: parity.test (CGO_ENABLED=0, -tags
#       strata_nodemo, -gcflags=all=-l, stripped, xz --x86), sm_90's mmvq.ptx (clang-19,
#       objects.txt flags) cut to the kernels the call runs (strip_ptx.py: the 10 defaults,
#       every type's g10 and g15–g19, Q2_0 / IQ1_M g1, Q4_K g5), and ceiling.ptx
#       (parity/testdata/ceiling.cu) into $DEV (default /work/main/.dev-mv8).
#   run.sh run     GPU machine, repository root of the device copy (carry .dev-mv8), $OUT set.
#       STRATA_V_BUDGET seconds in all (default 140). Steps: ptxas -v of both modules (loaded as
#       cubins: no driver JIT in a timing); bench 1 (TestBenchDecode, every type, 4096×14336
#       n = 1: the type's kernel, the default and STRATA_V_GEOMS (default 10,15,16,17,18,19) in
#       three alternating rounds, each geometry checked bitwise against the default; the d2d
#       copy, the empty launch, the copy of each type's bytes; the streaming ceiling sweep and
#       the arithmetic floor); parity (STRATA_V_PARITY: -test.run patterns under
#       TestParity/sm_90/, each its own process); bench 2 (bench 1 again); ncu of Q8_0's
#       default and two geometries (STRATA_V_NCU_GEOMS, default 10,15; call1: 10,16) and of two
#       ceiling kernels, if time is left. call1 ran this script at d054d27 (g15–g19 then the
#       lost L2-prefetch forms); the final-call plan in README.md runs it with the split-row g15.
#   STRATA_V_DRY=1 run.sh run   the same flow with stub binaries (no GPU).
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)

build() {
	set -e
	cd "$here/../../.."
	local d=${DEV:-/work/main/.dev-mv8} target=sm_90 flags
	rm -rf "$d" && mkdir -p "$d/co/$target"
	CGO_ENABLED=0 go test -c -trimpath -gcflags=all=-l -ldflags='-s -w' -tags strata_nodemo -o "$d/parity.test" ./parity
	xz -9e --x86 --lzma2 -T2 "$d/parity.test"
	flags=$(awk -F'\t' -v t="$target" '$1 == "target" && $2 == t { print $6 }' kernels/out/objects.txt)
	# shellcheck disable=SC2086 # flags are a list
	nice -n 10 clang-19 $flags -I "kernels/out/$target" -I kernels/out/include "kernels/out/$target/mmvq.cu" -o "$d/mmvq-full.ptx"
	python3 "$here/strip_ptx.py" "$d/mmvq-full.ptx" "$d/co/$target/mmvq.ptx" \
		'^strata_mmvq_[a-z0-9]+$|^strata_mmvq_[a-z0-9]+_g1[05-9]$|^strata_mmvq_(q20|iq1m)_g1$|^strata_mmvq_q4k_g5$'
	rm "$d/mmvq-full.ptx"
	# shellcheck disable=SC2086
	clang-19 $flags -I "kernels/out/$target" parity/testdata/ceiling.cu -o "$d/co/ceiling.ptx"
	tar -C "$d" -cf - co | xz -9e -T2 >"$d/co.tar.xz" && rm -r "$d/co"
	cp "$here/run.sh" "$d/"
	git rev-parse HEAD >"$d/commit"
	git status --porcelain >>"$d/commit"
	ls -la "$d"
	du -sh "$d"
}

run() {
	local d=$here w=/tmp/mv8run t0=$SECONDS budget=${STRATA_V_BUDGET:-140} dry=${STRATA_V_DRY:-0}
	: "${OUT:?set OUT}"
	rm -rf "$w" && mkdir -p "$w/logs"
	local L=$w/logs pt=$w/parity.test P N
	left() { echo $((budget - (SECONDS - t0) - $1)); }
	lim() { local l; l=$(left "$2"); [ "$l" -lt "$1" ] && echo $((l > 5 ? l : 5)) || echo "$1"; }
	local sum="$OUT/summary.md"
	echo "# mv8-s10 run.sh run ($(date -u +%FT%TZ)), budget ${budget}s, dry $dry, commit $(head -1 "$d/commit" 2>/dev/null)" >"$sum"
	say() { echo "- $* at $((SECONDS - t0)) s" | tee -a "$sum"; }
	P=$(command -v ptxas || echo /usr/local/cuda/bin/ptxas)
	N=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
	if [ "$dry" = 1 ]; then
		printf '#!/bin/sh\necho "stub $0 $*"; env | grep -E "^STRATA_(CO_DIR|BENCH_[A-Z_]+)=" | sort; sleep %s\nif [ -n "$STRATA_BENCH_OUT" ]; then echo "stub bench" >"$STRATA_BENCH_OUT/bench.txt"; fi\necho "--- PASS: TestParity/sm_90/mmvq/q80_g15/x"\necho PASS\n' "${STRATA_V_DRY_SLEEP:-1}" >"$pt"
		chmod +x "$pt"
		mkdir -p "$w/co/sm_90" && echo "// stub" >"$w/co/sm_90/mmvq.ptx" && echo "// stub" >"$w/co/ceiling.ptx"
		printf '#!/bin/sh\nwhile [ $# -gt 1 ]; do case $1 in -o) shift; o=$1;; -arch=*|-v) ;; *) i=$1;; esac; shift; done\ncp "$i" "$o"; echo "ptxas info    : Compiling entry function '"'"'strata_mmvq_q80_g15'"'"' for '"'"'sm_90'"'"'"; echo "ptxas info    : Used 128 registers, used 1 barriers, 36864 bytes smem"; echo "ptxas info    :     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads"\n' >"$w/ptxas" && chmod +x "$w/ptxas"
		printf '#!/bin/sh\necho "stub ncu $*"; while [ $# -gt 0 ]; do case $1 in --) shift; break;; -k|-c|--section|--clock-control|-o|--launch-count|--kernel-name) shift;; esac; shift; done\n"$@"\n' >"$w/ncu" && chmod +x "$w/ncu"
		P=$w/ptxas N=$w/ncu
	else
		python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' "$d/co.tar.xz" "$w"
		python3 -c 'import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2], "wb"))' "$d/parity.test.xz" "$pt" && chmod +x "$pt"
		{ nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv; "$P" --version; } >"$L/machine.log" 2>&1
	fi
	cat "$d/commit" >"$L/commit" 2>/dev/null
	export STRATA_REQUIRE_GPU=1
	local m=$w/co/sm_90/mmvq.ptx c=$w/co/ceiling.ptx ceil=""
	{ "$P" -v -arch=sm_90 "$c" -o "$c.cubin" >"$L/ptxas-ceiling.log" 2>&1 && mv "$c.cubin" "$c"; } &
	local pc=$!
	"$P" -v -arch=sm_90 "$m" -o "$m.cubin" >"$L/ptxas-mmvq.log" 2>&1 && mv "$m.cubin" "$m" || say "ptxas of mmvq FAILED"
	wait $pc
	if [ "$dry" = 1 ] || [ "$(head -c 4 "$c" | tail -c 3)" = ELF ]; then ceil=$c; else say "ptxas of ceiling.ptx FAILED (no ceiling rows)"; fi
	say "ptxas: spills: $(grep -chE ' [1-9][0-9]* bytes spill' "$L/ptxas-mmvq.log" "$L/ptxas-ceiling.log" | tr '\n' ' ')"
	bench() { # bench N RESERVE
		local lb
		lb=$(lim 45 "$2")
		mkdir -p "$L/bench-$1"
		STRATA_CO_DIR=$w/co STRATA_BENCH=1 STRATA_BENCH_NS=1 STRATA_BENCH_EXPERTS=0 STRATA_BENCH_GEOMS=${STRATA_V_GEOMS:-10,15,16,17,18,19} \
			STRATA_BENCH_ALT=3 STRATA_BENCH_CEIL=$ceil STRATA_BENCH_OUT=$L/bench-$1 \
			timeout "$lb" "$pt" -test.v -test.timeout "$((lb - 2))s" -test.run '^TestBenchDecode$' >"$L/bench-$1.log" 2>&1
		say "bench $1 exit $?"
	}
	bench 1 85
	local pids=() g i=0 p1
	p1=$(lim 40 45)
	for g in ${STRATA_V_PARITY-mmvq/^(q80|q6k)_g1[5-9]$/ mmvq/^(q20|q4k|iq2xs)_g1[5-9]$/ mmvq/^(iq3xxs|iq3s|iq1m)_g1[5-9]$/ mmvq/^(q80|q6k)$/}; do
		echo "$g" >"$L/parity-$i.group"
		STRATA_CO_DIR=$w/co timeout "$p1" "$pt" -test.v -test.timeout "$((p1 - 3))s" -test.run "TestParity/sm_90/$g" >"$L/parity-$i.log" 2>&1 &
		pids+=($!)
		i=$((i + 1))
	done
	wait "${pids[@]}"
	say "parity done"
	if [ "$(left 40)" -gt 0 ]; then bench 2 18; else say "bench 2 skipped (time)"; fi
	# ncu: Q8_0's default and STRATA_V_NCU_GEOMS (default g10 and g15, regex STRATA_V_NCU_RE;
	# call1 ran g10 and g16: the first launch of each, the timed one), then the
	# ceiling's w16_u4 at its five grids and the mmvq-order kernel (STRATA_BENCH_REPS=0,1: one
	# launch a case).
	ncu_run() { # ncu_run NAME REGEX COUNT ENV…
		local ln name=$1 re=$2 cnt=$3
		shift 3
		if [ "$(left 10)" -le 0 ]; then say "ncu $name skipped (time)"; return; fi
		ln=$(lim 25 3)
		env STRATA_CO_DIR="$w/co" STRATA_BENCH=1 STRATA_BENCH_NS=1 STRATA_BENCH_EXPERTS=0 STRATA_BENCH_TYPES=q80 STRATA_BENCH_FLOORS=0 \
			STRATA_BENCH_GRAPH=0 STRATA_BENCH_REPS=0,1 "$@" \
			timeout "$ln" "$N" --clock-control none -k "regex:$re" -c "$cnt" \
			--section SpeedOfLight --section MemoryWorkloadAnalysis --section MemoryWorkloadAnalysis_Tables --section Occupancy --section LaunchStats \
			--section WarpStateStats --section SchedulerStats --metrics dram__bytes_read.sum,lts__t_sectors_srcunit_tex_op_read.sum,l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum,l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum,smsp__warps_active.avg.per_cycle_active \
			-- "$pt" -test.run '^TestBenchDecode$' >"$L/ncu-$name.txt" 2>&1
		say "ncu $name exit $?"
	}
	ncu_run mmvq "${STRATA_V_NCU_RE:-^strata_mmvq_q80(_g1[05])?\$}" 3 STRATA_BENCH_GEOMS="${STRATA_V_NCU_GEOMS:-10,15}"
	[ -n "$ceil" ] && ncu_run ceiling '^strata_ceil_(rows|w16_u4)$' 7 STRATA_BENCH_CEIL="$ceil"
	{
		echo
		echo "## parity"
		for f in "$L"/parity-*.log; do echo "- $(cat "${f%.log}.group"): passed $(grep -cE '^\s*--- PASS: TestParity/.*/.*/.*/' "$f"), failed $(grep -cE '^\s*--- FAIL: TestParity/.*/.*/.*/' "$f"), skipped $(grep -cE '^\s*--- SKIP: TestParity/.*/.*/.*/' "$f") $(grep -E '^(ok|PASS|FAIL)$' "$f" | tr '\n' ' ')"; done
		grep -hE "^\s*--- FAIL|panic|timed out" "$L"/parity-*.log | head -20
		echo "## ptxas -v (registers, spills) by entry"
		python3 - "$L/ptxas-mmvq.log" "$L/ptxas-ceiling.log" <<'PY'
import re, sys
for path in sys.argv[1:]:
    name, regs, spill = None, {}, {}
    for line in open(path):
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
	cat "$L"/ncu-*.txt >"$OUT/ncu.txt" 2>/dev/null
	tar -C "$w" -czf "$OUT/logs.tgz" logs
	tail -c 3000 "$sum"
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
