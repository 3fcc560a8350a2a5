#!/usr/bin/env bash
# Lead's final H200 call of session 3: the merged main, every sm_90 family's parity and the
# GPU engine's tests in one call, then the decode benchmarks and one engine decode row.
#
#   final.sh build   build machine (Go + clang-19), repository root: parity.test and
#       strata-run.test (CGO_ENABLED=0, -tags strata_nodemo for strata-run, stripped, xz), the
#       sm_90 PTX of every family (gzip), into $DEV (default /work/main/.dev-final3)
#   final.sh run     GPU machine, repository root of the device copy (carry .dev-final3), $OUT
#       set. Phase 1, all at once (the GPU is shared; correctness only): parity of every
#       sm_90 family (one process per family or type group, fresh seeds,
#       STRATA_REQUIRE_GPU=1), the GPU-vs-CPU engine tests, synth of the 30B-A3B Q2_0 model.
#       Phase 2, one at a time: TestBenchDecode (mmvq), TestBenchMoeDecode, the engine's decode
#       row (30B Q2_0, every expert resident). Every step has its own time limit inside
#       STRATA_FINAL_BUDGET seconds (default 300). Writes $OUT/summary.md and $OUT/logs.tgz
#       plus the benchmark tables.
#   STRATA_FINAL_ENGINE=0: no engine tests, synth or engine row (another script runs them).
#   STRATA_FINAL_DRY=1 final.sh run   the same flow with a stub binary (no GPU).
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)

build() {
	set -e
	cd "$here/../../.."
	local d=${DEV:-/work/main/.dev-final3} target=sm_90
	rm -rf "$d" && mkdir -p "$d/co"
	export CGO_ENABLED=0
	go test -c -trimpath -ldflags=-s -tags strata_nodemo -o "$d/strata-run.test" ./cmd/strata-run
	go test -c -trimpath -ldflags=-s -o "$d/parity.test" ./parity
	xz -9 -T2 "$d/strata-run.test" "$d/parity.test"
	local flags
	flags=$(awk -F'\t' -v t="$target" '$1 == "target" && $2 == t { print $6 }' kernels/out/objects.txt)
	awk -F'\t' -v t="$target" '$1 == "object" && $2 == t { print $4 "\t" $5 }' kernels/out/objects.txt |
		while IFS=$'\t' read -r src obj; do
			mkdir -p "$d/co/$(dirname "$obj")"
			# shellcheck disable=SC2086 # flags are a list
			clang-19 $flags -I "$(dirname "$src")" -I kernels/out/include "$src" -o "$d/co/$obj"
		done
	tar -C "$d" -czf "$d/co.tar.gz" co && rm -r "$d/co"
	cp "$here/final.sh" "$d/"
	git rev-parse HEAD >"$d/commit"
	git status --porcelain >>"$d/commit"
	ls -la "$d"
	du -sh "$d"
}

