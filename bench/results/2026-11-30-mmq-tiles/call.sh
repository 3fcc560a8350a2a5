#!/usr/bin/env bash
# mmq's 8-warp tiles (family mmq8) on the H200: parity of mmq8, mmq and moe_prefill (fresh
# seeds, STRATA_REQUIRE_GPU=1), ptxas -v of the benchmark trees (registers, spills), then
# TestBenchPrefill per tree (PTX assembled first: the driver's JIT takes > 15 s a tree).
#
#   call.sh build   build machine, worktree root: parity.test (xz) and the sm_90 PTX of mmq,
#                   mmq8 and moe_prefill, into $DEV (default /work/main/.dev-mmq)
#   call.sh run     GPU machine, repository root of the device copy (carry .dev-mmq), $OUT set;
#                   BUDGET seconds in all (default 170). DRY=1: stubs, no GPU.
# Trees (each holds all three objects; the families not measured there are cut to one kernel
# so that the benchmark can load them): t4a = mmq r128t64, t4b = mmq r64t128 (main's best
# tiles, the baseline in the same run), t8a = mmq8 r128t128, t8b = mmq8 r64t256.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)

build() {
	set -e
	cd "$here/../../.."
	local d=${DEV:-/work/main/.dev-mmq} target=sm_90 flags f
	rm -rf "$d" && mkdir -p "$d/co/$target"
	CGO_ENABLED=0 go test -c -trimpath -ldflags=-s -tags strata_nodemo -o "$d/parity.test" ./parity
	xz -9e -T2 "$d/parity.test"
	flags=$(awk -F'\t' -v t="$target" '$1 == "target" && $2 == t { print $6 }' kernels/out/objects.txt)
	for f in mmq mmq8 moe_prefill; do
		# shellcheck disable=SC2086 # flags are a list
		clang-19 $flags -I kernels/out/$target -I kernels/out/include kernels/out/$target/$f.cu -o "$d/co/$target/$f.ptx" &
	done
	wait
	tar -C "$d" -czf "$d/co.tar.gz" co && rm -r "$d/co"
	cp "$here/call.sh" "$here/../2026-11-29-prefill-async/strip_ptx.py" "$d/"
	{ git rev-parse HEAD; git status --porcelain; } >"$d/commit"
	ls -la "$d"
	du -sh "$d"
}

