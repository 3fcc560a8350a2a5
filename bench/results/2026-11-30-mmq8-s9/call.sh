#!/usr/bin/env bash
# Session 9, helper mmq8 (issue 6): mmq8 (O) against mmq8c (C: compact scale tiles), mmq8cz
# (CZ: mmq8c without the edge zeroing) and mmq8cp (CP: mmq8cz plus the L1 prefetch of the next
# K step) for Q8_0 and Q2_0 on the H200, in one call. Trimmed from ../2026-11-30-mmqs2-s8/call.sh.
#
#   call.sh build   build machine, checkout root (clang-19, Go): parity.test (xz) and the sm_90
#                   PTX of mmq8, mmq8c, mmq8cz, mmq8cp into $DEV (default /work/main/.dev-mmq8);
#                   BASE (default /work/main): mmq, mmq8, mmq8x4, mmq8x4p and moe_prefill's
#                   PTX is compared with BASE's (must be identical)
#   call.sh run     GPU machine, repository root of the device copy (carry .dev-mmq8), $OUT set;
#                   BUDGET seconds in all (default 180). DRY=1: stubs, no GPU.
# One code-object tree A holds all four families (assembled by ptxas before anything runs),
# so one TestBenchPrefill process alternates them: STRATA_BENCH_ROUNDS=3 runs O C CZ CP three
# times in turn (Q8_0 and Q2_0 at 512 and 2048 tokens), in two processes; then once every
# mmq8 type (control against earlier sessions). Parity (STRATA_REQUIRE_GPU=1, fresh seeds):
# every mmq8c, mmq8cz and mmq8cp variant and mmq8's Q8_0 and Q2_0. ncu of Q8_0 CZ and O at
# 512 tokens if time is left.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
fams="mmq8 mmq8c mmq8cz mmq8cp"

build() {
	set -e
	cd "$here/../../.."
	local d=${DEV:-/work/main/.dev-mmq8} base=${BASE:-/work/main} target=sm_90 flags f
	rm -rf "$d" && mkdir -p "$d/co"
	CGO_ENABLED=0 go test -c -trimpath -ldflags=-s -tags strata_nodemo -o "$d/parity.test" ./parity
	xz -9e -T2 "$d/parity.test"
	flags=$(awk -F'\t' -v t="$target" '$1 == "target" && $2 == t { print $6 }' kernels/out/objects.txt)
	for f in mmq mmq8 mmq8x4 mmq8x4p moe_prefill; do
		# shellcheck disable=SC2086
		clang-19 $flags -I "$base/kernels/out/$target" -I "$base/kernels/out/include" "$base/kernels/out/$target/$f.cu" -o "$d/co/$f-main.ptx" &
		# shellcheck disable=SC2086
		clang-19 $flags -I kernels/out/$target -I kernels/out/include kernels/out/$target/$f.cu -o "$d/co/$f-new.ptx" &
	done
	for f in mmq8c mmq8cz mmq8cp; do
		# shellcheck disable=SC2086
		clang-19 $flags -I kernels/out/$target -I kernels/out/include kernels/out/$target/$f.cu -o "$d/co/$f.ptx" &
	done
	wait
	for f in mmq mmq8 mmq8x4 mmq8x4p moe_prefill; do
		cmp "$d/co/$f-main.ptx" "$d/co/$f-new.ptx" && echo "$f PTX: identical to $base's" | tee -a "$d/co/cmp.txt"
		rm "$d/co/$f-new.ptx"
		[ "$f" = mmq8 ] && mv "$d/co/$f-main.ptx" "$d/co/$f.ptx" || rm "$d/co/$f-main.ptx"
	done
	tar -C "$d" -cJf "$d/co.tar.xz" co && rm -r "$d/co"
	cp "$here/call.sh" "$d/"
	{ git rev-parse HEAD; git status --porcelain; git -C "$base" rev-parse HEAD; } >"$d/commit"
	ls -la "$d"
	du -sh "$d"
}

