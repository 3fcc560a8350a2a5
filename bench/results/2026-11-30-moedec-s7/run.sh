#!/usr/bin/env bash
# moe_decode phase 4 (the whole MoE layer in one launch) against phases 3 + 2, session 7,
# helper moedec: ONE H200 call (timeout 200 s). Trimmed from final-s6/check.sh.
#
#   run.sh build   build machine, repository root: parity.test, strata-run.test, gpu.test
#       (CGO_ENABLED=0, -tags strata_nodemo, stripped, xz), every sm_90 code object
#       (co.tar.xz) and four moe_decode build variants (mods.tar.xz, same ABI: nospf =
#       -DSTRATA_MOE_NO_SLOTPF, without the slot tables' L1 prefetch; ku8 = -DSTRATA_MOE_KU=8,
#       down over 8 experts a pass; u2 = -DSTRATA_MOE_U=2, gate/up 2 groups a pass; rp4 =
#       -DSTRATA_MOE_RP=4, gate/up 4 gate + 4 up rows a pass) into $DEV
#       (default /work/main/.dev-moedec).
#   run.sh run     device, repository root of the device copy (carry .dev-moedec), $OUT set:
#       1. setup: unpack, cut mmq/moe_prefill to one tile (strip_ptx.py), ptxas every PTX
#          (ptxas -v of moe_decode kept: registers, spills);
#       2. together: parity moe_decode (every type and case, phase 4's "one" check included),
#          the GPU-vs-CPU engine tests (phase 4 is the engine's default now), synth of the
#          two models;
#       3. TestBenchMoeDecode (q20, iq2xs, q80) with nospf, ku8, u2 and rp4 beside the tree's kernel;
#       4. TestDecodeProfile per model, modes pdl,moesplit,pdl,moesplit (phase 4 against
#          phases 3 + 2 on one engine; the test fails when the greedy tokens differ).
#   STRATA_MOEDEC_DRY=1 run.sh run   the same flow with stub binaries (no GPU).
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)

