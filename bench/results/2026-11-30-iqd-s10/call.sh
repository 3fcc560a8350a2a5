#!/usr/bin/env bash
# Session 10, helper iqd (issue 6): mmq8x4g and mmq8x4h (mmq8x4n whose warps load each group's
# token fragments once for both row fragments) against mmq8x4n for IQ2_XS and IQ1_M on the
# H200, in one call. Trimmed from ../2026-11-30-iqc-s10/call.sh.
#
#   call.sh build   build machine, checkout root (clang-19, Go): parity.test (xz) and the sm_90
#                   PTX of mmq8x4n, mmq8x4g and mmq8x4h into $DEV (default /work/main/.dev-iqd);
#                   BASE (default: the declaration commit fdf01c8, by git archive): mmq, mmq8,
#                   mmq8c, mmq8cz, mmq8x4, mmq8x4p, mmq8x4l, mmq8x4n and moe_prefill's PTX is
#                   compared with BASE's (must be identical)
#   call.sh run     GPU machine, repository root of the device copy (carry .dev-iqd), $OUT set;
#                   BUDGET seconds in all (default 105). DRY=1: stubs, no GPU.
# One code-object tree A holds the three families, so one TestBenchPrefill process alternates
# them: STRATA_BENCH_ROUNDS=3 runs N G H N G H N G H (IQ2_XS and IQ1_M at 512 and 2048
# tokens), in up to three processes. Parity (STRATA_REQUIRE_GPU=1, fresh seeds): every mmq8x4g
# and mmq8x4h variant (28 cases). ncu (with the memory tables) of G and H IQ2_XS at 512 tokens
# if time is left.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
fams="mmq8x4n mmq8x4g mmq8x4h"

build() {
	set -e
	cd "$here/../../.."
	local d=${DEV:-/work/main/.dev-iqd} base=${BASE:-} target=sm_90 flags f
	if [ -z "$base" ]; then base=/tmp/iqd-base; rm -rf "$base" && mkdir -p "$base" && git archive fdf01c8 kernels/out/sm_90 kernels/out/include | tar -x -C "$base"; fi
	rm -rf "$d" && mkdir -p "$d/co"
	# No inlining and the x86 BCJ filter: 1.71 MB against 2.07 (the tracked tree leaves about
	# 1.9 MB of the 64 MiB a call carries).
	CGO_ENABLED=0 go test -c -trimpath -gcflags=all=-l -ldflags='-s -w' -tags strata_nodemo -o "$d/parity.test" ./parity
	xz --format=xz --x86 --lzma2=preset=9e,lc=3,lp=0,pb=0,nice=273 -T1 "$d/parity.test"
	flags=$(awk -F'\t' -v t="$target" '$1 == "target" && $2 == t { print $6 }' kernels/out/objects.txt)
	for f in mmq mmq8 mmq8c mmq8cz mmq8x4 mmq8x4p mmq8x4l mmq8x4n moe_prefill; do
		# shellcheck disable=SC2086
		clang-19 $flags -I "$base/kernels/out/$target" -I "$base/kernels/out/include" "$base/kernels/out/$target/$f.cu" -o "$d/co/$f-main.ptx" &
		# shellcheck disable=SC2086
		clang-19 $flags -I kernels/out/$target -I kernels/out/include kernels/out/$target/$f.cu -o "$d/co/$f-new.ptx" &
		wait
	done
	for f in mmq8x4g mmq8x4h; do
		# shellcheck disable=SC2086
		clang-19 $flags -I kernels/out/$target -I kernels/out/include kernels/out/$target/$f.cu -o "$d/co/$f.ptx"
	done
	for f in mmq mmq8 mmq8c mmq8cz mmq8x4 mmq8x4p mmq8x4l mmq8x4n moe_prefill; do
		cmp "$d/co/$f-main.ptx" "$d/co/$f-new.ptx" && echo "$f PTX: identical to $base's" | tee -a "$d/co/cmp.txt"
		rm "$d/co/$f-new.ptx"
		[ "$f" = mmq8x4n ] && mv "$d/co/$f-main.ptx" "$d/co/$f.ptx" || rm "$d/co/$f-main.ptx"
	done
	tar -C "$d" -cJf "$d/co.tar.xz" co && rm -r "$d/co"
	cp "$here/call.sh" "$d/"
	{ git rev-parse HEAD; git status --porcelain; echo "base $base"; } >"$d/commit"
	ls -la "$d"
	du -sh "$d"
}

