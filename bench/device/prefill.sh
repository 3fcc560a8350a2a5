#!/usr/bin/env bash
# Prefill kernels (mmq, moe_prefill) on a GPU machine, in two halves like run.sh:
#
#   bench/device/prefill.sh build [DIR]   build machine (Go + clang-19): parity.test and the
#                                         sm_90 mmq / moe_prefill PTX (as objects.txt says)
#                                         into DIR (default .dev)
#   bench/device/prefill.sh gpu [DIR]     GPU machine, repository root, DIR as built:
#                                         1. ptxas -v of both PTX files (registers, spills),
#                                            in the background;
#                                         2. parity of mmq and moe_prefill, one process per
#                                            family × op × tile in parallel, fresh seeds,
#                                            STRATA_REQUIRE_GPU=1, each under PLIMIT s;
#                                         3. TestBenchPrefill alone (under BLIMIT s;
#                                            STRATA_BENCH_FILTER passes through);
#                                         4. bench/device/intmm.py: torch._int_mm (cuBLASLt) on
#                                            the same shapes, alone.
#                                         Tables to stdout; $OUT gets the tables and one
#                                         archive of every log.
set -uo pipefail
cd "$(dirname "$0")/../.."

build() {
	local dev=${1:-.dev}
	set -e
	mkdir -p "$dev/co/sm_90"
	CGO_ENABLED=0 go test -c -o "$dev/parity.test" ./parity
	local flags
	flags=$(awk -F'\t' '$1 == "target" && $2 == "sm_90" { print $6 }' kernels/out/objects.txt)
	for f in mmq moe_prefill; do
		# shellcheck disable=SC2086 # flags are a list
		clang-19 $flags -I kernels/out/sm_90 -I kernels/out/include "kernels/out/sm_90/$f.cu" -o "$dev/co/sm_90/$f.ptx" &
	done
	wait
	cp bench/device/intmm.py "$dev/"
}

gpu() {
	local dev=${1:-.dev}
	local final=${OUT:-$dev/out} work=/tmp/strata-prefill
	mkdir -p "$final" "$work"
	export STRATA_CO_DIR=$PWD/$dev/co STRATA_REQUIRE_GPU=1
	export CUDA_CACHE_PATH=/tmp/strata-cuda-cache CUDA_CACHE_MAXSIZE=4294967296
	nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm,clocks.max.mem --format=csv >"$work/gpu.txt" 2>&1
	local p
	p=$(command -v ptxas || echo /usr/local/cuda/bin/ptxas)
	for f in mmq moe_prefill; do
		(timeout 300 "$p" -arch=sm_90 -v "$dev/co/sm_90/$f.ptx" -o /dev/null 2>&1 | grep -E "entry function|spill|Used" | paste - - - |
			sed -E "s/ptxas info *: //g; s/Compiling entry function //; s/ for 'sm_90'//" >"$work/ptxas-$f.txt") &
	done
	local s=$SECONDS
	local fam op tile
	for fam in mmq moe_prefill; do
		for op in mma dp4a; do
			for tile in r64t64 r128t64 r64t128 r128t32; do
				timeout "${PLIMIT:-120}" "$dev/parity.test" -test.v -test.count "${PCOUNT:-1}" -test.timeout "$((${PLIMIT:-120} - 5))s" \
					-test.run "TestParity/sm_90/$fam/[a-z0-9]+_${op}_${tile}\$" >"$work/parity-$fam-$op-$tile.log" 2>&1 &
			done
		done
	done
	wait
	echo "parity + ptxas: $((SECONDS - s)) s"
	s=$SECONDS
	STRATA_BENCH=1 STRATA_BENCH_OUT="$work" timeout "${BLIMIT:-150}" "$dev/parity.test" -test.v -test.timeout "${BLIMIT:-150}s" \
		-test.run TestBenchPrefill >"$work/bench-prefill.log" 2>&1
	echo "bench: exit $? in $((SECONDS - s)) s"
	s=$SECONDS
	PYTHONUNBUFFERED=1 timeout "${ILIMIT:-60}" python3 "$dev/intmm.py" "$work/intmm.txt" >"$work/intmm.log" 2>&1 </dev/null
	echo "intmm: exit $? in $((SECONDS - s)) s"
	cat "$work/gpu.txt"
	for l in "$work"/parity-*.log; do
		echo "$(basename "$l" .log): passed $(grep -cE '^\s*--- PASS: TestParity/.*/.*/.*/' "$l"), failed $(grep -cE '^\s*--- FAIL: TestParity/.*/.*/.*/' "$l")," \
			"$(grep -E '^(ok|FAIL|PASS)$|no tests to run' "$l" | tr '\n' ' ')"
		grep -E "^\s*--- FAIL|panic:|timed out" "$l" | head -8
	done
	cat "$work"/ptxas-*.txt
	cat "$work/bench_prefill.txt" 2>/dev/null || tail -30 "$work/bench-prefill.log"
	cat "$work/intmm.txt" 2>/dev/null || tail -20 "$work/intmm.log"
	tar czf "$final/prefill-logs.tgz" -C "$work" .
	cp "$work"/{bench_prefill.txt,intmm.txt,ptxas-mmq.txt,ptxas-moe_prefill.txt} "$final"/ 2>/dev/null
	true
}

