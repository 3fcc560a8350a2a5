#!/usr/bin/env bash
# One H200 call (helper vec, session 6, issue 5): mmvq of main (O) against this branch (N)
# and builds of N with one decode form off each, in one parity test binary — n = 1 rounds of
# every tree alternating, then the full decode bench (n = 1, 2, 4, 8 and the expert shapes,
# both timings) O and N alternating, N's first with the bitwise check against O
# (STRATA_BENCH_MMVQ_REF), bench-moe (moe_decode, O and N modules in one run) —, then parity
# of mmvq (every tree, the types its change touches), moe_decode and dequant (N), and the
# device ptxas/SASS pass loops.
#   build (worktree root): DEV=/work/main/.dev-vec bash bench/results/2026-11-30-mmvq-mem/call.sh build
#   run (device, carry .dev-vec): OUT=$OUT bash .dev-vec/call.sh run
#   STRATA_DRY=1 with run: stub binary and tools (rehearsal on the build machine).
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# Trees (compiler -D flags on N's mmvq): D = no XDOT (IQ negation and IQ1_M as main), Q = no
# XQ6 (Q6_K's −32 in the bytes), L = no Q6S (Q6_K's scale bytes by two loads), H = SGN 1
# (IQ3_S's high-nibble masks as main), S0 = SGN 0 (strata_ksigns as main too), P = PFI 0
# (the ≤ 16-byte types' prefetch address as main).
variants="O N D Q L H S0 P"
vdefs() {
	case $1 in
	D) echo "-DSTRATA_QB_XDOT=0" ;;
	Q) echo "-DSTRATA_QB_XQ6=0" ;;
	L) echo "-DSTRATA_QB_Q6S=0" ;;
	H) echo "-DSTRATA_QB_SGN=1" ;;
	S0) echo "-DSTRATA_QB_SGN=0" ;;
	P) echo "-DSTRATA_MMVQ_PFI=0" ;;
	*) echo "" ;;
	esac
}
main_ref=${MAIN_REF:-main}

