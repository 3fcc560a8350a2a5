#!/usr/bin/env bash
# Session 5, helper tile, issue 6: one H200 call for the prefill kernels of branch s5-tile
# (N) against main (O): parity of every mmq and moe_prefill sm_90 variant of N
# (STRATA_REQUIRE_GPU=1, 8 processes), then TestBenchPrefill per tile (r128t64, r64t64,
# r64t128 with moe_prefill's r128t32) for N and O, every tree's PTX assembled by ptxas -v
# first (the driver's JIT takes > 15 s a tree; -v gives registers and spills per kernel).
#
#   call.sh build   build machine, at the root of the s5-tile worktree; O from /work/main
#       (MAIN=...). Writes parity.test.xz (built from N), co.tgz (N's sm_90 objects: parity),
#       trees.tgz (trees/{N,O}/<tile>/sm_90/{mmq,moe_prefill}.ptx, one tile each) and this
#       script into $DEV (default /work/main/.dev-tile).
#   call.sh run     device, repository root of the copy (carry .dev-tile), $OUT set.
#   DRY=1 call.sh run   the same flow with a stub test binary and no ptxas (rehearsal).
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)

build() {
	set -e
	local d=${DEV:-/work/main/.dev-tile} main=${MAIN:-/work/main} tmp flags root
	root=$(cd "$here/../../.." && pwd)
	cd "$root"
	rm -rf "$d" && mkdir -p "$d"
	tmp=$(mktemp -d)
	CGO_ENABLED=0 go test -c -trimpath -ldflags=-s -tags strata_nodemo -o "$d/parity.test" ./parity
	xz -9 -T2 "$d/parity.test"
	flags=$(awk -F'\t' '$1 == "target" && $2 == "sm_90" { print $6 }' kernels/out/objects.txt)
	awk -F'\t' '$1 == "object" && $2 == "sm_90" { print $3 "\t" $4 "\t" $5 }' kernels/out/objects.txt |
		while IFS=$'\t' read -r fam src obj; do
			mkdir -p "$tmp/co/$(dirname "$obj")"
			# shellcheck disable=SC2086 # flags are a list
			clang-19 $flags -I "$(dirname "$src")" -I kernels/out/include "$src" -o "$tmp/co/$obj"
			case $fam in
			mmq | moe_prefill)
				# shellcheck disable=SC2086
				(cd "$main" && clang-19 $flags -I "$(dirname "$src")" -I kernels/out/include "$src" -o "$tmp/O-$fam.ptx")
				for T in N O; do
					local in=$tmp/co/$obj
					[ $T = O ] && in=$tmp/O-$fam.ptx
					for t in r128t64 r64t64 r64t128; do
						local pt=$t
						[ "$fam" = moe_prefill ] && [ $t = r64t128 ] && pt=r128t32
						mkdir -p "$tmp/trees/$T/$t/$(dirname "$obj")"
						python3 "$root/bench/results/2026-11-29-prefill-async/strip_ptx.py" "$in" "$tmp/trees/$T/$t/$obj" "_mma_$pt\$"
					done
				done
				;;
			esac
		done
	tar -C "$tmp" -czf "$d/co.tgz" co
	tar -C "$tmp" -czf "$d/trees.tgz" trees
	rm -rf "$tmp"
	cp "$here/call.sh" "$d/"
	{ git rev-parse HEAD; git status --porcelain; echo "O: $(git -C "$main" rev-parse HEAD)"; git -C "$main" status --porcelain -- kernels; } >"$d/commit"
	ls -la "$d" && du -sh "$d"
}

