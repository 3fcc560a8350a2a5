#!/usr/bin/env bash
# attention_decode splitq (split + reduceq in one launch) against split + reduceq, session 7,
# helper attnf: ONE H200 call (timeout 180 s). Trimmed from 2026-11-30-moe-decode's run.sh
# (session 7's moedec) and final-s6/check.sh.
#
#   run.sh build   build machine, repository root: parity.test, strata-run.test, gpu.test
#       (CGO_ENABLED=0, -tags strata_nodemo, stripped, xz) and every sm_90 code object
#       (co.tar.xz) into $DEV (default /work/main/.dev-attnf).
#   run.sh run     device, repository root of the device copy (carry .dev-attnf), $OUT set:
#       1. setup: unpack, cut mmq/moe_prefill to one tile (strip_ptx.py), ptxas every PTX
#          (ptxas -v of attention_decode kept: registers, spills per kernel);
#       2. synth the 30B-A3B Q2_0 model, then TestDecodeProfile on it, modes
#          base,attnsplit,base,attnsplit (splitq against split + reduceq on one engine; the
#          test fails when the greedy tokens differ) on a quiet GPU;
#       3. together: parity attention_decode splitq_f16, splitq_q8 and reduce_(f16|q8) (three
#          processes; splitq runs split + reduceq too and must equal it byte for byte) and
#          the GPU-vs-CPU engine tests (splitq is the engine's default now).
#   STRATA_ATTNF_DRY=1 run.sh run   the same flow with stub binaries (no GPU).
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)

build() {
	set -e
	cd "$here/../../.."
	local d=${DEV:-/work/main/.dev-attnf} target=sm_90 flags
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
	cp "$here/run.sh" "$here/../2026-11-29-prefill-async/strip_ptx.py" "$d/"
	git rev-parse HEAD >"$d/commit"
	git status --porcelain >>"$d/commit"
	ls -la "$d"
	du -sh "$d"
}

