#!/usr/bin/env bash
# moe_decode old-vs-new for the lead's final call (session 7, helper moedec; copied from
# bench/results/2026-11-30-moe-decode/mods.sh and trimmed). One extra sm_90 moe_decode code
# object, laid out as a code-object tree (DIR/sm_90/moe_decode.ptx):
#   main: main's kernel before this branch (kernels/out/sm_90/moe_decode.cu at a2cd2ed), whose
#         PTX is byte for byte this branch's built with -DSTRATA_MOE_NO_SLOTPF (no slot-table
#         prefetch).
#
#   mods.sh build   build machine, repository root: $DEV/moe-mods.tar.gz (DEV default
#                   /work/main/.dev-final7), same clang-19 flags as kernels/out/objects.txt.
#   mods.sh run     device, after the lead's tree is unpacked and assembled: CO (the tree with
#                   the merged main's sm_90 objects), PT (parity.test), GT (gpu.test), MODELS
#                   (dir with q30-q2_0.gguf, q80-iq2_xs.gguf), OUT. Runs
#                   1. parity moe_decode on CO;
#                   2. TestBenchMoeDecode on CO with main beside it (bitwise h/y check, per-phase
#                      and 3+2 times);
#                   3. TestDecodeProfile (128 tokens, STRATA_DECODE_MODES=pdl,pdl) per model on CO
#                      and on a copy of CO whose moe_decode is main.
#   CO_PTX (optional): the merged tree's moe_decode.ptx before assembly, for ptxas -v (spills).
#   MOE_MODS (default "main"), MOE_TYPES (default q20,iq2xs,q80), MOE_BENCH_S (bench limit,
#   default 60), MOE_MODELS (default "q30-q2_0 q80-iq2_xs").
#   STRATA_MOE_DRY=1 mods.sh run   the same flow with stub binaries.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)

build() {
	set -e
	cd "$here/../../.."
	local d=${DEV:-/work/main/.dev-final7} target=sm_90 flags src=kernels/out/sm_90/moe_decode.cu t
	flags=$(awk -F'\t' -v t="$target" '$1 == "target" && $2 == t { print $6 }' kernels/out/objects.txt)
	t=$(mktemp -d)
	mkdir -p "$t/main/sm_90" "$d"
	git show a2cd2ed:"$src" >"$t/main.cu"
	# shellcheck disable=SC2086 # flags are a list
	clang-19 $flags -I kernels/out/sm_90 -I kernels/out/include "$t/main.cu" -o "$t/main/sm_90/moe_decode.ptx"
	tar -C "$t" -czf "$d/moe-mods.tar.gz" main
	cp "$here/mods.sh" "$d/"
	rm -r "$t"
	ls -la "$d/moe-mods.tar.gz"
}