build() {
	set -e
	local d=${DEV:-/work/main/.dev-vec} flags w v
	rm -rf "$d" && mkdir -p "$d"
	w=$(mktemp -d)
	CGO_ENABLED=0 go test -c -trimpath -ldflags=-s -tags strata_nodemo -o "$d/parity.test" ./parity
	xz -9 -T2 "$d/parity.test"
	flags=$(awk -F'\t' '$1 == "target" && $2 == "sm_90" { print $6 }' kernels/out/objects.txt)
	# N: every sm_90 family but the prefill GEMMs (mmq, moe_prefill: not measured here).
	mkdir -p "$w/co-N"
	awk -F'\t' '$1 == "object" && $2 == "sm_90" && $3 != "mmq" && $3 != "moe_prefill" { print $4 "\t" $5 }' kernels/out/objects.txt |
		while IFS=$'\t' read -r src obj; do
			mkdir -p "$w/co-N/$(dirname "$obj")"
			# shellcheck disable=SC2086 # flags are a list
			clang-19 $flags -I "$(dirname "$src")" -I kernels/out/include "$src" -o "$w/co-N/$obj"
		done
	# O: main's mmvq, moe_decode and dequant (the moe module for bench-moe's O row).
	mkdir -p "$w/co-O/sm_90" "$w/src"
	for f in mmvq moe_decode dequant; do
		git show "$main_ref:kernels/out/sm_90/$f.cu" >"$w/src/$f.cu"
		# shellcheck disable=SC2086
		clang-19 $flags -I kernels/out/sm_90 -I kernels/out/include "$w/src/$f.cu" -o "$w/co-O/sm_90/$f.ptx"
	done
	git rev-parse "$main_ref" >"$d/main-commit"
	# Sweep builds: mmvq only.
	for v in $variants; do
		case $v in O | N) continue ;; esac
		mkdir -p "$w/co-$v/sm_90"
		# shellcheck disable=SC2046,SC2086
		clang-19 $flags $(vdefs "$v") -I kernels/out/sm_90 -I kernels/out/include kernels/out/sm_90/mmvq.cu -o "$w/co-$v/sm_90/mmvq.ptx"
	done
	# shellcheck disable=SC2046
	tar -C "$w" -cJf "$d/co.tar.xz" $(for v in $variants; do echo "co-$v"; done)
	rm -rf "$w"
	cp "$here/call.sh" "$here/passloop.py" "$d/"
	{ git rev-parse HEAD; git status --porcelain; } >"$d/commit"
	du -sh "$d" "$d"/*
}

run() {
	: "${OUT:?set OUT}"
	local d=$here w=/tmp/vecrun t0=$SECONDS dry=${STRATA_DRY:-0} budget=${STRATA_BUDGET:-200}
	rm -rf "$w" && mkdir -p "$w/logs"
	local L=$w/logs pt=$w/parity.test
	tar -C "$w" -xJf "$d/co.tar.xz"
	if [ "$dry" = 1 ]; then
		printf '#!/bin/sh\necho "stub $0 $*"; env | grep STRATA_ | sort\necho "d2d copy 1 GiB: 1 GB/s"\necho "floor: empty mmvq launch (ncols 0, 256 blocks): 3.81 µs median | graph: 1.12 µs a launch"\necho "q80      4096x14336                           1      21.85    2859.9    67.1%%     62476288 |      20.00    3000.0    70.0%%"\necho "q80      floor: d2d copy of its bytes         -      18.81    3316.0    77.9%%     62390272 |      16.12    3869.4    90.9%%"\necho "q80      bitwise vs ref 4096x14336 n=1: 0 of 4096 outputs differ (0 not finite)"\necho "new    q80     30B-A3B 128e top8 ff768                  29.73      8.35     14.37     10.37     18.08     26.98   1350.0    31.7%%    40132352"\necho "        --- PASS: TestParity/sm_90/mmvq/q80/x (0.1s)"\nsleep 1\n' >"$pt"
		chmod +x "$pt"
		mkdir -p "$w/stub"
		printf '#!/bin/sh\necho "stub nvidia-smi $*"\n' >"$w/stub/nvidia-smi"
		# ptxas stub: copies its input to the -o file.
		printf '#!/bin/sh\nin=; out=\nwhile [ $# -gt 0 ]; do case $1 in -o) out=$2; shift ;; -*) ;; *) in=$1 ;; esac; shift; done\necho "stub ptxas $in"; sleep 1; [ "$out" = /dev/null ] || cp "$in" "$out"\n' >"$w/stub/ptxas"
		printf '#!/bin/sh\necho "        Function : strata_mmvq_q80"\n' >"$w/stub/cuobjdump"
		chmod +x "$w/stub"/*
		export PATH=$w/stub:$PATH
	else
		python3 -c 'import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2], "wb"))' "$d/parity.test.xz" "$pt"
		chmod +x "$pt"
		export PATH=$PATH:/usr/local/cuda/bin
	fi
	nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,temperature.gpu,power.draw --format=csv >"$L/gpu.txt" 2>&1
	# SM clock through the run (5 samples a second), for the issue-rate bounds.
	nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw --format=csv,noheader -lms 200 >"$L/clocks.csv" 2>&1 &
	local smi=$!
	cp "$d/commit" "$d/main-commit" "$L/"
	# 0. Every PTX assembled by the device's ptxas (CUDA 13.0) first, all in parallel: the
	#    driver's JIT took 10–12 s per mmvq tree the first time (the first attempt of this
	#    call spent its time there). The cubin replaces the .ptx (the loader takes either);
	#    the mmvq cubins are kept for cuobjdump, ptxas -v logs for spills.
	local f v apids=()
	for f in "$w"/co-*/sm_90/*.ptx; do
		v=$(basename "$(dirname "$(dirname "$f")")")
		(timeout 60 ptxas -arch=sm_90 -v "$f" -o "${f%.ptx}.cubin" >"$L/ptxas-${v#co-}-$(basename "$f" .ptx).txt" 2>&1 && cp "${f%.ptx}.cubin" "$f") &
		apids+=($!)
	done
	wait "${apids[@]}"
	echo "ptxas done at $((SECONDS - t0)) s"
	export STRATA_REQUIRE_GPU=1
	save() { tar -C "$w" -czf "$OUT/logs.tgz" logs; summary >"$OUT/summary.txt" 2>&1; }
	# 1. Benchmarks, the GPU alone.
	b() { # b NAME VARIANT TEST ENV...
		local name=$1 v=$2 tst=$3
		shift 3
		env STRATA_BENCH=1 STRATA_CO_DIR="$w/co-$v" "$@" timeout 30 "$pt" -test.v -test.timeout 28s -test.run "^$tst\$" >"$L/$name.log" 2>&1
		echo "$name exit $? at $((SECONDS - t0)) s"
		grep -E "^(floor|d2d|per launch|type|module|new |old |  .*bitwise|[a-z0-9]+ +(floor|[0-9]+x|experts|bitwise))" "$L/$name.log" >"$L/$name.txt"
	}
	local r
	for r in 1 2; do
		for v in $variants; do b "n1-$v-$r" "$v" TestBenchDecode STRATA_BENCH_NS=1 STRATA_BENCH_EXPERTS=0; done
	done
	save
	b full-N-1 N TestBenchDecode STRATA_BENCH_MMVQ_REF="$w/co-O"
	b full-O-1 O TestBenchDecode
	b full-N-2 N TestBenchDecode
	b full-O-2 O TestBenchDecode
	# n = 2–8 and the expert shapes of the types whose kernels D and Q change (XDOT and XQ6
	# reach the generic path too: spills or a different schedule would show there).
	b full-D-1 D TestBenchDecode STRATA_BENCH_TYPES=iq2xs,iq3xxs,iq3s,iq1m STRATA_BENCH_FLOORS=0
	b full-Q-1 Q TestBenchDecode STRATA_BENCH_TYPES=q6k STRATA_BENCH_FLOORS=0
	for r in 1 2; do b "moe-$r" N TestBenchMoeDecode STRATA_BENCH_MOE_MODS="old=$w/co-O"; done
	echo "benchmarks done at $((SECONDS - t0)) s"
	save
	# 2. Parity (correctness, parallel, fresh seeds) and the SASS pass loops, within the budget.
	local left=$((budget - (SECONDS - t0) - 12)) pids=() i=0 g
	if [ "$left" -lt 25 ]; then
		echo "no time left for parity ($left s)"
		left=0
	fi
	pgroup() { # pgroup VARIANT REGEXP
		echo "$1 $2" >"$L/parity-$i.group"
		env STRATA_CO_DIR="$w/co-$1" timeout "$left" "$pt" -test.v -test.timeout "$((left - 2))s" -test.run "TestParity/sm_90/$2/" >"$L/parity-$i.log" 2>&1 &
		pids+=($!)
		i=$((i + 1))
	}
	if [ "$left" -gt 0 ]; then
		# F16/BF16, Q8_0, Q2_0, Q4_K: their mmvq PTX is main's; run once on N all the same.
		for g in q80 q20 q4k q6k iq2xs iq3xxs iq3s iq1m f16 bf16; do pgroup N "mmvq/$g"; done
		pgroup N moe_decode
		pgroup N dequant
		pgroup D "mmvq/(iq2xs|iq3xxs)"
		pgroup D "mmvq/(iq3s|iq1m)"
		pgroup Q "mmvq/q6k"
		pgroup L "mmvq/q6k"
		pgroup H "mmvq/iq3s"
		pgroup S0 "mmvq/(iq2xs|iq3xxs|iq3s)"
	fi
	# SASS pass loops (GR = U·R group-rows a lane per pass, XW = activation stride).
	mhz=$(awk -F', ' '$2 ~ /MHz/ { sub(/ MHz/, "", $2); if ($2 + 0 > m) m = $2 + 0 } END { print m + 0 ? m : 1980 }' "$L/clocks.csv")
	d2d=$(awk '/^d2d copy 1 GiB/ { print $5; exit }' "$L/n1-N-1.txt")
	[ -n "$d2d" ] || d2d=4258
	sass() { # sass VARIANT GR XW
		timeout 20 cuobjdump -sass "$w/co-$1/sm_90/mmvq.cubin" >"$w/mmvq-$1.sass" 2>&1
		timeout 20 python3 "$d/passloop.py" "$w/mmvq-$1.sass" "$2" "$3" "$mhz" "$d2d" >"$L/passloop-$1.txt" 2>&1
		[ "$1" = O ] || [ "$1" = N ] && xz -c "$w/mmvq-$1.sass" >"$OUT/mmvq-$1.sass.xz"
	}
	for v in O N D Q L H S0 P; do sass $v 4 9; done
	[ ${#pids[@]} -gt 0 ] && wait "${pids[@]}"
	kill "$smi" 2>/dev/null
	echo "parity done at $((SECONDS - t0)) s (limit $left s)"
	save
	cat "$OUT/summary.txt"
}

summary() {
	local L=/tmp/vecrun/logs f
	cnt() { echo "passed $(cat "$@" | grep -cE '^\s*--- PASS: TestParity/.*/.*/.*/'), failed $(cat "$@" | grep -cE '^\s*--- FAIL: TestParity/.*/.*/.*/')"; }
	if ls "$L"/parity-*.log >/dev/null 2>&1; then
		echo "## parity: $(cnt "$L"/parity-*.log)"
		for f in "$L"/parity-*.log; do echo "- $(cat "${f%.log}.group"): $(cnt "$f")$(grep -qE 'panic|test timed out' "$f" && echo ' (panic/timeout)')"; done
		grep -hE "^\s*--- FAIL|panic:|test timed out" "$L"/parity-*.log | head -10
	fi
	echo "## ptxas (spills, registers)"
	for f in "$L"/ptxas-*-mmvq.txt "$L"/ptxas-*-moe_decode.txt; do [ -f "$f" ] && echo "$(basename "$f" .txt): $(grep -hE "spill" "$f" | sort | uniq -c | sort -rn | head -3 | paste -sd';') $(grep -hoE 'Used [0-9]+ registers' "$f" | sort | uniq -c | paste -sd';')"; done
	echo "## SM clock (MHz) during the run: $(awk -F', ' '{print $2}' "$L/clocks.csv" | sort | uniq -c | sort -rn | head -4 | paste -sd';')"
	if ls "$L"/passloop-*.txt >/dev/null 2>&1; then
		echo "## pass loops (device ptxas)"
		for f in "$L"/passloop-*.txt; do echo "--- $(basename "$f" .txt)"; cut -c1-112 "$f"; done
	fi
	echo "## n = 1, 4096x14336: type event-µs %d2d | graph-µs %d2d"
	grep -h "^d2d\|^floor: empty" "$L/n1-N-1.txt"
	for f in "$L"/n1-*.txt "$L"/full-*.txt; do [ -f "$f" ] && { echo "--- $(basename "$f" .txt)"; grep -E " 4096x14336 +1 | floor: d2d copy of its" "$f" | awk '{ if ($2 == "floor:") printf "%s copy %s %s | %s %s\n", $1, $9, $11, $14, $16; else printf "%s %s %s | %s %s\n", $1, $4, $6, $9, $11 }' | paste -sd';'; }; done
	echo "## mmvq N against O, bitwise (full-N-1)"
	grep -h "bitwise vs ref" "$L/full-N-1.txt" 2>/dev/null | awk '{ printf "%s %s %s/%s; ", $1, $6, $7, $9 } END { print "" }'
	echo "## moe_decode layer µs (old/new)"
	for f in "$L"/moe-*.txt; do [ -f "$f" ] && { echo "--- $(basename "$f" .txt)"; grep -E "^(new|old) " "$f" | awk '{ printf "%s %s %s layer %s 3+2 %s | ", $1, $2, $3, $(NF-8), $(NF-3) }'; echo; }; done
	echo "at $((SECONDS)) s of the shell"
}

case "${1:-run}" in
build) build ;;
run) run ;;
*) echo "usage: $0 build | run" >&2; exit 2 ;;
esac