run() {
	local d=$here w=/tmp/iqd-w t0=$SECONDS budget=${BUDGET:-105} dry=${DRY:-0}
	: "${OUT:?set OUT}"
	rm -rf "$w" && mkdir -p "$w/logs"
	local out=$w/logs pt=$w/parity.test sum=$OUT/summary.txt P N CO
	left() { echo $((budget - (SECONDS - t0) - $1)); }
	lim() { local l; l=$(left "$2"); [ "$l" -lt "$1" ] && echo $((l > 5 ? l : 5)) || echo "$1"; }
	echo "# call.sh run $(date -u +%FT%TZ) budget ${budget}s dry $dry commit $(head -1 "$d/commit" 2>/dev/null)" >"$sum"
	if [ "$dry" = 1 ]; then
		printf '#!/bin/sh\necho "stub $0 $*"; env | grep -E "^STRATA_(CO_DIR|BENCH_[A-Z]+)=" | sort; sleep 1\necho "--- PASS: TestParity/sm_90/x/y/z"\n[ -n "$STRATA_BENCH_OUT" ] && printf "ceiling x\\niq2xs_mma_r64t128w8 512 1 1 1%%\\n" >"$STRATA_BENCH_OUT/bench_prefill.txt"\necho PASS\n' >"$pt"
		chmod +x "$pt"
		mkdir -p "$w/co"
		for f in $fams; do printf '// %s\n' "$f" >"$w/co/$f.ptx"; done
		P=true N=true CO=true
	else
		tar -C "$w" -xJf "$d/co.tar.xz"
		python3 -c 'import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2], "wb"))' "$d/parity.test.xz" "$pt" && chmod +x "$pt"
		{ nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm,clocks.max.mem --format=csv; nproc; } >"$out/gpu.txt" 2>&1
		P=$(command -v ptxas || echo /usr/local/cuda/bin/ptxas)
		N=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
		CO=$(command -v cuobjdump || echo /usr/local/cuda/bin/cuobjdump)
	fi
	cat "$d/commit" "$w/co/cmp.txt" >"$out/commit" 2>/dev/null
	local f
	mkdir -p "$w/trees/A/sm_90"
	for f in $fams; do cp "$w/co/$f.ptx" "$w/trees/A/sm_90/$f.ptx"; done
	echo "- setup done at $((SECONDS - t0)) s" | tee -a "$sum"
	for f in "$w"/trees/A/sm_90/*.ptx; do
		("$P" -v -arch=sm_90 "$f" -o "${f%.ptx}.cubin" >"$f.ptxas.log" 2>&1 && mv "${f%.ptx}.cubin" "$f") &
	done
	wait
	echo "- ptxas done at $((SECONDS - t0)) s" | tee -a "$sum"
	for f in $fams; do "$CO" -sass "$w/trees/A/sm_90/$f.ptx" >"$out/sass-$f.txt" 2>&1; done
	export STRATA_REQUIRE_GPU=1 STRATA_CO_DIR=$w/trees/A
	local p1 pids=() i=0 g
	p1=$(lim 30 80)
	for g in "^mmq8x4g$/iq2xs" "^mmq8x4g$/iq1m" "^mmq8x4h$/iq2xs" "^mmq8x4h$/iq1m"; do
		echo "$g" >"$out/parity-$i.group"
		timeout "$p1" "$pt" -test.v -test.timeout "$((p1 - 3))s" -test.run "TestParity/sm_90/$g" >"$out/parity-$i.log" 2>&1 &
		pids+=($!)
		i=$((i + 1))
	done
	wait "${pids[@]}"
	echo "- parity done at $((SECONDS - t0)) s (limit $p1 s)" | tee -a "$sum"
	local n s
	for n in 1 2 3; do
		[ "$(left 40)" -lt 25 ] && break
		mkdir -p "$out/bench-$n"
		s=$SECONDS
		timeout "$(lim 40 30)" env STRATA_BENCH=1 STRATA_BENCH_ROUNDS=3 STRATA_BENCH_OUT="$out/bench-$n" STRATA_BENCH_FILTER='^(iq2xs|iq1m)_mma_r64t128w8$' \
			"$pt" -test.run '^TestBenchPrefill$' -test.v -test.timeout 100s >"$out/bench-$n.log" 2>&1
		echo "- bench $n: exit $? in $((SECONDS - s)) s ($((SECONDS - t0)) s so far)" | tee -a "$sum"
	done
	# ncu: NAME KERNEL VARIANT-FILTER (the first launch: 512 tokens)
	local tr
	for tr in "iq2xs-G strata_mmq8x4g_iq2xs_mma_r64t128w8 iq2xs_mma_r64t128w8" "iq2xs-H strata_mmq8x4h_iq2xs_mma_r64t128w8 iq2xs_mma_r64t128w8"; do
		set -- $tr
		[ "$(left 3)" -lt 12 ] && break
		s=$SECONDS
		STRATA_BENCH=1 STRATA_BENCH_FILTER="^$3\$" timeout "$(lim 20 3)" "$N" --clock-control none \
			--section SpeedOfLight --section MemoryWorkloadAnalysis_Tables --section WarpStateStats --section SchedulerStats --section Occupancy --section LaunchStats --section InstructionStats \
			--metrics smsp__inst_executed.sum,smsp__inst_executed_pipe_tensor_op_imma.sum,smsp__inst_executed_op_local_ld.sum,smsp__inst_executed_op_local_st.sum,smsp__inst_executed_pipe_fma.sum,smsp__inst_executed_pipe_alu.sum,smsp__inst_executed_op_shared_ld.sum,smsp__inst_executed_op_ldsm.sum,smsp__inst_executed_op_global_ld.sum \
			-k "regex:$2\$" -c 1 --kill yes -f -o "$w/ncu-$1" "$pt" -test.run '^TestBenchPrefill$' -test.v -test.timeout 100s >"$out/ncu-$1.log" 2>&1
		echo "- ncu $1: exit $? in $((SECONDS - s)) s ($((SECONDS - t0)) s so far)" | tee -a "$sum"
		[ -f "$w/ncu-$1.ncu-rep" ] && "$N" -i "$w/ncu-$1.ncu-rep" --page details --print-details all >"$out/ncu-$1.txt" 2>&1
	done
	cnt() { echo "passed $(cat "$@" | grep -cE '^\s*--- PASS: TestParity/.*/.*/.*/'), failed $(cat "$@" | grep -cE '^\s*--- FAIL: TestParity/.*/.*/.*/'), skipped $(cat "$@" | grep -cE '^\s*--- SKIP: TestParity/.*/.*/.*/')"; }
	{
		echo
		echo "## parity"
		echo "all: $(cnt "$out"/parity-*.log)"
		for f in "$out"/parity-*.log; do echo "- $(cat "${f%.log}.group"): $(cnt "$f") $(grep -E '^(ok|PASS|FAIL)$' "$f" | tr '\n' ' ')"; done
		grep -hE "^\s*--- FAIL|panic|test timed out|got .* want|worst" "$out"/parity-*.log | head -20
		echo
		echo "## ptxas (registers, spills)"
		for f in "$w"/trees/A/sm_90/*.ptxas.log; do
			grep -E "Compiling entry|registers|spill" "$f" | paste - - - 2>/dev/null | sed -E 's/ptxas info *: //g; s/\s+/ /g' | grep -E "mmq8x4[ngh]_" | sed "s|^|${f#"$w"/trees/}: |"
		done
		echo
		echo "## sass (static instruction counts per kernel)"
		for f in "$out"/sass-*.txt; do awk '/Function :/{fn=$3} /\/\*[0-9a-f]+\*\/ /{n[fn]++} END {for (k in n) print FILENAME": "k" "n[k]}' "$f"; done 2>/dev/null
		echo
		echo "## ncu (512 tokens, first launch)"
		for f in "$out"/ncu-*.txt; do echo "--- ${f#"$out"/}"; grep -E "Duration|Registers Per|Achieved Occupancy|Issued Warp|No Eligible|Eligible Warps|Warp Cycles Per Issued|Executed Instructions |smsp__inst_executed|L1/TEX Hit|Stall (Long|Short|Wait|Barrier|Not Sel|MIO|LG|Math|Dispatch)|Wavefronts|Bank Conflicts|Lsu" "$f" | sed -E 's/\s+/ /g' | head -60; done 2>/dev/null
		echo
		echo "## prefill TOPS (runs in order: each process N G H N G H N G H)"
		for f in "$out"/bench-*/bench_prefill.txt; do echo "--- ${f#"$out"/}"; grep -E "_mma_|ceiling|4096x14336" "$f"; done 2>/dev/null
		grep -hE "FAIL|panic" "$out"/bench-*.log | head
		echo "total: $((SECONDS - t0)) s"
	} >>"$sum"
	mkdir -p "$out/ptxas" && for f in "$w"/trees/A/sm_90/*.ptxas.log; do cp "$f" "$out/ptxas/$(basename "$f")"; done 2>/dev/null
	tar -C "$w" -czf "$OUT/logs.tgz" logs
	cat "$sum"
	true
}

case "${1:-run}" in
build) build ;;
run) run ;;
*) echo "usage: $0 build | run" >&2; exit 2 ;;
esac
