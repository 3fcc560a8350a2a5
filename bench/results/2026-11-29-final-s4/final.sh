#!/usr/bin/env bash
# Lead's final H200 call of session 4: the merged main in one call — every sm_90 family's
# parity (the attention and delta-net families each in their own process), the GPU-vs-CPU
# engine tests, then the decode benchmarks (mmvq with both timings, moe_decode), the prefill
# benchmarks per tile for this main (N) against main before the session's staging change
# (O, the trees of bench/results/2026-11-29-mmq-ncu call 3), and the engine: 30B-A3B Q2_0
# resident decode (graph against bound launches) and the expert-copy group size and
# look-ahead prefetch at a budget where experts miss.
#
#   final.sh build   build machine, repository root: parity.test and strata-run.test
#       (CGO_ENABLED=0, -tags strata_nodemo, stripped, xz), every sm_90 code object (co/),
#       the engine's set with mmq/moe_prefill cut to r64t64 and r128t64 (eco/), per-tile
#       prefill trees for N and O (trees/), into $DEV (default /work/main/.dev-final4).
#       O_TREES=path/to/trees.tgz (call 3's bundle) gives the O trees.
#   final.sh run     GPU machine, repository root of the device copy (carry .dev-final4),
#       $OUT set. STRATA_FINAL_BUDGET seconds in all (default 500). Writes $OUT/summary.md,
#       the benchmark tables and $OUT/logs.tgz.
#   STRATA_FINAL_DRY=1 final.sh run   the same flow with stub binaries (no GPU).
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
strip=$here/../2026-11-29-prefill-async/strip_ptx.py

build() {
	set -e
	cd "$here/../../.."
	local d=${DEV:-/work/main/.dev-final4} target=sm_90 flags tmp
	rm -rf "$d" && mkdir -p "$d/co" "$d/eco"
	tmp=$(mktemp -d)
	export CGO_ENABLED=0
	go test -c -trimpath -ldflags=-s -tags strata_nodemo -o "$d/strata-run.test" ./cmd/strata-run
	go test -c -trimpath -ldflags=-s -tags strata_nodemo -o "$d/parity.test" ./parity
	xz -9 -T2 "$d/strata-run.test" "$d/parity.test"
	flags=$(awk -F'\t' -v t="$target" '$1 == "target" && $2 == t { print $6 }' kernels/out/objects.txt)
	awk -F'\t' -v t="$target" '$1 == "object" && $2 == t { print $3 "\t" $4 "\t" $5 }' kernels/out/objects.txt |
		while IFS=$'\t' read -r fam src obj; do
			mkdir -p "$d/co/$(dirname "$obj")" "$d/eco/$(dirname "$obj")"
			# shellcheck disable=SC2086 # flags are a list
			clang-19 $flags -I "$(dirname "$src")" -I kernels/out/include "$src" -o "$d/co/$obj"
			case $fam in
			mmq | moe_prefill)
				python3 "$strip" "$d/co/$obj" "$d/eco/$obj" '_mma_r(64|128)t64$'
				for t in r128t64 r64t64 r64t128; do
					pt=$t
					[ "$fam" = moe_prefill ] && [ $t = r64t128 ] && pt=r128t32
					mkdir -p "$tmp/trees/N/$t/$(dirname "$obj")"
					python3 "$strip" "$d/co/$obj" "$tmp/trees/N/$t/$obj" "_mma_$pt\$"
				done
				;;
			*) cp "$d/co/$obj" "$d/eco/$obj" ;;
			esac
		done
	if [ -n "${O_TREES:-}" ]; then
		tar -C "$tmp" -xzf "$O_TREES" trees/O
	fi
	tar -C "$d" -czf "$d/co.tar.gz" co && rm -r "$d/co"
	tar -C "$d" -czf "$d/eco.tar.gz" eco && rm -r "$d/eco"
	tar -C "$tmp" -czf "$d/trees.tgz" trees
	rm -rf "$tmp"
	cp "$here/final.sh" "$d/"
	git rev-parse HEAD >"$d/commit"
	git status --porcelain >>"$d/commit"
	ls -la "$d"
	du -sh "$d"
}

