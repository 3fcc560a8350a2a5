#!/usr/bin/env bash
# Session 5, helper tile2, issue 6: one H200 call for the L2 prefetch of the mmq core
# (branch s5-tile2) against main (O). Trees (sm_90 PTX of mmq and moe_prefill, assembled by
# ptxas -v on the device before any benchmark):
#   O  main
#   N  the branch at its measurement commit: every mma kernel prefetches the next K step
#   D  N with every distance 2 (two steps ahead)
#   A  N with moe_prefill r64t64 under launch_bounds(128, 4) and the partial-tile skip
#      (moe_prefill only, tile r64t64)
# Parity (STRATA_REQUIRE_GPU=1, driver JIT from PTX) of N (every mmq and moe_prefill sm_90
# variant), D (the same) and A (moe_prefill r64t64), then TestBenchPrefill per tree and tile,
# one process at a time (r64t64 first, then r64t128 with moe r128t32, then r128t64).
#
#   call.sh build   build machine, root of the s5-tile2 worktree at the measurement commit,
#                   clean; O from /work/main (MAIN=...). Output: $DEV (default
#                   /work/main/.dev-tile2).
#   call.sh run     device, repository root of the copy (carry .dev-tile2), $OUT set.
#   DRY=1 call.sh run   the same flow with a stub test binary and no ptxas (rehearsal).
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)

strip() { # in out family tile
	local pt=$4
	[ "$3" = moe_prefill ] && [ "$4" = r64t128 ] && pt=r128t32
	mkdir -p "$(dirname "$2")"
	python3 "$root/bench/results/2026-11-29-prefill-async/strip_ptx.py" "$1" "$2" "_mma_$pt\$"
}

build() {
	set -e
	local d=${DEV:-/work/main/.dev-tile2} main=${MAIN:-/work/main} tmp flags fam src obj T t
	root=$(cd "$here/../../.." && pwd)
	cd "$root"
	[ -z "$(git status --porcelain -- kernels)" ] || { echo "kernels/ not clean" >&2; exit 1; }
	rm -rf "$d" && mkdir -p "$d"
	tmp=$(mktemp -d)
	CGO_ENABLED=0 go test -c -trimpath -ldflags=-s -tags strata_nodemo -o "$d/parity.test" ./parity
	xz -9 -T2 "$d/parity.test"
	flags=$(awk -F'\t' '$1 == "target" && $2 == "sm_90" { print $6 }' kernels/out/objects.txt)
	cc() { # src out [dir]
		# shellcheck disable=SC2086 # flags are a list
		(cd "${3:-$root}" && clang-19 $flags -I "$(dirname "$1")" -I kernels/out/include "$1" -o "$2")
	}
	# N: every sm_90 object (parity), and the trees.
	awk -F'\t' '$1 == "object" && $2 == "sm_90" { print $3 "\t" $4 "\t" $5 }' kernels/out/objects.txt >"$tmp/objs"
	while IFS=$'\t' read -r fam src obj; do
		mkdir -p "$tmp/co/$(dirname "$obj")"
		cc "$src" "$tmp/co/$obj" &
	done <"$tmp/objs"
	wait
	# O from main.
	for fam in mmq moe_prefill; do cc kernels/out/sm_90/$fam.cu "$tmp/O-$fam.ptx" "$main" & done
	wait
	# D: distance 2 everywhere.
	python3 - <<'PY'
import re
p = "kernels/prefill.go"
s = open(p).read()
i = s.index("var mmqL2Prefetch")
j = s.index("\n}\n", i)
t = re.sub(r'(":\s*)1,', r'\g<1>2,', s[i:j])
assert " 1," not in t and " 2," in t, "D: every distance 2"
s = s[:i] + t + s[j:]
open(p, "w").write(s)
PY
	go run ./gen
	for fam in mmq moe_prefill; do cc kernels/out/sm_90/$fam.cu "$tmp/D-$fam.ptx" & done
	wait
	git checkout -q -- kernels
	# A: moe_prefill r64t64 with launch_bounds(128, 4) and the skip.
	python3 - <<'PY'
p = "kernels/prefill.go"
s = open(p).read()
ty = ["iq1m", "iq2xs", "iq3s", "iq3xxs", "q20", "q4k", "q6k", "q80"]
s = s.replace("var mmqMinBlocks = map[string]int{\n", "var mmqMinBlocks = map[string]int{\n" + "".join(f'\t"moe_prefill/{t}/r64t64": 4,\n' for t in ty), 1)
s = s.replace("var moePartialSkip = map[string]bool{\n", "var moePartialSkip = map[string]bool{\n" + "".join(f'\t"{t}/r64t64": true,\n' for t in ty if t != "iq2xs"), 1)
open(p, "w").write(s)
PY
	go run ./gen
	grep -c "STRATA_MMQ4_BOUNDS(128)" kernels/out/sm_90/moe_prefill.cu
	cc kernels/out/sm_90/moe_prefill.cu "$tmp/A-moe_prefill.ptx"
	git checkout -q -- kernels
	for fam in mmq moe_prefill; do
		for t in r64t64 r64t128 r128t64; do
			strip "$tmp/co/sm_90/$fam.ptx" "$tmp/trees/N/$t/sm_90/$fam.ptx" $fam $t
			strip "$tmp/O-$fam.ptx" "$tmp/trees/O/$t/sm_90/$fam.ptx" $fam $t
			strip "$tmp/D-$fam.ptx" "$tmp/trees/D/$t/sm_90/$fam.ptx" $fam $t
		done
		mkdir -p "$tmp/pd/$fam"
		cp "$tmp/D-$fam.ptx" "$tmp/pd/$fam/$fam.ptx"
	done
	strip "$tmp/co/sm_90/mmq.ptx" "$tmp/trees/A/r64t64/sm_90/mmq.ptx" mmq r64t64
	strip "$tmp/A-moe_prefill.ptx" "$tmp/trees/A/r64t64/sm_90/moe_prefill.ptx" moe_prefill r64t64
	cp "$tmp/A-moe_prefill.ptx" "$tmp/pd/A-moe_prefill.ptx"
	tar -C "$tmp" -cf - co pd | xz -9 -T2 >"$d/co.txz"
	tar -C "$tmp" -cf - trees | xz -9 -T2 >"$d/trees.txz"
	rm -rf "$tmp"
	cp "$here/call.sh" "$d/"
	{ git rev-parse HEAD; git status --porcelain; echo "O: $(git -C "$main" rev-parse HEAD)"; git -C "$main" status --porcelain -- kernels; } >"$d/commit"
	ls -la "$d" && du -sh "$d"
}

