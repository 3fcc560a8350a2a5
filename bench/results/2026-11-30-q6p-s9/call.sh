#!/usr/bin/env bash
# Session 9 wave 2, helper q6p, issue 6: the one device call. moe_prefill's Q6_K pair tiles
# with the edge jobs keeping their loaded values (z: r64t32z, r64t48z; kernels/prefill.go
# moeNoZero) and, on top, the gate/up's activation rows from an LDS row table (x: r64t32x,
# r64t48x; moeXRows), against the pair tiles (p: r64t32p, r64t48p) at the Qwen3-30B-A3B
# shape, 512 and 2048 tokens, Q4_K r64t32 as the control. Trimmed from
# ../2026-11-30-moe6-s9/call.sh.
#
#   call.sh build   build machine, root of the s9-q6p worktree (kernels/ committed). Writes
#       parity.test.xz, tree.tar.xz, this script and commit to $DEV (default
#       /work/main/.dev-q6p).
#   call.sh run     device, repository root of the copy (carry .dev-q6p), $OUT set; BUDGET
#       seconds in all (default 100).
#   DRY=1 call.sh run   rehearsal with stubs (no GPU, no ptxas).
#
# One tree (T): moe_prefill cut to q6k_mma_r64t(32|48)[pzx] and q4k_mma_r64t32. The call
# runs: ptxas -v (the driver gets cubins); parity of the four new kernels and r64t48p
# (STRATA_REQUIRE_GPU=1, fresh seeds, every case); TestBenchPrefill at 512 and 2048 tokens,
# one process a group, P Z X P Z X P Z X (each group with the control).
# Knobs: KEEP (build: the kernels kept, a regex on the symbol), PAR (run: the parity pattern
# under TestParity/sm_90/moe_prefill/).
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
KEEP=${KEEP:-'^strata_moe_prefill_(q6k_mma_r64t(32|48)[pzx]|q4k_mma_r64t32)$'}

build() {
	set -e
	local d=${DEV:-/work/main/.dev-q6p} tmp flags root inc=kernels/out/sm_90 S
	root=$(cd "$here/../../.." && pwd)
	S=$root/bench/results/2026-11-29-prefill-async/strip_ptx.py
	cd "$root"
	[ -z "$(git status --porcelain -- kernels parity)" ] || { echo "kernels/ or parity/ not clean" >&2; exit 1; }
	rm -rf "$d" && mkdir -p "$d"
	tmp=$(mktemp -d)
	# Smallest carry (the tracked tree is ~64 MB of the 64 MiB limit): no DWARF, no inlining
	# (host-side Go only; the kernels are the PTX below), xz with the x86 filter: 1.7 MB.
	CGO_ENABLED=0 go test -c -trimpath -ldflags='-s -w' -gcflags=all=-l -tags strata_nodemo -o "$d/parity.test" ./parity
	xz --x86 --lzma2=preset=9e,lc=4 -T1 "$d/parity.test"
	flags=$(awk -F'\t' '$1 == "target" && $2 == "sm_90" { print $6 }' kernels/out/objects.txt)
	# shellcheck disable=SC2086
	clang-19 $flags -I $inc -I kernels/out/include $inc/moe_prefill.cu -o "$tmp/all.ptx"
	mkdir -p "$tmp/trees/T/sm_90"
	python3 "$S" "$tmp/all.ptx" "$tmp/trees/T/sm_90/moe_prefill.ptx" "$KEEP"
	echo "T: $(grep -c '^.visible .entry' "$tmp/trees/T/sm_90/moe_prefill.ptx") kernels"
	rm -f "$tmp/all.ptx"
	tar -C "$tmp" -cf - trees | xz -9 -T2 >"$d/tree.tar.xz"
	rm -rf "$tmp"
	cp "$here/call.sh" "$d/"
	{ git rev-parse HEAD; git status --porcelain; } >"$d/commit"
	ls -la "$d" && du -sh "$d"
}