run() {
	local d=$here w=/tmp/final4 t0=$SECONDS budget=${STRATA_FINAL_BUDGET:-500} dry=${STRATA_FINAL_DRY:-0}
	: "${OUT:?set OUT}"
	rm -rf "$w" && mkdir -p "$w/logs" "$w/models"
	local out=$w/logs pt=$w/parity.test st=$w/sr.test
	left() { echo $((budget - (SECONDS - t0) - $1)); }
	# lim WANT RESERVE: WANT seconds, cut to what is left after RESERVE (at least 5)
	lim() { local l; l=$(left "$2"); [ "$l" -lt "$1" ] && echo $((l > 5 ? l : 5)) || echo "$1"; }
	if [ "$dry" = 1 ]; then
		printf '#!/bin/sh\necho "stub $0 $*"; env | grep -E "^STRATA_(CO_DIR|BENCH_[A-Z]+)=" | sort; sleep %s\ncase "$STRATA_RUN_ARGS" in *" -o "*) f=${STRATA_RUN_ARGS##* -o }; : >"$f";; esac\necho "--- PASS: TestParity/sm_90/x/y/z"\necho "ROW | stub |"\necho PASS\n' "${STRATA_FINAL_DRY_SLEEP:-1}" >"$pt"
		cp "$pt" "$st"
		chmod +x "$pt" "$st"
		mkdir -p "$w/co" "$w/eco" "$w/trees/N/r64t64" "$w/trees/O/r64t64"
	else
		tar -C "$w" -xzf "$d/co.tar.gz"
		tar -C "$w" -xzf "$d/eco.tar.gz"
		tar -C "$w" -xzf "$d/trees.tgz"
		for b in parity strata-run; do
			python3 -c 'import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2], "wb"))' "$d/$b.test.xz" "$w/$b.tmp"
		done
		mv "$w/parity.tmp" "$pt" && mv "$w/strata-run.tmp" "$st" && chmod +x "$pt" "$st"
		{ nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm,clocks.max.mem --format=csv; nproc; free -g; } >"$out/gpu.txt" 2>&1
	fi
	export STRATA_REQUIRE_GPU=1
	cat "$d/commit" >"$out/commit" 2>/dev/null
	local sum="$OUT/summary.md"
	echo "# final.sh run ($(date -u +%FT%TZ)), budget ${budget}s, dry $dry, commit $(head -1 "$d/commit" 2>/dev/null)" >"$sum"
	echo >>"$sum"
	step() { # step NAME SECONDS-LIMIT CMD...
		local name=$1 secs=$2 s=$SECONDS
		shift 2
		timeout "$secs" "$@" >"$out/$name.log" 2>&1
		echo "- $name: exit $? in $((SECONDS - s)) s (limit $secs s, $((SECONDS - t0)) s so far)" | tee -a "$sum"
	}
	# Phase 1, together: parity (the float64 attention/delta-net references first, each
	# family alone), the GPU-vs-CPU engine tests, synth of the 30B-A3B Q2_0 model.
	local p1=$(lim 210 190) pids=() i=0 g
	for g in attention_decode attention_prefill gated_delta_net \
		"mmvq/(f16|bf16|q80)" "mmvq/(q20|q4k|q6k)" "mmvq/(iq2xs|iq3xxs|iq3s|iq1m)" \
		"mmq/(q80|q20)" "mmq/(q4k|q6k)" "mmq/(iq2xs|iq3xxs)" "mmq/(iq3s|iq1m)" \
		"moe_prefill/(q80|q20|q4k|q6k)" "moe_prefill/(iq2xs|iq3xxs|iq3s|iq1m)" \
		"(dequant|moe_decode)" "(quantize_q8_1|imma_tile|rmsnorm|rmsnorm_row|rope|embed|sample)"; do
		echo "$g" >"$out/parity-$i.group"
		STRATA_CO_DIR=$w/co timeout "$p1" "$pt" -test.v -test.timeout "$((p1 - 3))s" -test.run "TestParity/sm_90/$g/" >"$out/parity-$i.log" 2>&1 &
		pids+=($!)
		i=$((i + 1))
	done
	STRATA_CO_DIR=$w/eco timeout "$p1" "$st" -test.run '^(TestGPUEngineMatchesCPU|TestGPUEngineNextMatchesCPU)$' -test.v -test.timeout 300s >"$out/engine-tests.log" 2>&1 &
	local eng=$!
	(
		STRATA_CO_DIR=$w/eco STRATA_RUN_ARGS="synth --arch qwen3moe --preset qwen3-30b-a3b --type q2_0 -o $w/models/q30-q2_0.gguf" \
			timeout "$p1" "$st" -test.run '^TestCLI$' -test.v -test.timeout 300s >"$out/synth.log" 2>&1
		STRATA_CO_DIR=$w/eco STRATA_RUN_ARGS="synth --arch qwen3next --preset qwen3-next-80b-a3b --type iq2_xs -o $w/models/q80-iq2_xs.gguf" \
			timeout "$p1" "$st" -test.run '^TestCLI$' -test.v -test.timeout 300s >"$out/synth-80b.log" 2>&1
	) &
	local syn=$!
	wait "${pids[@]}"
	echo "- phase 1 parity: done at $((SECONDS - t0)) s (limit $p1 s)" | tee -a "$sum"
	wait "$eng"
	echo "- engine tests: exit $? at $((SECONDS - t0)) s" | tee -a "$sum"
	wait "$syn"
	echo "- synth: exit $? at $((SECONDS - t0)) s" | tee -a "$sum"
	# Phase 2, one at a time.
	step bench-decode "$(lim 70 110)" env STRATA_CO_DIR="$w/co" STRATA_BENCH=1 STRATA_BENCH_OUT="$out" "$pt" -test.v -test.timeout 120s -test.run '^TestBenchDecode$'
	step bench-moe "$(lim 35 80)" env STRATA_CO_DIR="$w/co" STRATA_BENCH=1 STRATA_BENCH_OUT="$out" "$pt" -test.v -test.timeout 120s -test.run '^TestBenchMoeDecode$'
	local T t tt
	for T in N O; do
		for t in r128t64 r64t64 r64t128; do
			[ -d "$w/trees/$T/$t" ] || continue
			tt=$t
			[ $t = r64t128 ] && tt="(r64t128|r128t32)"
			mkdir -p "$out/prefill-$T-$t"
			step "prefill-$T-$t" "$(lim 15 60)" env STRATA_CO_DIR="$w/trees/$T/$t" STRATA_BENCH=1 STRATA_BENCH_OUT="$out/prefill-$T-$t" \
				STRATA_BENCH_FILTER="_mma_$tt\$" "$pt" -test.run '^TestBenchPrefill$' -test.v -test.timeout 100s
		done
	done
	local m=$w/models/q30-q2_0.gguf m80=$w/models/q80-iq2_xs.gguf
	eb() { # eb NAME SECONDS RESERVE MODEL ENV...: TestGPUBench on MODEL with the engine's code objects
		local name=$1 secs=$2 res=$3 mod=$4
		shift 4
		step "$name" "$(lim "$secs" "$res")" env STRATA_CO_DIR="$w/eco" STRATA_GPU_BENCH=1 STRATA_BENCH_MODEL="$mod" STRATA_BENCH_OUT="$out" \
			STRATA_BENCH_LABEL="$name" STRATA_BENCH_POLICIES=decayed STRATA_BENCH_CTX=1024 "$@" "$st" -test.run '^TestGPUBench$' -test.v -test.timeout 300s
	}
	if [ -s "$m" ] || [ "$dry" = 1 ]; then
		# resident decode: graph against bound launches, alternating on one engine
		eb engine-decode 40 100 "$m" STRATA_BENCH_TOKENS=128 STRATA_BENCH_BIN=32 STRATA_BENCH_BUDGETS_MIB=0 \
			STRATA_BENCH_DECODE=bound-argmax,graph-argmax,bound-argmax,graph-argmax
		# experts missing at 4 GiB: the copy path (group 8) against mapped misses, then mapped
		# with at most 16 promotions a token, then the copy path's group size and prefetch
		eb engine-misses 35 70 "$m" STRATA_BENCH_TOKENS=64 STRATA_BENCH_BUDGETS_MIB=4096 STRATA_BENCH_MISSES=copy,map
		eb engine-map-p16 20 60 "$m" STRATA_BENCH_TOKENS=64 STRATA_BENCH_BUDGETS_MIB=4096 STRATA_BENCH_MISSES=map STRATA_BENCH_MAP_PROMOTE=16
		# the copy path's completion group (1 and 32 against engine-misses' default 8) and the
		# look-ahead prefetch (group 8)
		eb engine-copy-g1 15 50 "$m" STRATA_BENCH_TOKENS=64 STRATA_BENCH_BUDGETS_MIB=4096 STRATA_BENCH_MISSES=copy STRATA_BENCH_GROUP=1
		eb engine-copy-g32 15 50 "$m" STRATA_BENCH_TOKENS=64 STRATA_BENCH_BUDGETS_MIB=4096 STRATA_BENCH_MISSES=copy STRATA_BENCH_GROUP=32
		eb engine-copy-prefetch 15 45 "$m" STRATA_BENCH_TOKENS=64 STRATA_BENCH_BUDGETS_MIB=4096 STRATA_BENCH_MISSES=copy STRATA_BENCH_PREFETCH=1
	fi
	rm -f "$m"
	if [ -s "$m80" ] || [ "$dry" = 1 ]; then
		# the 80B at 16 GiB (issue 11's case): copy against mapped misses
		eb engine-80b-misses 60 25 "$m80" STRATA_BENCH_TOKENS=64 STRATA_BENCH_BUDGETS_MIB=16384 STRATA_BENCH_MISSES=copy,map
	fi
	rm -f "$m80"
	rm -f "$w"/models/*.gguf
	# Tables.
	cnt() { echo "passed $(cat "$@" | grep -cE '^\s*--- PASS: TestParity/.*/.*/.*/'), failed $(cat "$@" | grep -cE '^\s*--- FAIL: TestParity/.*/.*/.*/'), skipped $(cat "$@" | grep -cE '^\s*--- SKIP: TestParity/.*/.*/.*/')"; }
	{
		echo
		echo "## parity (every sm_90 family)"
		echo "all: $(cnt "$out"/parity-*.log)"
		for f in "$out"/parity-*.log; do echo "- ${f%.log}: $(cat "${f%.log}.group") ... $(cnt "$f") $(grep -E '^(ok|PASS|FAIL)$' "$f" | tr '\n' ' ')" | sed "s|$out/||"; done
		grep -hE "^\s*--- FAIL|panic|test timed out" "$out"/parity-*.log | head -20
		echo
		echo "## engine tests"
		grep -E "^\s*--- |^(ok|FAIL|PASS)|NMSE .* > |bitwise|panic" "$out/engine-tests.log" | head -40
		echo
		echo "## decode benchmarks"
		for f in bench.txt bench-moe.txt; do [ -f "$out/$f" ] && { echo "--- $f"; cat "$out/$f"; }; done
		echo
		echo "## prefill (TOPS per tile; N = this main, O = main before the session's staging change)"
		for f in "$out"/prefill-*/bench_prefill.txt; do echo "--- ${f#"$out"/}"; grep -E "_mma_|ceiling" "$f"; done 2>/dev/null
		echo
		echo "## engine"
		grep -hE "^ROW |^BINS |ceilings" "$out"/engine-*.log 2>/dev/null
		grep -hE "FAIL|panic" "$out"/bench-*.log "$out"/prefill-*.log "$out"/engine-*.log 2>/dev/null | head
		echo "total: $((SECONDS - t0)) s"
	} >>"$sum"
	cp "$out"/bench*.txt "$out"/gpu-engine-*.md "$OUT"/ 2>/dev/null
	tar -C "$w" -czf "$OUT/logs.tgz" logs
	grep -vE "^(iq|q[0-9]|f16|bf16)" "$sum" | head -120
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
