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

# ---- The JIT path (bench/results/2026-11-29-prefill-jit): the runtime loads PTX and the
# driver compiles it (cuModuleLoadDataEx, no options), which is how the engine runs. Each
# source runs with the parity.test of its own tree, so every kernel gets exactly the dynamic
# shared memory its own tree's launches pass (the old synchronous kernels: none).
#
#   prefill.sh jbuild DIR OLDREV   build machine: trees old (OLDREV), new (HEAD), a1 / a2
#                                  (HEAD with r64t64 asynchronous, one / two raw buffers):
#                                  a parity.test per tree, the sm_90 PTX, stripped per group,
#                                  each new tree's dynamic shared bytes per symbol (dyn-*.txt)
#   prefill.sh jgpu DIR            GPU machine, $OUT set: ptxas cubins of groups OC and NC in
#                                  the background; jitinfo.py (registers, spills, blocks per
#                                  SM as the driver's JIT compiles); parity of every mmq and
#                                  moe_prefill variant of new and of a1/a2's r64t64 mma;
#                                  TestBenchPrefill per group; intmm.py; tables to stdout
#   STRATA_DRY=1 prefill.sh jgpu   the same flow with stubs (no GPU)
jgroups() {
	# bench groups: name  tree  form (ptx = the driver's JIT, cubin = ptxas)  variant regex
	printf '%s\n' "OJ old ptx _mma_" "NJ new ptx _mma_" "A1J a1 ptx _mma_r64t64\$" "A2J a2 ptx _mma_r64t64\$" \
		"NC new cubin _mma_" "OC old cubin _mma_" |
		awk -v keep="${JGROUPS:-}" 'BEGIN { n = split(keep, k, ","); for (i = 1; i <= n; i++) want[k[i]] = 1 } n == 0 || ($1 in want)'
}

jbuild() {
	local dev=${1:?DIR} old=${2:?OLDREV}
	set -e
	rm -rf "$dev" && mkdir -p "$dev"
	local tmp flags src f
	tmp=$(mktemp -d)
	flags=$(awk -F'\t' '$1 == "target" && $2 == "sm_90" { print $6 }' kernels/out/objects.txt)
	for src in old new a1 a2; do
		mkdir -p "$tmp/$src"
		if [ $src = old ]; then git archive "$old" | tar -x -C "$tmp/$src"; else git archive HEAD | tar -x -C "$tmp/$src"; fi
	done
	sed -i 's/^var mmqAsyncTileBufs = map\[string\]int{/&"r64t64": 1, /' "$tmp/a1/kernels/prefill.go"
	sed -i 's/^var mmqAsyncTileBufs = map\[string\]int{/&"r64t64": 2, /' "$tmp/a2/kernels/prefill.go"
	for src in a1 a2; do
		grep -q "\"r64t64\": ${src#a}," "$tmp/$src/kernels/prefill.go"
		(cd "$tmp/$src" && go run ./gen)
	done
	for src in old new a1 a2; do
		(cd "$tmp/$src" && CGO_ENABLED=0 go test -c -trimpath -ldflags=-s -o "$dev/bin-$src.test" ./parity) && xz -T2 "$dev/bin-$src.test"
		for f in mmq moe_prefill; do
			# shellcheck disable=SC2086 # flags are a list
			(cd "$tmp/$src" && clang-19 $flags -I kernels/out/sm_90 -I kernels/out/include "kernels/out/sm_90/$f.cu" -o "$tmp/$src/$f.ptx") &
		done
		wait
		if [ $src != old ]; then
			mkdir -p "$tmp/$src/dynprint"
			printf '%s\n' 'package main' 'import ("fmt"; "github.com/strata-hip/strata/kernels")' 'func main() {' \
				'	t, _ := kernels.LookupTarget("sm_90")' '	for _, fam := range []string{"mmq", "moe_prefill"} {' \
				'		s, _ := kernels.LookupSpec(fam)' '		for _, v := range s.AllVariants() {' \
				'			if n := t.MmqDynShared(fam, v); n > 0 { fmt.Println(s.Symbol(v), n) }' '		}' '	}' '}' >"$tmp/$src/dynprint/main.go"
			(cd "$tmp/$src" && go run ./dynprint) >"$dev/dyn-$src.txt"
		fi
	done
	grep -c "NB = 1" "$tmp/a1/kernels/out/sm_90/mmq.cu" "$tmp/a2/kernels/out/sm_90/mmq.cu"
	local strip=bench/results/2026-11-29-prefill-async/strip_ptx.py g tree form re op tile
	while read -r g tree form re; do
		mkdir -p "$dev/g/$g/sm_90"
		for f in mmq moe_prefill; do python3 "$strip" "$tmp/$tree/$f.ptx" "$dev/g/$g/sm_90/$f.ptx" "$re"; done
	done < <(jgroups)
	# parity groups: new, one (family, op, tile) each; a1 / a2: r64t64 mma
	for f in mmq moe_prefill; do
		for op in mma dp4a; do
			for tile in $(grep -oE "strata_${f}_[a-z0-9]+_${op}_r[0-9]+t[0-9]+" "$tmp/new/$f.ptx" | sed -E 's/.*_//' | sort -u); do
				mkdir -p "$dev/g/P-$f-$op-$tile/sm_90"
				python3 "$strip" "$tmp/new/$f.ptx" "$dev/g/P-$f-$op-$tile/sm_90/$f.ptx" "_${op}_${tile}\$"
			done
		done
		for src in a1 a2; do
			mkdir -p "$dev/g/P$src-$f-mma-r64t64/sm_90"
			python3 "$strip" "$tmp/$src/$f.ptx" "$dev/g/P$src-$f-mma-r64t64/sm_90/$f.ptx" "_mma_r64t64\$"
		done
		# jitinfo: the r128t64 mma kernels of old and new, and a1's r64t64
		mkdir -p "$dev/g/J"
		python3 "$strip" "$tmp/old/$f.ptx" "$dev/g/J/old-$f.ptx" "_mma_r128t64\$"
		python3 "$strip" "$tmp/new/$f.ptx" "$dev/g/J/new-$f.ptx" "_mma_r128t64\$"
		python3 "$strip" "$tmp/a1/$f.ptx" "$dev/g/J/a1-$f.ptx" "_mma_r64t64\$"
	done
	rm -rf "$tmp"
	cp bench/device/intmm.py bench/device/prefill.sh bench/results/2026-11-29-prefill-jit/jitinfo.py "$dev/"
	{ git rev-parse HEAD; git status --porcelain; echo "old $old"; } >"$dev/commit"
	tar -C "$dev" -cJf "$dev/g.tar.xz" g && rm -r "$dev/g"
	du -sh "$dev"
}