# ---- Asynchronous staging (bench/results/2026-11-29-prefill-async): the NVIDIA mma variants
# only, in groups of one tile per family, each group's PTX stripped to its kernels and turned
# into a cubin by ptxas on the GPU machine (in parallel; -v gives registers and spills), so
# that no process JIT-compiles a large module.
#
#   prefill.sh abuild DIR OLDREV   build machine: parity.test (xz), the sm_90 PTX of this tree
#                                  (groups A, B, C) and of commit OLDREV's committed sources
#                                  (groups OB, OC: the synchronous core, for before/after in
#                                  the same run), intmm.py, this script; DIR is wiped first
#   prefill.sh agpu DIR            GPU machine, repository root, $OUT set: ptxas, parity of
#                                  groups A–C, TestBenchPrefill per group (A, B, C, OB, OC),
#                                  intmm.py; the tables to stdout, logs to $OUT
#   STRATA_DRY=1 prefill.sh agpu   the same flow with stubs (no GPU): checks the script
agroups() {
	# name  source  mmq tile  moe_prefill tile; sources: new = this tree, old = OLDREV's
	# committed sources, nb1 = this tree with one raw buffer everywhere (mmqDynLimit 0).
	# AGROUPS=B,C,... keeps only the groups named.
	printf '%s\n' "A new r64t64 r64t64" "B new r128t64 r128t64" "C new r64t128 r128t32" \
		"OB old r128t64 r128t64" "OC old r64t128 r128t32" "D nb1 r128t64 r128t64" |
		awk -v keep="${AGROUPS:-}" 'BEGIN { n = split(keep, k, ","); for (i = 1; i <= n; i++) want[k[i]] = 1 } n == 0 || ($1 in want)'
}

abuild() {
	local dev=${1:?DIR} old=${2:?OLDREV}
	set -e
	rm -rf "$dev" && mkdir -p "$dev"
	local tmp
	tmp=$(mktemp -d)
	CGO_ENABLED=0 go test -c -trimpath -ldflags=-s -o "$dev/parity.test" ./parity
	xz -T2 "$dev/parity.test"
	local flags
	flags=$(awk -F'\t' '$1 == "target" && $2 == "sm_90" { print $6 }' kernels/out/objects.txt)
	mkdir -p "$tmp/new" "$tmp/old" "$tmp/nb1"
	git archive "$old" kernels/out | tar -x -C "$tmp/old"
	cp -r go.mod go.sum gen kernels "$tmp/nb1/"
	sed -i 's/^\(\tmmqDynLimit *= \).*/\10/' "$tmp/nb1/kernels/prefill.go"
	(cd "$tmp/nb1" && go run ./gen)
	local v
	for f in mmq moe_prefill; do
		for v in new old nb1; do
			# shellcheck disable=SC2086 # flags are a list
			if [ $v = new ]; then
				clang-19 $flags -I kernels/out/sm_90 -I kernels/out/include "kernels/out/sm_90/$f.cu" -o "$tmp/new/$f.ptx" &
			else
				(cd "$tmp/$v" && clang-19 $flags -I kernels/out/sm_90 -I kernels/out/include "kernels/out/sm_90/$f.cu" -o "$tmp/$v/$f.ptx") &
			fi
		done
	done
	wait
	grep -c "NB = 1" "$tmp/nb1/kernels/out/sm_90/mmq.cu"
	local strip=bench/results/2026-11-29-prefill-async/strip_ptx.py g src tm tp
	while read -r g src tm tp; do
		mkdir -p "$dev/g/$g/sm_90"
		python3 "$strip" "$tmp/$src/mmq.ptx" "$dev/g/$g/sm_90/mmq.ptx" "_mma_${tm}\$"
		python3 "$strip" "$tmp/$src/moe_prefill.ptx" "$dev/g/$g/sm_90/moe_prefill.ptx" "_mma_${tp}\$"
	done < <(agroups)
	rm -rf "$tmp"
	cp bench/device/intmm.py bench/device/prefill.sh "$dev/"
	{ git rev-parse HEAD; git status --porcelain; echo "old $old"; } >"$dev/commit"
	tar -C "$dev" -cJf "$dev/g.tar.xz" g && rm -r "$dev/g"
	du -sh "$dev"
}

