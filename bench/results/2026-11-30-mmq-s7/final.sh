#!/usr/bin/env bash
# Session 7, helper mmq (issue 6): the lead's final-call part for mmq8 r64t128w8a (the async
# activation staging) against r64t128w8, both in the same mmq8 module, so one run times both.
# (call.sh, call 1, measured the row form; this script is its copy cut to one tree.)
#
#   final.sh build  build machine, repository root (clang-19, Go): parity.test (xz) and the sm_90
#                   PTX of mmq8 (both tiles) into $DEV (default /work/main/.dev-mmqf)
#   final.sh run    GPU machine, repository root of the device copy (carry the DEV dir), $OUT set;
#                   BUDGET seconds in all (default 110). DRY=1: stubs, no GPU.
# ptxas assembles the module; parity (STRATA_REQUIRE_GPU=1, fresh seeds) of the 8 r64t128w8a
# variants in 4 processes; TestBenchPrefill twice (both tiles each time); ncu of Q8_0 and
# IQ3_S r64t128w8a. Writes $OUT/summary-mmq8a.txt and $OUT/logs-mmq8a.tgz.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)

build() {
	set -e
	cd "$here/../../.."
	local d=${DEV:-/work/main/.dev-mmqf} target=sm_90 flags
	rm -rf "$d" && mkdir -p "$d/co/M8/sm_90"
	CGO_ENABLED=0 go test -c -trimpath -ldflags=-s -tags strata_nodemo -o "$d/parity.test" ./parity
	xz -9e -T2 "$d/parity.test"
	flags=$(awk -F'\t' -v t="$target" '$1 == "target" && $2 == t { print $6 }' kernels/out/objects.txt)
	# shellcheck disable=SC2086 # flags are a list
	clang-19 $flags -I kernels/out/$target -I kernels/out/include kernels/out/$target/mmq8.cu -o "$d/co/M8/sm_90/mmq8.ptx"
	tar -C "$d" -cJf "$d/co.tar.xz" co && rm -r "$d/co"
	cp "$here/final.sh" "$d/"
	{ git rev-parse HEAD; git status --porcelain; } >"$d/commit"
	ls -la "$d"
	du -sh "$d"
}