run() {
	local d=$here w=/tmp/final3 t0=$SECONDS budget=${STRATA_FINAL_BUDGET:-300} dry=${STRATA_FINAL_DRY:-0}
	: "${OUT:?set OUT}"
	rm -rf "$w" && mkdir -p "$w/logs" "$w/models"
	local out=$w/logs pt=$w/parity.test st=$w/sr.test
	left() { echo $((budget - (SECONDS - t0) - $1)); }
	lim() { local l; l=$(left "$2"); [ "$l" -lt "$1" ] && echo $((l > 5 ? l : 5)) || echo "$1"; }
	if [ "$dry" = 1 ]; then
		printf '#!/bin/sh\necho "stub $0 $*"; sleep %s\necho "--- PASS: TestParity/sm_90/x/y/z"\necho PASS\n' "${STRATA_FINAL_DRY_SLEEP:-1}" >"$pt"
		cp "$pt" "$st"
		chmod +x "$pt" "$st"
		mkdir -p "$w/co"
	else
		tar -C "$w" -xzf "$d/co.tar.gz"
		for b in parity strata-run; do
			python3 -c 'import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2], "wb"))' "$d/$b.test.xz" "$w/$b.tmp"
		done
		mv "$w/parity.tmp" "$pt" && mv "$w/strata-run.tmp" "$st" && chmod +x "$pt" "$st"
		nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm,clocks.max.mem --format=csv >"$out/gpu.txt" 2>&1
	fi
	export STRATA_CO_DIR=$w/co STRATA_REQUIRE_GPU=1
	cat "$d/commit" >"$out/commit" 2>/dev/null
	local sum="$OUT/summary.md"
	echo "# final.sh run ($(date -u +%FT%TZ)), budget ${budget}s, dry $dry, commit $(head -1 "$d/commit" 2>/dev/null)" >"$sum"
	echo >>"$sum"
	# Phase 1: parity processes, engine tests and synth together.
	local p1=$(lim 150 120) pids=() i=0 g
	for g in "mmvq/(f16|bf16)" "mmvq/(q80|q20|q4k)" "mmvq/(q6k|iq2xs|iq3xxs)" "mmvq/(iq3s|iq1m)" \
		"mmq/(q80|q20)" "mmq/(q4k|q6k)" "mmq/(iq2xs|iq3xxs)" "mmq/(iq3s|iq1m)" \
		"moe_prefill/(q80|q20)" "moe_prefill/(q4k|q6k)" "moe_prefill/(iq2xs|iq3xxs)" "moe_prefill/(iq3s|iq1m)" \
		"(dequant|moe_decode)" "(quantize_q8_1|imma_tile|rmsnorm|rmsnorm_row|rope|embed|sample)" \
		"(attention_decode|attention_prefill|gated_delta_net)"; do
		echo "$g" >"$out/parity-$i.group"
		timeout "$p1" "$pt" -test.v -test.timeout "$((p1 - 3))s" -test.run "TestParity/sm_90/$g/" >"$out/parity-$i.log" 2>&1 &
		pids+=($!)
		i=$((i + 1))
	done
	local engine=${STRATA_FINAL_ENGINE:-1} eng syn
	if [ "$engine" = 1 ]; then
		timeout "$p1" "$st" -test.run '^(TestGPUEngineMatchesCPU|TestGPUEngineNextMatchesCPU)$' -test.v -test.timeout 300s >"$out/engine-tests.log" 2>&1 &
		eng=$!
		STRATA_RUN_ARGS="synth --arch qwen3moe --preset qwen3-30b-a3b --type q2_0 -o $w/models/q30-q2_0.gguf" \
			timeout "$p1" "$st" -test.run '^TestCLI$' -test.v -test.timeout 300s >"$out/synth.log" 2>&1 &
		syn=$!
	fi
	wait "${pids[@]}"
	echo "- phase 1 parity: done at $((SECONDS - t0)) s (limit $p1 s)" | tee -a "$sum"
	if [ "$engine" = 1 ]; then
		wait "$eng"
		echo "- engine tests: exit $? at $((SECONDS - t0)) s" | tee -a "$sum"
		wait "$syn"
		echo "- synth: exit $? at $((SECONDS - t0)) s" | tee -a "$sum"
	fi
	# Phase 2: benchmarks, one at a time.
	step() { # step NAME SECONDS-LIMIT CMD...
		local name=$1 secs=$2 s=$SECONDS
		shift 2
		timeout "$secs" "$@" >"$out/$name.log" 2>&1
		echo "- $name: exit $? in $((SECONDS - s)) s (limit $secs s, $((SECONDS - t0)) s so far)" | tee -a "$sum"
	}
	step bench-decode "$(lim 45 75)" env STRATA_BENCH=1 STRATA_BENCH_OUT="$out" "$pt" -test.v -test.timeout 120s -test.run '^TestBenchDecode$'
	step bench-moe "$(lim 35 40)" env STRATA_BENCH=1 STRATA_BENCH_OUT="$out" "$pt" -test.v -test.timeout 120s -test.run '^TestBenchMoeDecode$'
	if [ -s "$w/models/q30-q2_0.gguf" ] || { [ "$dry" = 1 ] && [ "$engine" = 1 ]; }; then
		step bench-engine "$(lim 40 0)" env STRATA_GPU_BENCH=1 STRATA_BENCH_MODEL="$w/models/q30-q2_0.gguf" STRATA_BENCH_OUT="$out" \
			STRATA_BENCH_LABEL=q30-q2_0 STRATA_BENCH_POLICIES=decayed STRATA_BENCH_CTX=4608 STRATA_BENCH_TOKENS=64 STRATA_BENCH_BUDGETS_MIB=0 \
			"$st" -test.run '^TestGPUBench$' -test.v -test.timeout 300s
	fi
	rm -f "$w"/models/*.gguf
	# Tables.
	cnt() { echo "passed $(cat "$@" | grep -cE '^\s*--- PASS: TestParity/.*/.*/.*/'), failed $(cat "$@" | grep -cE '^\s*--- FAIL: TestParity/.*/.*/.*/'), skipped $(cat "$@" | grep -cE '^\s*--- SKIP: TestParity/.*/.*/.*/')"; }
	{
		echo
		echo "## parity (every sm_90 family)"
		echo "all: $(cnt "$out"/parity-*.log)"
		for f in "$out"/parity-*.log; do echo "- ${f%.log}: $(cat "${f%.log}.group") ... $(cnt "$f")" | sed "s|$out/||"; done
		grep -hE "^\s*--- FAIL|panic|test timed out" "$out"/parity-*.log | head -20
		echo
		echo "## engine tests"
		grep -E "^\s*--- |^(ok|FAIL|PASS)|NMSE|near tie|panic" "$out/engine-tests.log" | head -40
		echo
		echo "## benchmarks"
		for f in bench.txt bench-moe.txt; do [ -f "$out/$f" ] && { echo "--- $f"; cat "$out/$f"; }; done
		grep -hE "^ROW |ceilings" "$out"/bench-engine.log 2>/dev/null
		grep -hE "FAIL|panic" "$out"/bench-*.log | head
		echo "total: $((SECONDS - t0)) s"
	} >>"$sum"
	cp "$out"/bench*.txt "$OUT"/ 2>/dev/null
	tar -C "$w" -czf "$OUT/logs.tgz" logs
	cat "$sum"
	true
}

case "${1:-run}" in
build) build ;;
run) run ;;
*)
	echo "usage: $0 build | run" >&2
	exit 2
	;;
esac