jgpu() {
	local dev=${1:?DIR} dry=${STRATA_DRY:-0} t0=$SECONDS budget=${JBUDGET:-190}
	local final=${OUT:?set OUT} work=/tmp/strata-jit
	lim() {
		local l=$((budget - (SECONDS - t0) - $2))
		l=$((l < $1 ? l : $1))
		echo $((l < 1 ? 1 : l))
	}
	rm -rf "$work" && mkdir -p "$work"
	tar -C "$dev" -xJf "$dev/g.tar.xz"
	local src
	for src in old new a1 a2; do
		[ -x "$dev/bin-$src.test" ] || { xz -dk "$dev/bin-$src.test.xz" && chmod +x "$dev/bin-$src.test"; }
	done
	export CUDA_CACHE_PATH=/tmp/strata-jit-cache CUDA_CACHE_MAXSIZE=4294967296 STRATA_REQUIRE_GPU=1
	rm -rf "$CUDA_CACHE_PATH"
	local p py=python3
	p=$(command -v ptxas || echo /usr/local/cuda/bin/ptxas)
	[ "$dry" = 1 ] && p=true && py=true
	{ nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm,clocks.max.mem --format=csv; "$p" --version; } >"$work/gpu.txt" 2>&1
	local g tree form re f
	# cubins (background): the PTX kept as .ptx.src for cuobjdump comparisons
	while read -r g tree form re; do
		[ "$form" = cubin ] || continue
		for f in mmq moe_prefill; do
			(cp "$dev/g/$g/sm_90/$f.ptx" "$work/$g-$f.ptx.src"
				timeout "$(lim 70 100)" "$p" -arch=sm_90 -v "$dev/g/$g/sm_90/$f.ptx" -o "$work/$g-$f.cubin" >"$work/ptxas-$g-$f.log" 2>&1
				echo "exit $?" >>"$work/ptxas-$g-$f.log"
				grep -E "entry function|spill|Used" "$work/ptxas-$g-$f.log" | paste - - - |
					sed -E "s/ptxas info *: //g; s/Compiling entry function //; s/ for 'sm_90'//" >"$work/ptxas-$g-$f.txt"
				[ -s "$work/$g-$f.cubin" ] && cp "$work/$g-$f.cubin" "$dev/g/$g/sm_90/$f.ptx") &
		done
	done < <(jgroups)
	# the driver's JIT: registers, spills, occupancy (old kernels also at new's dynamic bytes)
	(for f in mmq moe_prefill; do
		timeout 30 $py "$dev/jitinfo.py" "$dev/g/J/old-$f.ptx" "$dev/dyn-new.txt" "$work/jit-old-$f.cubin"
		timeout 30 $py "$dev/jitinfo.py" "$dev/g/J/new-$f.ptx" "$dev/dyn-new.txt" "$work/jit-new-$f.cubin"
		timeout 30 $py "$dev/jitinfo.py" "$dev/g/J/a1-$f.ptx" "$dev/dyn-a1.txt"
	done >"$work/jitinfo.txt" 2>&1) &
	local s=$SECONDS pl d b ot
	pl=$(lim "${PLIMIT:-55}" 120)
	for d in "$dev"/g/P*; do
		g=$(basename "$d")
		f=${g#P*-}; f=${f%-*-*}
		b=new ot=${g#P*-"$f"-}
		case $g in Pa1-*) b=a1 ;; Pa2-*) b=a2 ;; esac
		(STRATA_CO_DIR=$PWD/$d timeout "$pl" "$dev/bin-$b.test" -test.v -test.timeout "$((pl - 2))s" \
			-test.run "TestParity/sm_90/$f/[a-z0-9]+_${ot/-/_}\$" >"$work/parity-$g.log" 2>&1) &
	done
	wait
	echo "ptxas + jitinfo + parity: $((SECONDS - s)) s"
	bench() {
		local g=$1 tree=$2 re=$3 bl
		bl=$(lim "${BLIMIT:-30}" "$4")
		[ "$bl" -gt 5 ] || { echo "bench $g: skipped (budget)"; return; }
		s=$SECONDS
		mkdir -p "$work/bench-$g"
		STRATA_CO_DIR=$PWD/$dev/g/$g STRATA_BENCH=1 STRATA_BENCH_OUT="$work/bench-$g" STRATA_BENCH_FILTER="$re" \
			timeout "$bl" "$dev/bin-$tree.test" -test.v -test.timeout "${bl}s" -test.run TestBenchPrefill >"$work/bench-$g.log" 2>&1 </dev/null
		echo "bench $g: exit $? in $((SECONDS - s)) s (limit $bl)"
	}
	local n=0 left
	left=$(jgroups | wc -l)
	while read -r g tree form re; do
		left=$((left - 1))
		bench "$g" "$tree" "$re" $((10 * left + 8))
		n=$((n + 1))
		if [ $n = "${INTMM_AFTER:-2}" ]; then
			s=$SECONDS
			PYTHONUNBUFFERED=1 timeout "$(lim "${ILIMIT:-25}" $((10 * left)))" $py "$dev/intmm.py" "$work/intmm.txt" >"$work/intmm.log" 2>&1 </dev/null
			echo "intmm: exit $? in $((SECONDS - s)) s"
		fi
	done < <(jgroups)
	# SASS size per kernel: ptxas cubin vs the driver's JIT cubin (r128t64 mma)
	local cdump
	cdump=$(command -v cuobjdump || echo /usr/local/cuda/bin/cuobjdump)
	[ "$dry" = 1 ] && cdump=true
	for f in mmq moe_prefill; do
		for c in "$work/NC-$f.cubin" "$work/jit-new-$f.cubin" "$work/OC-$f.cubin" "$work/jit-old-$f.cubin"; do
			[ -s "$c" ] || continue
			timeout 20 "$cdump" -sass "$c" 2>/dev/null | awk -v c="$(basename "$c")" '/Function :/ { fn = $3 } /\/\*[0-9a-f]{4}\*\// && fn ~ /r128t64/ { n[fn]++ } END { for (k in n) print c, k, n[k], "SASS instructions" }' | sort
			timeout 20 "$cdump" -res-usage "$c" 2>/dev/null | grep -A1 "r128t64" | paste - - | sed -E 's/ +/ /g' | sed "s|^|$(basename "$c") |" | head -16
		done
	done >"$work/sass.txt" 2>&1
	echo "total $((SECONDS - t0)) s"
	cat "$work/gpu.txt"
	for l in "$work"/parity-*.log; do
		echo "$(basename "$l" .log): passed $(grep -cE '^\s*--- PASS: TestParity/.*/.*/.*/' "$l"), failed $(grep -cE '^\s*--- FAIL: TestParity/.*/.*/.*/' "$l")," \
			"$(grep -E '^(ok|FAIL|PASS)$|no tests to run' "$l" | tr '\n' ' ')"
		grep -E "^\s*--- FAIL|panic:|timed out" "$l" | head -6
	done
	grep -E "^==|jit-log .*(q80|iq2xs)|attr .*(q80|q20|iq2xs)" "$work/jitinfo.txt" | head -40
	for g in $(jgroups | cut -d' ' -f1); do
		echo "== bench $g"
		cat "$work/bench-$g/bench_prefill.txt" 2>/dev/null || tail -15 "$work/bench-$g.log"
	done
	cat "$work/intmm.txt" 2>/dev/null || tail -20 "$work/intmm.log"
	rm -f "$work"/*.cubin "$work"/*.ptx.src
	tar czf "$final/jit-logs.tgz" -C "$work" .
	true
}

case ${1:-} in
build) shift; build "$@" ;;
gpu) shift; gpu "$@" ;;
abuild) shift; abuild "$@" ;;
agpu) shift; agpu "$@" ;;
jbuild) shift; jbuild "$@" ;;
jgpu) shift; jgpu "$@" ;;
*) echo "usage: $0 build [DIR] | gpu [DIR] | abuild DIR OLDREV | agpu DIR | jbuild DIR OLDREV | jgpu DIR" >&2; exit 2 ;;
esac