agpu() {
	local dev=${1:?DIR} dry=${STRATA_DRY:-0} t0=$SECONDS budget=${ABUDGET:-185}
	local final=${OUT:?set OUT} work=/tmp/strata-async
	# lim MAX RESERVE: MAX, or less so that RESERVE seconds of the budget stay for later steps
	lim() {
		local l=$((budget - (SECONDS - t0) - $2))
		l=$((l < $1 ? l : $1))
		echo $((l < 1 ? 1 : l))
	}
	rm -rf "$work" && mkdir -p "$work"
	tar -C "$dev" -xJf "$dev/g.tar.xz"
	[ -x "$dev/parity.test" ] || { xz -dk "$dev/parity.test.xz" && chmod +x "$dev/parity.test"; }
	local p
	p=$(command -v ptxas || echo /usr/local/cuda/bin/ptxas)
	[ "$dry" = 1 ] && p=true
	nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm,clocks.max.mem --format=csv >"$work/gpu.txt" 2>&1
	local g src tm tp f
	while read -r g src tm tp; do
		for f in mmq moe_prefill; do
			(timeout "$(lim "${XLIMIT:-45}" 130)" "$p" -arch=sm_90 -v "$dev/g/$g/sm_90/$f.ptx" -o "$dev/g/$g/sm_90/$f.cubin" >"$work/ptxas-$g-$f.log" 2>&1
				echo "exit $?" >>"$work/ptxas-$g-$f.log"
				grep -E "entry function|spill|Used" "$work/ptxas-$g-$f.log" | paste - - - |
					sed -E "s/ptxas info *: //g; s/Compiling entry function //; s/ for 'sm_90'//" >"$work/ptxas-$g-$f.txt"
				# the cubin replaces the PTX under the name the code-object table gives
				[ -s "$dev/g/$g/sm_90/$f.cubin" ] && mv "$dev/g/$g/sm_90/$f.cubin" "$dev/g/$g/sm_90/$f.ptx") &
		done
	done < <(agroups)
	wait
	echo "ptxas: $((SECONDS - t0)) s"
	export STRATA_REQUIRE_GPU=1
	local s=$SECONDS pl
	pl=$(lim "${PLIMIT:-45}" 95)
	while read -r g src tm tp; do
		[ "$src" = new ] || continue
		for f in mmq:$tm moe_prefill:$tp; do
			(STRATA_CO_DIR=$PWD/$dev/g/$g timeout "$pl" "$dev/parity.test" -test.v -test.timeout "$((pl - 2))s" \
				-test.run "TestParity/sm_90/${f%%:*}/[a-z0-9]+_mma_${f#*:}\$" >"$work/parity-$g-${f%%:*}.log" 2>&1) &
		done
	done < <(agroups)
	wait
	echo "parity: $((SECONDS - s)) s"
	# The new groups, the cuBLASLt ceiling, then the old groups (before/after), each under
	# what the budget leaves (reserves: the later steps' shares).
	bench() {
		local g=$1 tm=$2 tp=$3 bl
		bl=$(lim "${BLIMIT:-25}" "$4")
		[ "$bl" -gt 5 ] || { echo "bench $g: skipped (budget)"; return; }
		s=$SECONDS
		mkdir -p "$work/bench-$g"
		STRATA_CO_DIR=$PWD/$dev/g/$g STRATA_BENCH=1 STRATA_BENCH_OUT="$work/bench-$g" STRATA_BENCH_FILTER="_mma_(${tm}|${tp})\$" \
			timeout "$bl" "$dev/parity.test" -test.v -test.timeout "${bl}s" -test.run TestBenchPrefill >"$work/bench-$g.log" 2>&1 </dev/null
		echo "bench $g: exit $? in $((SECONDS - s)) s (limit $bl)"
	}
	local n=0 left
	left=$(agroups | wc -l)
	while read -r g src tm tp; do
		left=$((left - 1))
		bench "$g" "$tm" "$tp" $((12 * left + 10))
		n=$((n + 1))
		if [ $n = "${INTMM_AFTER:-2}" ]; then
			s=$SECONDS
			PYTHONUNBUFFERED=1 timeout "$(lim "${ILIMIT:-25}" $((12 * left)))" python3 "$dev/intmm.py" "$work/intmm.txt" >"$work/intmm.log" 2>&1 </dev/null
			echo "intmm: exit $? in $((SECONDS - s)) s"
		fi
	done < <(agroups)
	echo "total $((SECONDS - t0)) s"
	cat "$work/gpu.txt"
	for l in "$work"/parity-*.log; do
		echo "$(basename "$l" .log): passed $(grep -cE '^\s*--- PASS: TestParity/.*/.*/.*/' "$l"), failed $(grep -cE '^\s*--- FAIL: TestParity/.*/.*/.*/' "$l")," \
			"$(grep -E '^(ok|FAIL|PASS)$|no tests to run' "$l" | tr '\n' ' ')"
		grep -E "^\s*--- FAIL|panic:|timed out" "$l" | head -6
	done
	for l in "$work"/ptxas-*.txt; do echo "== $(basename "$l" .txt)"; cat "$l"; done
	for g in $(agroups | cut -d' ' -f1); do
		echo "== bench $g"
		cat "$work/bench-$g/bench_prefill.txt" 2>/dev/null || tail -15 "$work/bench-$g.log"
	done
	cat "$work/intmm.txt" 2>/dev/null || tail -20 "$work/intmm.log"
	tar czf "$final/async-logs.tgz" -C "$work" .
	true
}

case ${1:-} in
build) shift; build "$@" ;;
gpu) shift; gpu "$@" ;;
abuild) shift; abuild "$@" ;;
agpu) shift; agpu "$@" ;;
*) echo "usage: $0 build [DIR] | gpu [DIR] | abuild DIR OLDREV | agpu DIR" >&2; exit 2 ;;
esac