run() {
	: "${OUT:?set OUT}"
	local d=$here w=/tmp/attnf t0=$SECONDS dry=${STRATA_ATTNF_DRY:-0} B=${STRATA_ATTNF_BUDGET:-172}
	rm -rf "$w" && mkdir -p "$w/logs" "$w/models"
	local L=$w/logs sum=$OUT/summary.md
	if [ "$dry" = 1 ]; then
		printf '#!/bin/sh\necho "stub $0 $*"; env | grep -E "^STRATA_" | sort\nsleep 1\necho PASS\n' >"$w/stub" && chmod +x "$w/stub"
		for b in parity sr gpu; do cp "$w/stub" "$w/$b.test"; done
		mkdir -p "$w/co/sm_90" "$w/eco/sm_90"
		: >"$w/models/q30-q2_0.gguf"
	else
		python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' "$d/co.tar.xz" "$w"
		for b in parity:parity strata-run:sr gpu:gpu; do
			python3 -c 'import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2], "wb"))' "$d/${b%%:*}.test.xz" "$w/${b#*:}.test" && chmod +x "$w/${b#*:}.test"
		done
		(cd "$w/co" && find . -type f) | while read -r rel; do
			mkdir -p "$w/eco/$(dirname "$rel")"
			case $rel in
			*/mmq.ptx | */moe_prefill.ptx) python3 "$d/strip_ptx.py" "$w/co/$rel" "$w/eco/$rel" '_mma_r(64|128)t(32|64)$' >/dev/null ;;
			*) cp "$w/co/$rel" "$w/eco/$rel" ;;
			esac
		done
		local P
		P=$(command -v ptxas || echo /usr/local/cuda/bin/ptxas)
		"$P" -v -arch=sm_90 "$w/co/sm_90/attention_decode.ptx" -o /dev/null >"$L/ptxas-attn.log" 2>&1 &
		# assemble what the tests and the engine load (no driver JIT inside a timing)
		find "$w/eco" -name '*.ptx' | xargs -P 16 -I{} sh -c '"$1" -arch=sm_90 "$2" -o "$2.cubin" >/dev/null 2>&1 && mv "$2.cubin" "$2"' _ "$P" {}
		wait
		{ nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv; nproc; } >"$L/gpu.txt" 2>&1
	fi
	export STRATA_REQUIRE_GPU=1
	cat "$d/commit" >"$L/commit" 2>/dev/null
	echo "# attnf run.sh ($(date -u +%FT%TZ)), dry $dry, commit $(head -1 "$d/commit" 2>/dev/null)" >"$sum"
	say() { echo "- $* at $((SECONDS - t0)) s" | tee -a "$sum"; }
	left() { echo $((B - (SECONDS - t0))); }
	say setup
	[ "$dry" = 1 ] || STRATA_CO_DIR=$w/eco STRATA_RUN_ARGS="synth --arch qwen3moe --preset qwen3-30b-a3b --type q2_0 -o $w/models/q30-q2_0.gguf" \
		timeout 60 "$w/sr.test" -test.run '^TestCLI$' -test.v >"$L/synth-30b.log" 2>&1
	say "synth 30b exit $?"
	local lim
	lim=$(($(left) - 95)) && [ $lim -gt 45 ] && lim=45
	STRATA_CO_DIR=$w/eco STRATA_DECODE_PROFILE=1 STRATA_BENCH_MODEL=$w/models/q30-q2_0.gguf STRATA_DECODE_MODES=${STRATA_ATTNF_MODES:-base,attnsplit,base,attnsplit} \
		STRATA_BENCH_TOKENS=128 STRATA_BENCH_CTX=1024 timeout $lim "$w/gpu.test" -test.run '^TestDecodeProfile$' -test.v -test.timeout $((lim - 2))s >"$L/time-q30-q2_0.log" 2>&1
	say "time-q30-q2_0 exit $? (limit $lim s)"
	rm -f "$w"/models/*.gguf
	lim=$(($(left) - 4)) && [ $lim -gt 100 ] && lim=100
	local pids=() g i=0
	for g in splitq_f16 splitq_q8 'reduce_(f16|q8)'; do
		STRATA_CO_DIR=$w/eco timeout $lim "$w/parity.test" -test.v -test.timeout $((lim - 3))s -test.run "TestParity/sm_90/attention_decode/$g/" >"$L/parity-$i.log" 2>&1 &
		pids+=($!) i=$((i + 1))
	done
	STRATA_CO_DIR=$w/eco timeout $((lim < 70 ? lim : 70)) "$w/sr.test" -test.run '^(TestGPUEngineMatchesCPU|TestGPUEngineNextMatchesCPU)$' -test.v -test.timeout 65s >"$L/engine-tests.log" 2>&1
	say "engine tests exit $?"
	for i in "${!pids[@]}"; do wait "${pids[$i]}"; say "parity-$i exit $?"; done
	{
		echo
		echo "## parity attention_decode (0: splitq_f16, 1: splitq_q8, 2: reduce_f16/q8)"
		for f in "$L"/parity-*.log; do
			echo "- $(basename "$f"): passed $(grep -cE '^\s*--- PASS: TestParity/.*/.*/.*/' "$f"), failed $(grep -cE '^\s*--- FAIL: TestParity/.*/.*/.*/' "$f") $(grep -E '^(ok|PASS|FAIL)$' "$f" | tr '\n' ' ')"
		done
		grep -hE -A3 "^\s*--- FAIL|panic" "$L"/parity-*.log | head -30
		grep -hE "splitq.*same" "$L"/parity-*.log | head -60
		echo "## ptxas attention_decode"
		grep -hE "Compiling entry|spill|Used" "$L/ptxas-attn.log" | sed -E "s/ptxas info *: //" | paste - - - | head -16
		echo "## engine tests"
		grep -E "^\s*--- (PASS|FAIL): TestGPU|^(ok|FAIL|PASS)$|panic" "$L/engine-tests.log" | head
		echo "## decode token (30B-A3B Q2_0)"
		grep -hE "^model|^ROW|differ|FAIL|panic|replay" "$L"/time-*.log
	} >>"$sum"
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