run() {
	local d=$here w=/tmp/mmq8-w t0=$SECONDS budget=${BUDGET:-180} dry=${DRY:-0}
	: "${OUT:?set OUT}"
	rm -rf "$w" && mkdir -p "$w/logs"
	local out=$w/logs pt=$w/parity.test sum=$OUT/summary.txt P N
	left() { echo $((budget - (SECONDS - t0) - $1)); }
	lim() { local l; l=$(left "$2"); [ "$l" -lt "$1" ] && echo $((l > 5 ? l : 5)) || echo "$1"; }
	echo "# call.sh run $(date -u +%FT%TZ) budget ${budget}s dry $dry commit $(head -1 "$d/commit" 2>/dev/null)" >"$sum"
	if [ "$dry" = 1 ]; then
		printf '#!/bin/sh\necho "stub $0 $*"; env | grep -E "^STRATA_(CO_DIR|BENCH_[A-Z]+)=" | sort; sleep 1\necho "--- PASS: TestParity/sm_90/x/y/z"\n[ -n "$STRATA_BENCH_OUT" ] && printf "ceiling x\\nq80_mma_r64t128w8 512 1 1 1%%\\n" >"$STRATA_BENCH_OUT/bench_prefill.txt"\necho PASS\n' >"$pt"
		chmod +x "$pt"
		mkdir -p "$w/co"
		for f in $fams; do printf '// %s\n' "$f" >"$w/co/$f.ptx"; done
		P=true N=true
	else
		tar -C "$w" -xJf "$d/co.tar.xz"
		python3 -c 'import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2], "wb"))' "$d/parity.test.xz" "$pt" && chmod +x "$pt"
		{ nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm,clocks.max.mem --format=csv; nproc; } >"$out/gpu.txt" 2>&1
		P=$(command -v ptxas || echo /usr/local/cuda/bin/ptxas)
		N=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
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
	export STRATA_REQUIRE_GPU=1 STRATA_CO_DIR=$w/trees/A
	local p1 pids=() i=0 g
	p1=$(lim 40 110)
	for g in "^mmq8c$/" "^mmq8cz$/" "^mmq8cp$/" "^mmq8$/(q80|q20)_"; do
		echo "$g" >"$out/parity-$i.group"
		timeout "$p1" "$pt" -test.v -test.timeout "$((p1 - 3))s" -test.run "TestParity/sm_90/$g" >"$out/parity-$i.log" 2>&1 &
		pids+=($!)
		i=$((i + 1))
	done
	wait "${pids[@]}"
	echo "- parity done at $((SECONDS - t0)) s (limit $p1 s)" | tee -a "$sum"
	local n s
	for n in 1 2 3; do
		mkdir -p "$out/bench-$n"
		s=$SECONDS
		if [ "$n" = 3 ]; then
			timeout "$(lim 25 45)" env STRATA_BENCH=1 STRATA_BENCH_OUT="$out/bench-$n" STRATA_BENCH_FILTER='_mma_r64t128w8$' \
				"$pt" -test.run '^TestBenchPrefill$' -test.v -test.timeout 100s >"$out/bench-$n.log" 2>&1
		else
			timeout "$(lim 30 45)" env STRATA_BENCH=1 STRATA_BENCH_ROUNDS=3 STRATA_BENCH_OUT="$out/bench-$n" STRATA_BENCH_FILTER='^(q80|q20)_mma_r64t128w8$' \
				"$pt" -test.run '^TestBenchPrefill$' -test.v -test.timeout 100s >"$out/bench-$n.log" 2>&1
		fi
		echo "- bench $n: exit $? in $((SECONDS - s)) s ($((SECONDS - t0)) s so far)" | tee -a "$sum"
	done
	# ncu: NAME KERNEL VARIANT-FILTER (the first launch: 512 tokens)
	for tr in "q80-CZ strata_mmq8cz_q80_mma_r64t128w8 q80_mma_r64t128w8" "q80-O strata_mmq8_q80_mma_r64t128w8 q80_mma_r64t128w8"; do
		set -- $tr
		[ "$(left 3)" -lt 16 ] && break
		s=$SECONDS
		STRATA_BENCH=1 STRATA_BENCH_FILTER="^$3\$" timeout "$(lim 25 3)" "$N" --clock-control none \
			--section SpeedOfLight --section WarpStateStats --section SchedulerStats --section Occupancy --section LaunchStats --section InstructionStats --section MemoryWorkloadAnalysis \
			--metrics smsp__inst_executed.sum,smsp__inst_executed_pipe_tensor_op_imma.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared.sum,l1tex__data_pipe_lsu_wavefronts.sum,smsp__inst_executed_op_local_ld.sum,smsp__inst_executed_op_local_st.sum,smsp__inst_executed_pipe_fma.sum,smsp__inst_executed_pipe_alu.sum \
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
			grep -E "Compiling entry|registers|spill" "$f" | paste - - - 2>/dev/null | sed -E 's/ptxas info *: //g; s/\s+/ /g' | grep -E "_(q80|q20)_" | sed "s|^|${f#"$w"/trees/}: |"
		done
		echo
		echo "## ncu (512 tokens, first launch)"
		for f in "$out"/ncu-*.txt; do echo "--- ${f#"$out"/}"; grep -E "Duration|Registers Per|Achieved Occupancy|Issued Warp|No Eligible|Eligible Warps|Warp Cycles Per Issued|Executed Instructions |smsp__inst_executed|l1tex__data_pipe|L1/TEX Hit|Mem Pipes Busy|Stall (Long|Short|Wait|Barrier|Not Sel|MIO|LG)" "$f" | sed -E 's/\s+/ /g' | head -40; done 2>/dev/null
		echo
		echo "## prefill TOPS (runs in order)"
		for f in "$out"/bench-*/bench_prefill.txt; do echo "--- ${f#"$out"/}"; grep -E "_mma_|ceiling|4096x14336" "$f"; done 2>/dev/null
		grep -hE "FAIL|panic" "$out"/bench-*.log | head
		echo "total: $((SECONDS - t0)) s"
	} >>"$sum"
	mkdir -p "$out/ptxas" && for f in "$w"/trees/A/sm_90/*.ptxas.log; do cp "$f" "$out/ptxas/"; done 2>/dev/null
	tar -C "$w" -czf "$OUT/logs.tgz" logs
	cat "$sum"
	true
}

case "${1:-run}" in
build) build ;;
run) run ;;
*) echo "usage: $0 build | run" >&2; exit 2 ;;
esac