run() {
	local d=${DEV_DIR:-.dev-q6p} w=/tmp/q6ps9 t0=$SECONDS dry=${DRY:-0} budget=${BUDGET:-100}
	: "${OUT:?set OUT}"
	rm -rf "$w" && mkdir -p "$w/logs"
	local L=$w/logs pt=$w/parity.test sum=$w/logs/summary.txt P f
	left() { echo $((budget - (SECONDS - t0) - $1)); }
	# lim WANT RESERVE: WANT seconds, cut to what is left after RESERVE (at least 5)
	lim() { local l; l=$(left "$2"); [ "$l" -lt "$1" ] && echo $((l > 5 ? l : 5)) || echo "$1"; }
	say() { echo "$* at $((SECONDS - t0)) s" | tee -a "$sum"; }
	echo "call.sh run $(date -u +%FT%TZ) dry $dry budget $budget commit $(head -1 "$d/commit" 2>/dev/null)" | tee "$sum"
	python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' "$d/tree.tar.xz" "$w"
	if [ "$dry" = 1 ]; then
		printf '#!/bin/sh\necho "stub $0 $*"; env | grep -E "^STRATA_" | sort\nsleep 1\necho "--- PASS: TestParity/sm_90/x/y/z"\nif [ -n "$STRATA_BENCH_OUT" ]; then mkdir -p "$STRATA_BENCH_OUT"; echo "q6k_mma_r64t32p 512 1.0 2.0 3.0 4.0 10.0 1.0 1%%" >"$STRATA_BENCH_OUT/bench_prefill.txt"; fi\necho PASS\n' >"$pt"
		chmod +x "$pt"
		printf '#!/bin/sh\nwhile [ $# -gt 1 ]; do case $1 in -o) shift; o=$1;; *) i=$1;; esac; shift; done\ncp "$i" "$o"; echo "ptxas stub: Used 128 registers, 0 bytes spill stores"\n' >"$w/ptxas" && chmod +x "$w/ptxas"
		P=$w/ptxas
	else
		python3 -c 'import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2], "wb"))' "$d/parity.test.xz" "$pt" && chmod +x "$pt"
		{ nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm,clocks.max.mem --format=csv; nproc; ptxas --version; } >"$L/gpu.txt" 2>&1
		P=$(command -v ptxas || echo /usr/local/cuda/bin/ptxas)
	fi
	cp "$d/commit" "$L/commit" 2>/dev/null
	# 1. ptxas -v (the driver gets a cubin: no JIT inside a timing).
	f=$w/trees/T/sm_90/moe_prefill.ptx
	"$P" -v -arch=sm_90 "$f" -o "$f.cubin" >"$f.log" 2>&1 && mv "$f.cubin" "$f" || echo "ptxas failed: $f" | tee -a "$sum"
	grep -E "Compiling entry|registers|spill|error" "$f.log" | paste - - - 2>/dev/null |
		sed -E "s/ptxas info *: //g; s/Function properties for //; s/Compiling entry function //; s/ for 'sm_90'//" >"$L/ptxas-summary.txt"
	say "ptxas done"
	# 2. Parity of the four new Q6_K kernels and r64t48p, fresh seeds, every case.
	export STRATA_REQUIRE_GPU=1
	local lim
	lim=$(lim 35 50)
	STRATA_CO_DIR=$w/trees/T timeout "$lim" "$pt" -test.v -test.timeout "$((lim - 2))s" \
		-test.run "TestParity/sm_90/moe_prefill/${PAR:-q6k_mma_r64t(32|48)[zx]|q6k_mma_r64t48p}/" >"$L/parity.log" 2>&1
	say "parity exit $? (limit $lim)"
	# 3. Benchmarks alternated: P = pair tiles, Z = edge keeping, X = Z + row table (each + control).
	local g s n=0 flt
	for g in P Z X P Z X P Z X; do
		n=$((n + 1))
		case $g in
		P) flt='^(q6k_mma_r64t(32|48)p|q4k_mma_r64t32)$' ;;
		Z) flt='^(q6k_mma_r64t(32|48)z|q4k_mma_r64t32)$' ;;
		X) flt='^(q6k_mma_r64t(32|48)x|q4k_mma_r64t32)$' ;;
		esac
		lim=$(lim 20 3)
		[ "$lim" -lt 10 ] && { say "bench $n-$g: skipped, no time"; continue; }
		mkdir -p "$L/bench-$n-$g"
		s=$SECONDS
		STRATA_BENCH=1 STRATA_CO_DIR=$w/trees/T STRATA_BENCH_OUT=$L/bench-$n-$g STRATA_BENCH_FILTER=$flt timeout "$lim" \
			"$pt" -test.run '^TestBenchPrefill$' -test.v -test.timeout 100s >"$L/bench-$n-$g.log" 2>&1
		say "bench $n-$g: exit $? in $((SECONDS - s)) s (limit $lim)"
	done
	cnt() { echo "passed $(cat "$@" | grep -cE '^\s*--- PASS: TestParity/.*/.*/.*/'), failed $(cat "$@" | grep -cE '^\s*--- FAIL: TestParity/.*/.*/.*/'), skipped $(cat "$@" | grep -cE '^\s*--- SKIP: TestParity/.*/.*/.*/')"; }
	{
		echo "## parity: $(cnt "$L/parity.log") $(grep -hE '^(ok|PASS|FAIL)$' "$L/parity.log" | tr '\n' ' ')"
		grep -hE "^\s*--- FAIL|panic|test timed out" "$L"/parity.log | head -20
		echo "## ptxas (registers, spills)"
		cat "$L/ptxas-summary.txt"
		echo "## moe_prefill tables (route, gate/up, down, combine, layer µs, TOPS)"
		for f in "$L"/bench-*/bench_prefill.txt; do echo "--- ${f#"$L"/}"; grep -E "_mma_|ceiling" "$f"; done 2>/dev/null
		grep -hE "FAIL|panic" "$L"/bench-*.log 2>/dev/null | head
		echo "total $((SECONDS - t0)) s"
	} >>"$sum"
	cp "$sum" "$L/ptxas-summary.txt" "$OUT/"
	tar -C "$w" -czf "$OUT/logs.tgz" logs
	cat "$sum"
}

case "${1:-run}" in
build) build ;;
run) run ;;
*) echo "usage: call.sh build|run" >&2; exit 2 ;;
esac