run() {
	local d=$here w=/tmp/mmqf t0=$SECONDS budget=${BUDGET:-110} dry=${DRY:-0}
	: "${OUT:?set OUT}"
	rm -rf "$w" && mkdir -p "$w/logs"
	local out=$w/logs pt=$w/parity.test sum=$OUT/summary-mmq8a.txt P N
	left() { echo $((budget - (SECONDS - t0) - $1)); }
	lim() { local l; l=$(left "$2"); [ "$l" -lt "$1" ] && echo $((l > 5 ? l : 5)) || echo "$1"; }
	echo "# final.sh run $(date -u +%FT%TZ) budget ${budget}s dry $dry commit $(head -1 "$d/commit" 2>/dev/null)" >"$sum"
	if [ "$dry" = 1 ]; then
		printf '#!/bin/sh\necho "stub $0 $*"; env | grep -E "^STRATA_(CO_DIR|BENCH_[A-Z]+)=" | sort; sleep 1\necho "--- PASS: TestParity/sm_90/x/y/z"\n[ -n "$STRATA_BENCH_OUT" ] && printf "ceiling x\\nq80_mma_r64t128w8a 512 1 1 1%%\\n" >"$STRATA_BENCH_OUT/bench_prefill.txt"\necho PASS\n' >"$pt"
		chmod +x "$pt"
		mkdir -p "$w/co/M8/sm_90" && echo "// M8" >"$w/co/M8/sm_90/mmq8.ptx"
		P=true N=true
	else
		tar -C "$w" -xJf "$d/co.tar.xz"
		python3 -c 'import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2], "wb"))' "$d/parity.test.xz" "$pt" && chmod +x "$pt"
		P=$(command -v ptxas || echo /usr/local/cuda/bin/ptxas)
		N=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
	fi
	cat "$d/commit" >"$out/commit" 2>/dev/null
	local mf=$w/co/M8/sm_90/mmq8.ptx f
	"$P" -v -arch=sm_90 "$mf" -o "${mf%.ptx}.cubin" >"$mf.ptxas.log" 2>&1 && mv "${mf%.ptx}.cubin" "$mf"
	echo "- ptxas done at $((SECONDS - t0)) s" | tee -a "$sum"
	export STRATA_REQUIRE_GPU=1
	local p1 pids=() i=0 g
	p1=$(lim 45 70)
	for g in "(q80|q20)" "(q4k|q6k)" "(iq2xs|iq3xxs)" "(iq3s|iq1m)"; do
		echo "M8 ^mmq8$/${g}_mma_r64t128w8a$" >"$out/parity-$i.group"
		STRATA_CO_DIR=$w/co/M8 timeout "$p1" "$pt" -test.v -test.timeout "$((p1 - 3))s" -test.run "TestParity/sm_90/^mmq8$/${g}_mma_r64t128w8a$/" >"$out/parity-$i.log" 2>&1 &
		pids+=($!)
		i=$((i + 1))
	done
	wait "${pids[@]}"
	echo "- parity done at $((SECONDS - t0)) s (limit $p1 s)" | tee -a "$sum"
	local n
	for n in 1 2; do
		mkdir -p "$out/bench-$n"
		s=$SECONDS
		timeout "$(lim 25 30)" env STRATA_CO_DIR="$w/co/M8" STRATA_BENCH=1 STRATA_BENCH_OUT="$out/bench-$n" STRATA_BENCH_FILTER='_mma_r64t128w8a?$' \
			"$pt" -test.run '^TestBenchPrefill$' -test.v -test.timeout 100s >"$out/bench-$n.log" 2>&1
		echo "- bench $n: exit $? in $((SECONDS - s)) s ($((SECONDS - t0)) s so far)" | tee -a "$sum"
	done
	for tr in "q80-w8a strata_mmq8_q80_mma_r64t128w8a q80_mma_r64t128w8a" "iq3s-w8a strata_mmq8_iq3s_mma_r64t128w8a iq3s_mma_r64t128w8a"; do
		set -- $tr
		[ "$(left 3)" -lt 14 ] && break
		s=$SECONDS
		STRATA_BENCH=1 STRATA_CO_DIR="$w/co/M8" STRATA_BENCH_FILTER="^$3\$" timeout "$(lim 20 3)" "$N" --clock-control none \
			--section SpeedOfLight --section WarpStateStats --section SchedulerStats --section Occupancy --section InstructionStats \
			--metrics smsp__inst_executed.sum,smsp__inst_executed_pipe_tensor_op_imma.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared.sum,smsp__inst_executed_op_ldgsts.sum \
			-k "regex:$2\$" -c 1 --kill yes -f -o "$w/ncu-$1" "$pt" -test.run '^TestBenchPrefill$' -test.v -test.timeout 100s >"$out/ncu-$1.log" 2>&1
		echo "- ncu $1: exit $? in $((SECONDS - s)) s ($((SECONDS - t0)) s so far)" | tee -a "$sum"
		[ -f "$w/ncu-$1.ncu-rep" ] && "$N" -i "$w/ncu-$1.ncu-rep" --page details --print-details all >"$out/ncu-$1.txt" 2>&1
	done
	cnt() { echo "passed $(cat "$@" | grep -cE '^\s*--- PASS: TestParity/.*/.*/.*/'), failed $(cat "$@" | grep -cE '^\s*--- FAIL: TestParity/.*/.*/.*/'), skipped $(cat "$@" | grep -cE '^\s*--- SKIP: TestParity/.*/.*/.*/')"; }
	{
		echo
		echo "## parity (mmq8 r64t128w8a)"
		echo "all: $(cnt "$out"/parity-*.log)"
		for f in "$out"/parity-*.log; do echo "- $(cat "${f%.log}.group"): $(cnt "$f") $(grep -E '^(ok|PASS|FAIL)$' "$f" | tr '\n' ' ')"; done
		grep -hE "^\s*--- FAIL|panic|test timed out" "$out"/parity-*.log | head -20
		echo
		echo "## ptxas (registers, spills)"
		grep -E "Compiling entry|registers|spill" "$mf.ptxas.log" | paste - - - 2>/dev/null | sed -E 's/ptxas info *: //g; s/\s+/ /g' | grep -E "mmq8_"
		echo
		echo "## ncu (512 tokens, first launch)"
		for f in "$out"/ncu-*.txt; do echo "--- ${f#"$out"/}"; grep -E "Duration|Issued Warp|Eligible Warps|smsp__inst_executed|wavefronts_mem_shared|bank_conflicts|L1: Data Pipe Lsu|Stall (Long|Short|Wait|Barrier|Not Sel)" "$f" | sed -E 's/\s+/ /g' | head -20; done 2>/dev/null
		echo
		echo "## prefill TOPS (w8 and w8a in one module; two runs)"
		for f in "$out"/bench-*/bench_prefill.txt; do echo "--- ${f#"$out"/}"; grep -E "_mma_|ceiling" "$f"; done 2>/dev/null
		grep -hE "FAIL|panic" "$out"/bench-*.log | head
		echo "total: $((SECONDS - t0)) s"
	} >>"$sum"
	cp "$mf.ptxas.log" "$out/" 2>/dev/null
	tar -C "$w" -czf "$OUT/logs-mmq8a.tgz" logs
	cat "$sum"
	true
}

case "${1:-run}" in
build) build ;;
run) run ;;
*) echo "usage: $0 build | run" >&2; exit 2 ;;
esac