run() {
	local d=${DEV_DIR:-.dev-tile2} w=/tmp/tile2 t0=$SECONDS dry=${DRY:-0} budget=${BUDGET:-160}
	: "${OUT:?set OUT}"
	rm -rf "$w" && mkdir -p "$w/logs"
	local L=$w/logs pt=$w/parity.test sum=$w/logs/summary.txt
	echo "call.sh run $(date -u +%FT%TZ) dry $dry budget $budget commit $(head -1 "$d/commit" 2>/dev/null)" | tee "$sum"
	local x
	for x in co trees; do python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1], "r:xz").extractall(sys.argv[2])' "$d/$x.txz" "$w"; done
	if [ "$dry" = 1 ]; then
		printf '#!/bin/sh\necho "stub $0 $*"; env | grep -E "^STRATA_" | sort\nsleep 1\necho "--- PASS: TestParity/sm_90/x/y/z"\nif [ -n "$STRATA_BENCH_OUT" ]; then mkdir -p "$STRATA_BENCH_OUT"; echo "q80_mma_stub 512 1.0 1.0 1%%" >"$STRATA_BENCH_OUT/bench_prefill.txt"; fi\necho PASS\n' >"$pt"
		chmod +x "$pt"
	else
		python3 -c 'import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2], "wb"))' "$d/parity.test.xz" "$pt" && chmod +x "$pt"
		{ nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm,clocks.max.mem --format=csv; nproc; ptxas --version; } >"$L/gpu.txt" 2>&1
	fi
	cp "$d/commit" "$L/commit" 2>/dev/null
	# co dirs of D and A: N's objects with their mmq / moe_prefill PTX.
	cp -r "$w/co" "$w/coD" && cp "$w/pd/mmq/mmq.ptx" "$w/coD/sm_90/mmq.ptx" && cp "$w/pd/moe_prefill/moe_prefill.ptx" "$w/coD/sm_90/moe_prefill.ptx"
	cp -r "$w/co" "$w/coA" && cp "$w/pd/A-moe_prefill.ptx" "$w/coA/sm_90/moe_prefill.ptx"
	export STRATA_REQUIRE_GPU=1
	# 1. Parity (JIT from PTX): N in 8 processes, D in 8, A in 1; ptxas meanwhile.
	local pids=() i=0 g T co
	for T in N D; do
		co=$w/co
		[ $T = D ] && co=$w/coD
		for g in "mmq/(q80|q20)_mma" "mmq/(q4k|q6k)_mma" "mmq/(iq2xs|iq3xxs)_mma" "mmq/(iq3s|iq1m)_mma" \
			"moe_prefill/(q80|q20)_mma" "moe_prefill/(q4k|q6k)_mma" "moe_prefill/(iq2xs|iq3xxs)_mma" "moe_prefill/(iq3s|iq1m)_mma"; do
			echo "$T $g" >"$L/parity-$i.group"
			STRATA_CO_DIR=$co timeout 120 "$pt" -test.v -test.timeout 115s -test.run "TestParity/sm_90/$g/" >"$L/parity-$i.log" 2>&1 &
			pids+=($!)
			i=$((i + 1))
		done
	done
	echo "A moe_prefill/.*_r64t64" >"$L/parity-$i.group"
	STRATA_CO_DIR=$w/coA timeout 120 "$pt" -test.v -test.timeout 115s -test.run "TestParity/sm_90/moe_prefill/.*_mma_r64t64/" >"$L/parity-$i.log" 2>&1 &
	pids+=($!)
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
	# 2. Benchmarks, one process at a time.
	local t tt s lim
	for t in r64t64 r64t128 r128t64; do
		for T in N O D A; do
			[ -d "$w/trees/$T/$t" ] || continue
			lim=$((budget - (SECONDS - t0) - 6))
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
		echo "## parity: $(cnt "$L"/parity-*.log)"
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