build() {
	set -e
	cd "$here/../../.."
	local d=${DEV:-/work/main/.dev-moedec} target=sm_90 flags t
	rm -rf "$d" && mkdir -p "$d/co"
	export CGO_ENABLED=0
	go test -c -trimpath -ldflags=-s -tags strata_nodemo -o "$d/strata-run.test" ./cmd/strata-run
	go test -c -trimpath -ldflags=-s -tags strata_nodemo -o "$d/parity.test" ./parity
	go test -c -trimpath -ldflags=-s -tags strata_nodemo -o "$d/gpu.test" ./model/gpu
	xz -9e -T2 "$d"/*.test
	flags=$(awk -F'\t' -v t="$target" '$1 == "target" && $2 == t { print $6 }' kernels/out/objects.txt)
	awk -F'\t' -v t="$target" '$1 == "object" && $2 == t { print $4 "\t" $5 }' kernels/out/objects.txt |
		while IFS=$'\t' read -r src obj; do
			mkdir -p "$d/co/$(dirname "$obj")"
			# shellcheck disable=SC2086 # flags are a list
			clang-19 $flags -I "$(dirname "$src")" -I kernels/out/include "$src" -o "$d/co/$obj"
		done
	tar -C "$d" -cf - co | xz -9e -T2 >"$d/co.tar.xz" && rm -r "$d/co"
	t=$(mktemp -d)
	mkdir -p "$t/ku8/sm_90" "$t/u2/sm_90" "$t/nospf/sm_90" "$t/rp4/sm_90"
	# shellcheck disable=SC2086
	clang-19 $flags -DSTRATA_MOE_KU=8 -I kernels/out/sm_90 -I kernels/out/include kernels/out/sm_90/moe_decode.cu -o "$t/ku8/sm_90/moe_decode.ptx"
	# shellcheck disable=SC2086
	clang-19 $flags -DSTRATA_MOE_U=2 -I kernels/out/sm_90 -I kernels/out/include kernels/out/sm_90/moe_decode.cu -o "$t/u2/sm_90/moe_decode.ptx"
	# shellcheck disable=SC2086
	clang-19 $flags -DSTRATA_MOE_NO_SLOTPF -I kernels/out/sm_90 -I kernels/out/include kernels/out/sm_90/moe_decode.cu -o "$t/nospf/sm_90/moe_decode.ptx"
	# shellcheck disable=SC2086
	clang-19 $flags -DSTRATA_MOE_RP=4 -I kernels/out/sm_90 -I kernels/out/include kernels/out/sm_90/moe_decode.cu -o "$t/rp4/sm_90/moe_decode.ptx"
	tar -C "$t" -cf - ku8 u2 nospf rp4 | xz -9e -T2 >"$d/mods.tar.xz" && rm -r "$t"
	cp "$here/run.sh" "$here/../2026-11-29-prefill-async/strip_ptx.py" "$d/"
	git rev-parse HEAD >"$d/commit"
	git status --porcelain >>"$d/commit"
	ls -la "$d"
	du -sh "$d"
}

run() {
	: "${OUT:?set OUT}"
	local d=$here w=/tmp/moedec t0=$SECONDS dry=${STRATA_MOEDEC_DRY:-0}
	rm -rf "$w" && mkdir -p "$w/logs" "$w/models"
	local L=$w/logs sum=$OUT/summary.md
	if [ "$dry" = 1 ]; then
		printf '#!/bin/sh\necho "stub $0 $*"; env | grep -E "^STRATA_" | sort\nsleep 1\necho PASS\n' >"$w/stub" && chmod +x "$w/stub"
		for b in parity sr gpu; do cp "$w/stub" "$w/$b.test"; done
		mkdir -p "$w/co/sm_90" "$w/eco/sm_90" "$w/ku8/sm_90" "$w/u2/sm_90" "$w/nospf/sm_90" "$w/rp4/sm_90"
	else
		python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' "$d/co.tar.xz" "$w"
		python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' "$d/mods.tar.xz" "$w"
		for b in parity:parity strata-run:sr gpu:gpu; do
			python3 -c 'import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2], "wb"))' "$d/${b%%:*}.test.xz" "$w/${b#*:}.test" && chmod +x "$w/${b#*:}.test"
		done
		(cd "$w/co" && find . -type f) | while read -r rel; do
			mkdir -p "$w/eco/$(dirname "$rel")"
			case $rel in
			*/mmq.ptx | */moe_prefill.ptx) python3 "$d/strip_ptx.py" "$w/co/$rel" "$w/eco/$rel" '_mma_r(64|128)t64$' >/dev/null ;;
			*) cp "$w/co/$rel" "$w/eco/$rel" ;;
			esac
		done
		local P
		P=$(command -v ptxas || echo /usr/local/cuda/bin/ptxas)
		for m in eco ku8 u2 nospf rp4; do cp "$w/$m/sm_90/moe_decode.ptx" "$w/moe-$m.ptx" && "$P" -v -arch=sm_90 "$w/moe-$m.ptx" -o /dev/null >"$L/ptxas-moe-$m.log" 2>&1 & done
		# assemble what the benchmarks and the engine load (no driver JIT inside a timing)
		find "$w/eco" "$w/ku8" "$w/u2" "$w/nospf" "$w/rp4" -name '*.ptx' | xargs -P 16 -I{} sh -c '"$1" -arch=sm_90 "$2" -o "$2.cubin" >/dev/null 2>&1 && mv "$2.cubin" "$2"' _ "$P" {}
		wait
		{ nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv; nproc; } >"$L/gpu.txt" 2>&1
	fi
	export STRATA_REQUIRE_GPU=1
	cat "$d/commit" >"$L/commit" 2>/dev/null
	echo "# moedec run.sh ($(date -u +%FT%TZ)), dry $dry, commit $(head -1 "$d/commit" 2>/dev/null)" >"$sum"
	say() { echo "- $* at $((SECONDS - t0)) s" | tee -a "$sum"; }
	say setup
	(
		STRATA_CO_DIR=$w/eco STRATA_RUN_ARGS="synth --arch qwen3moe --preset qwen3-30b-a3b --type q2_0 -o $w/models/q30-q2_0.gguf" timeout 80 "$w/sr.test" -test.run '^TestCLI$' -test.v >"$L/synth-30b.log" 2>&1
		STRATA_CO_DIR=$w/eco STRATA_RUN_ARGS="synth --arch qwen3next --preset qwen3-next-80b-a3b --type iq2_xs -o $w/models/q80-iq2_xs.gguf" timeout 80 "$w/sr.test" -test.run '^TestCLI$' -test.v >"$L/synth-80b.log" 2>&1
	) &
	local syn=$!
	STRATA_CO_DIR=$w/eco timeout 60 "$w/parity.test" -test.v -test.timeout 55s -test.run 'TestParity/sm_90/moe_decode/' >"$L/parity-moe.log" 2>&1 &
	local par=$!
	STRATA_CO_DIR=$w/eco timeout 60 "$w/sr.test" -test.run '^(TestGPUEngineMatchesCPU|TestGPUEngineNextMatchesCPU)$' -test.v -test.timeout 55s >"$L/engine-tests.log" 2>&1
	say "engine tests exit $?"
	wait $par
	say "parity moe_decode exit $?"
	STRATA_CO_DIR=$w/eco STRATA_BENCH=1 STRATA_BENCH_OUT=$L STRATA_BENCH_TYPES=q20,iq2xs,q80 STRATA_BENCH_MOE_MODS="nospf=$w/nospf,ku8=$w/ku8,u2=$w/u2,rp4=$w/rp4" \
		timeout 35 "$w/parity.test" -test.v -test.timeout 32s -test.run '^TestBenchMoeDecode$' >"$L/bench-moe.log" 2>&1
	say "bench-moe exit $?"
	wait $syn
	say synth
	local m lim
	for m in q30-q2_0 q80-iq2_xs; do
		[ -s "$w/models/$m.gguf" ] || [ "$dry" = 1 ] || continue
		# what is left of ${STRATA_MOEDEC_BUDGET:-188} s, less 6 s for the tables
		lim=$((${STRATA_MOEDEC_BUDGET:-188} - (SECONDS - t0) - 6))
		[ $lim -gt 45 ] && lim=45
		[ $lim -ge 12 ] || { say "time-$m skipped (${lim} s left)"; continue; }
		STRATA_CO_DIR=$w/eco STRATA_DECODE_PROFILE=1 STRATA_BENCH_MODEL=$w/models/$m.gguf STRATA_DECODE_MODES=${STRATA_MOEDEC_MODES:-pdl,moesplit,pdl,moesplit} \
			STRATA_BENCH_TOKENS=128 STRATA_BENCH_CTX=1024 timeout $lim "$w/gpu.test" -test.run '^TestDecodeProfile$' -test.v -test.timeout $((lim - 2))s >"$L/time-$m.log" 2>&1
		say "time-$m exit $? (limit $lim s)"
	done
	rm -f "$w"/models/*.gguf
	{
		echo
		echo "## parity moe_decode"
		echo "passed $(grep -cE '^\s*--- PASS: TestParity/.*/.*/.*/' "$L/parity-moe.log"), failed $(grep -cE '^\s*--- FAIL: TestParity/.*/.*/.*/' "$L/parity-moe.log") $(grep -E '^(ok|PASS|FAIL)$' "$L/parity-moe.log" | tr '\n' ' ')"
		grep -hE -A3 "^\s*--- FAIL|panic" "$L/parity-moe.log" | head -30
		echo "## ptxas moe_decode (eco: per kernel; ku8, u2, nospf, rp4: counts)"
		grep -hE "Compiling entry|spill|Used" "$L/ptxas-moe-eco.log" | sed -E "s/ptxas info *: //" | paste - - - | head -10
		grep -hE 'spill|Used' "$L"/ptxas-moe-ku8.log "$L"/ptxas-moe-u2.log "$L"/ptxas-moe-nospf.log "$L"/ptxas-moe-rp4.log | sort | uniq -c | head -20
		echo "## engine tests"
		grep -E "^\s*--- (PASS|FAIL): TestGPU|^(ok|FAIL|PASS)$|panic" "$L/engine-tests.log" | head
		echo "## bench-moe"
		cat "$L/bench-moe.txt" 2>/dev/null || tail -30 "$L/bench-moe.log"
		echo "## decode token"
		grep -hE "^model|^ROW|differ|FAIL|panic" "$L"/time-*.log
	} >>"$sum"
	cp "$L/bench-moe.txt" "$OUT/" 2>/dev/null
	tar -C "$w" -czf "$OUT/logs.tgz" logs
	cat "$sum"
}

case "${1:-}" in
build) build ;;
run) run ;;
*)
	echo "usage: run.sh build|run" >&2
	exit 2
	;;
esac