run() {
	: "${OUT:?set OUT}" "${CO:?set CO}" "${PT:?set PT}" "${GT:?set GT}" "${MODELS:?set MODELS}"
	local d=$here w=/tmp/moemods dry=${STRATA_MOE_DRY:-0} sum="$OUT/moe-summary.md"
	rm -rf "$w" && mkdir -p "$w/logs"
	tar -C "$w" -xzf "$d/moe-mods.tar.gz"
	if [ "$dry" = 1 ]; then
		printf '#!/bin/sh\necho "stub $0 $*"; env | grep -E "^STRATA_(CO_DIR|BENCH_[A-Z_]+|DECODE_MODES)=" | sort\necho PASS\n' >"$w/stub"
		chmod +x "$w/stub"
		PT=$w/stub GT=$w/stub
	fi
	local P
	P=$(command -v ptxas || echo /usr/local/cuda/bin/ptxas)
	for m in main; do
		if [ "$dry" != 1 ]; then
			# assemble, as the lead's tree is (no driver JIT inside the timings); -v for spills
			"$P" -v -arch=sm_90 "$w/$m/sm_90/moe_decode.ptx" -o "$w/$m/sm_90/moe_decode.cubin" >"$w/logs/ptxas-$m.log" 2>&1 &&
				mv "$w/$m/sm_90/moe_decode.cubin" "$w/$m/sm_90/moe_decode.ptx"
		fi
	done
	# registers and spills of the merged tree's kernel (the slot-table prefetch is new): CO_PTX,
	# when set, is its moe_decode.ptx before assembly (e.g. $w/co/sm_90/moe_decode.ptx)
	if [ "$dry" != 1 ] && [ -n "${CO_PTX:-}" ]; then
		"$P" -v -arch=sm_90 "$CO_PTX" -o /dev/null >"$w/logs/ptxas-new.log" 2>&1
	fi
	# the engine tree with main's moe_decode
	cp -r "$CO" "$w/co-main" && cp "$w/main/sm_90/moe_decode.ptx" "$w/co-main/sm_90/moe_decode.ptx"
	echo "# mods.sh run ($(date -u +%FT%TZ)), dry $dry" >"$sum"
	step() { # name limit cmd...
		local n=$1 l=$2 s=$SECONDS rc
		shift 2
		timeout "$l" "$@" >"$w/logs/$n.log" 2>&1
		rc=$?
		echo "- $n: exit $rc in $((SECONDS - s)) s" | tee -a "$sum"
	}
	step parity-moe 60 env STRATA_CO_DIR="$CO" STRATA_REQUIRE_GPU=1 "$PT" -test.run 'TestParity/sm_90/moe_decode/' -test.v
	local mods="" m
	for m in ${MOE_MODS:-main}; do mods="$mods${mods:+,}$m=$w/$m"; done
	step bench-moe "${MOE_BENCH_S:-60}" env STRATA_CO_DIR="$CO" STRATA_BENCH=1 STRATA_BENCH_OUT="$w/logs" STRATA_BENCH_TYPES="${MOE_TYPES:-q20,iq2xs,q80}" \
		STRATA_BENCH_MOE_MODS="$mods" "$PT" -test.run '^TestBenchMoeDecode$' -test.v -test.timeout 170s
	for m in ${MOE_MODELS:-q30-q2_0 q80-iq2_xs}; do
		for tree in new main; do
			local c=$CO
			[ $tree = main ] && c=$w/co-main
			step "time-$m-$tree" 45 env STRATA_CO_DIR="$c" STRATA_DECODE_PROFILE=1 STRATA_BENCH_MODEL="$MODELS/$m.gguf" \
				STRATA_DECODE_MODES=pdl,pdl STRATA_BENCH_TOKENS=128 STRATA_BENCH_CTX=1024 \
				"$GT" -test.run '^TestDecodeProfile$' -test.v -test.timeout 60s
		done
	done
	{
		echo "## parity moe_decode"
		grep -cE -- '--- PASS: TestParity/sm_90/moe_decode/' "$w/logs/parity-moe.log" | sed 's/^/passed /'
		grep -E -- '--- FAIL' "$w/logs/parity-moe.log" | head -20
		echo "## ptxas (main, new)"
		for f in "$w"/logs/ptxas-*.log; do
			[ -e "$f" ] || continue
			echo "${f##*/}:"
			grep -hE 'spill|Used' "$f" | sort | uniq -c | head -12
		done
		echo "## bench-moe"
		cat "$w/logs/bench-moe.txt" 2>/dev/null || tail -30 "$w/logs/bench-moe.log"
		echo "## decode tokens (new vs main moe_decode)"
		grep -HE '^ROW|loaded in' "$w"/logs/time-*.log | sed 's|.*/logs/||' | head -40
	} >>"$sum"
	tar -C "$w" -czf "$OUT/moe-logs.tar.gz" logs
	cat "$sum"
}

case "${1:-}" in
build) build ;;
run) run ;;
*)
	echo "usage: mods.sh build|run" >&2
	exit 2
	;;
esac