run() {
	local d=$here w=/tmp/mmqt t0=$SECONDS budget=${BUDGET:-170} dry=${DRY:-0}
	: "${OUT:?set OUT}"
	rm -rf "$w" && mkdir -p "$w/logs"
	local out=$w/logs pt=$w/parity.test sum=$OUT/summary.txt
	left() { echo $((budget - (SECONDS - t0) - $1)); }
	lim() { local l; l=$(left "$2"); [ "$l" -lt "$1" ] && echo $((l > 5 ? l : 5)) || echo "$1"; }
	echo "# call.sh run $(date -u +%FT%TZ) budget ${budget}s dry $dry commit $(head -1 "$d/commit" 2>/dev/null)" >"$sum"
	if [ "$dry" = 1 ]; then
		printf '#!/bin/sh\necho "stub $0 $*"; env | grep -E "^STRATA_(CO_DIR|BENCH_[A-Z]+)=" | sort; sleep 1\necho "--- PASS: TestParity/sm_90/x/y/z"\necho PASS\n' >"$pt"
		chmod +x "$pt"
		mkdir -p "$w/co/sm_90"
		for f in mmq mmq8 moe_prefill; do printf '\t// .globl\tstrata_%s_q80_mma_r64t64\n.visible .entry x()\n{\n// -- End function\n}\n' $f >"$w/co/sm_90/$f.ptx"; done
		P=true
	else
		tar -C "$w" -xzf "$d/co.tar.gz"
		python3 -c 'import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2], "wb"))' "$d/parity.test.xz" "$pt" && chmod +x "$pt"
		{ nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm,clocks.max.mem --format=csv; nproc; } >"$out/gpu.txt" 2>&1
		P=$(command -v ptxas || echo /usr/local/cuda/bin/ptxas)
	fi
	cat "$d/commit" >"$out/commit" 2>/dev/null
	# trees: NAME FAMILY-MEASURED REGEX
	local tr fam re f keep
	for tr in "t4a mmq r128t64" "t4b mmq r64t128" "t8a mmq8 r128t128" "t8b mmq8 r64t256"; do
		set -- $tr
		mkdir -p "$w/trees/$1/sm_90"
		for f in mmq mmq8 moe_prefill; do
			keep="_mma_$3\$"
			[ "$f" = "$2" ] || keep='_q80_mma_r(64t64|128t32|128t128)$'
			[ "$f" = moe_prefill ] && keep='_q80_mma_r128t32$'
			[ "$f" = mmq8 ] && [ "$2" != mmq8 ] && keep='_q80_mma_r128t128$'
			[ "$f" = mmq ] && [ "$2" != mmq ] && keep='_q80_mma_r64t64$'
			python3 "$d/strip_ptx.py" "$w/co/sm_90/$f.ptx" "$w/trees/$1/sm_90/$f.ptx" "$keep" 2>>"$out/strip.log"
		done
	done
	echo "- setup done at $((SECONDS - t0)) s" | tee -a "$sum"
	# ptxas -v on every tree file, in the background
	(
		for f in "$w"/trees/*/sm_90/*.ptx; do
			("$P" -v -arch=sm_90 "$f" -o "${f%.ptx}.cubin" >"$f.ptxas.log" 2>&1 && mv "${f%.ptx}.cubin" "$f") &
		done
		wait
	) &
	local ptx=$!
	export STRATA_REQUIRE_GPU=1
	local p1 pids=() i=0 g
	p1=$(lim 110 60)
	for g in "mmq8/(q80|q20)" "mmq8/(q4k|q6k)" "mmq8/(iq2xs|iq3xxs)" "mmq8/(iq3s|iq1m)" \
		"mmq/(q80|q20|q4k|q6k)" "mmq/(iq2xs|iq3xxs|iq3s|iq1m)" \
		"moe_prefill/(q80|q20|q4k|q6k)" "moe_prefill/(iq2xs|iq3xxs|iq3s|iq1m)"; do
		echo "$g" >"$out/parity-$i.group"
		STRATA_CO_DIR=$w/co timeout "$p1" "$pt" -test.v -test.timeout "$((p1 - 3))s" -test.run "TestParity/sm_90/$g/" >"$out/parity-$i.log" 2>&1 &
		pids+=($!)
		i=$((i + 1))
	done
	wait "${pids[@]}"
	echo "- parity done at $((SECONDS - t0)) s (limit $p1 s)" | tee -a "$sum"
	wait "$ptx"
	echo "- ptxas done at $((SECONDS - t0)) s" | tee -a "$sum"
	local t
	for tr in "t4a r128t64" "t4b r64t128" "t8a r128t128" "t8b r64t256"; do
		set -- $tr
		mkdir -p "$out/bench-$1"
		s=$SECONDS
		timeout "$(lim 40 5)" env STRATA_CO_DIR="$w/trees/$1" STRATA_BENCH=1 STRATA_BENCH_OUT="$out/bench-$1" STRATA_BENCH_FILTER="_mma_$2\$" \
			"$pt" -test.run '^TestBenchPrefill$' -test.v -test.timeout 100s >"$out/bench-$1.log" 2>&1
		echo "- bench $1: exit $? in $((SECONDS - s)) s ($((SECONDS - t0)) s so far)" | tee -a "$sum"
	done
	cnt() { echo "passed $(cat "$@" | grep -cE '^\s*--- PASS: TestParity/.*/.*/.*/'), failed $(cat "$@" | grep -cE '^\s*--- FAIL: TestParity/.*/.*/.*/'), skipped $(cat "$@" | grep -cE '^\s*--- SKIP: TestParity/.*/.*/.*/')"; }
	{
		echo
		echo "## parity"
		echo "all: $(cnt "$out"/parity-*.log)"
		for f in "$out"/parity-*.log; do echo "- $(cat "${f%.log}.group"): $(cnt "$f") $(grep -E '^(ok|PASS|FAIL)$' "$f" | tr '\n' ' ')"; done
		grep -hE "^\s*--- FAIL|panic|test timed out" "$out"/parity-*.log | head -20
		echo
		echo "## ptxas (registers, spills)"
		for f in "$w"/trees/*/sm_90/*.ptxas.log; do
			grep -E "Compiling entry|registers|spill" "$f" | paste - - - 2>/dev/null | sed -E 's/ptxas info *: //g; s/\s+/ /g' | grep -E "mmq8?_|moe_prefill_" | sed "s|^|${f#"$w"/trees/}: |"
		done | grep -E "t4a/sm_90/mmq.ptx|t4b/sm_90/mmq.ptx|t8a/sm_90/mmq8.ptx|t8b/sm_90/mmq8.ptx"
		echo
		echo "## prefill TOPS"
		for f in "$out"/bench-*/bench_prefill.txt; do echo "--- ${f#"$out"/}"; grep -E "_mma_|ceiling" "$f"; done 2>/dev/null
		grep -hE "FAIL|panic" "$out"/bench-*.log | head
		echo "total: $((SECONDS - t0)) s"
	} >>"$sum"
	for f in "$out"/bench-*/bench_prefill.txt; do cp "$f" "$OUT/$(basename "$(dirname "$f")").txt"; done 2>/dev/null
	mkdir -p "$out/ptxas" && for f in "$w"/trees/*/sm_90/*.ptxas.log; do cp "$f" "$out/ptxas/$(echo "${f#"$w"/trees/}" | tr / _)"; done 2>/dev/null
	tar -C "$w" -czf "$OUT/logs.tgz" logs
	cat "$sum"
	true
}

case "${1:-run}" in
build) build ;;
run) run ;;
*) echo "usage: $0 build | run" >&2; exit 2 ;;
esac