run() {
	local d=${DEV_DIR:-.dev-tile} w=/tmp/tile5 t0=$SECONDS dry=${DRY:-0} budget=${BUDGET:-265}
	: "${OUT:?set OUT}"
	rm -rf "$w" && mkdir -p "$w/logs"
	local L=$w/logs pt=$w/parity.test sum=$w/logs/summary.txt
	echo "call.sh run $(date -u +%FT%TZ) dry $dry budget $budget commit $(head -1 "$d/commit" 2>/dev/null)" | tee "$sum"
	if [ "$dry" = 1 ]; then
		printf '#!/bin/sh\necho "stub $0 $*"; env | grep -E "^STRATA_" | sort\nsleep 1\necho "--- PASS: TestParity/sm_90/x/y/z"\nif [ -n "$STRATA_BENCH_OUT" ]; then mkdir -p "$STRATA_BENCH_OUT"; echo "q80_mma_stub 512 1.0 1.0 1%%" >"$STRATA_BENCH_OUT/bench_prefill.txt"; fi\necho PASS\n' >"$pt"
		chmod +x "$pt"
		tar -C "$w" -xzf "$d/co.tgz"
		tar -C "$w" -xzf "$d/trees.tgz"
	else
		tar -C "$w" -xzf "$d/co.tgz"
		tar -C "$w" -xzf "$d/trees.tgz"
		python3 -c 'import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2], "wb"))' "$d/parity.test.xz" "$pt" && chmod +x "$pt"
		{ nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm,clocks.max.mem --format=csv; nproc; ptxas --version; } >"$L/gpu.txt" 2>&1
	fi
	cp "$d/commit" "$L/commit" 2>/dev/null
	export STRATA_REQUIRE_GPU=1
	# 1. Parity of N (JIT from PTX, as the session-4 final call), 8 processes; meanwhile ptxas
	#    assembles every benchmark tree (CPU only).
	local pids=() i=0 g
	for g in "mmq/(q80|q20)" "mmq/(q4k|q6k)" "mmq/(iq2xs|iq3xxs)" "mmq/(iq3s|iq1m)" \
		"moe_prefill/(q80|q20)" "moe_prefill/(q4k|q6k)" "moe_prefill/(iq2xs|iq3xxs)" "moe_prefill/(iq3s|iq1m)"; do
		echo "$g" >"$L/parity-$i.group"
		STRATA_CO_DIR=$w/co timeout 165 "$pt" -test.v -test.timeout 160s -test.run "TestParity/sm_90/$g/" >"$L/parity-$i.log" 2>&1 &
		pids+=($!)
		i=$((i + 1))
	done
	local P f
	P=$(command -v ptxas || echo /usr/local/cuda/bin/ptxas)
	for f in "$w"/trees/*/*/sm_90/*.ptx; do
		if [ "$dry" = 1 ]; then echo "dry ptxas $f" >"$f.ptxas.log"; continue; fi
		("$P" -v -arch=sm_90 "$f" -o "${f%.ptx}.cubin" >"$f.ptxas.log" 2>&1 && mv "${f%.ptx}.cubin" "$f") &
	done
	wait "${pids[@]}"
	echo "parity done at $((SECONDS - t0)) s" | tee -a "$sum"
	wait
	echo "ptxas done at $((SECONDS - t0)) s" | tee -a "$sum"
	for f in "$w"/trees/*/*/sm_90/*.ptx.ptxas.log; do
		echo "== ${f#"$w"/trees/}"
		grep -E "Compiling entry|registers|spill|error" "$f" | paste - - - 2>/dev/null | sed -E 's/ptxas info *: //g; s/Function properties for //' | head -20
	done >"$L/ptxas-summary.txt"
	for f in "$w"/trees/*/*/sm_90/*.ptxas.log; do
		local rel=${f#"$w"/trees/}
		cp "$f" "$L/ptxas-${rel//\//-}"
	done
	# 2. Benchmarks, one process at a time, N then O per tile.
	local T t tt s lim
	for t in r64t64 r128t64 r64t128; do
		for T in N O; do
			lim=$((budget - (SECONDS - t0) - 5))
			[ $lim -gt 30 ] && lim=30
			[ $lim -lt 5 ] && { echo "prefill $T $t: skipped, no time" | tee -a "$sum"; continue; }
			tt=$t
			[ $t = r64t128 ] && tt="(r64t128|r128t32)"
			mkdir -p "$L/prefill-$T-$t"
			s=$SECONDS
			STRATA_BENCH=1 STRATA_CO_DIR=$w/trees/$T/$t STRATA_BENCH_OUT=$L/prefill-$T-$t STRATA_BENCH_FILTER="_mma_$tt\$" timeout $lim \
				"$pt" -test.run '^TestBenchPrefill$' -test.v -test.timeout 100s >"$L/prefill-$T-$t.log" 2>&1
			echo "prefill $T $t: exit $? in $((SECONDS - s)) s (limit $lim)" | tee -a "$sum"
		done
	done
	cnt() { echo "passed $(cat "$@" | grep -cE '^\s*--- PASS: TestParity/.*/.*/.*/'), failed $(cat "$@" | grep -cE '^\s*--- FAIL: TestParity/.*/.*/.*/'), skipped $(cat "$@" | grep -cE '^\s*--- SKIP: TestParity/.*/.*/.*/')"; }
	{
		echo "## parity of N: $(cnt "$L"/parity-*.log)"
		for f in "$L"/parity-*.log; do echo "- $(cat "${f%.log}.group"): $(cnt "$f") $(grep -E '^(ok|PASS|FAIL)$' "$f" | tr '\n' ' ')"; done
		grep -hE "^\s*--- FAIL|panic|test timed out" "$L"/parity-*.log | head -20
		echo "## prefill tables"
		for f in "$L"/prefill-*/bench_prefill.txt; do echo "--- ${f#"$L"/}"; grep -E "_mma_|ceiling" "$f"; done 2>/dev/null
		grep -hE "FAIL|panic" "$L"/prefill-*.log 2>/dev/null | head
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
