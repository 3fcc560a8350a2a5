#!/usr/bin/env bash
# GPU engine run (issue 11), in two halves:
#
#   bench/results/2026-11-29-gpu-engine/run.sh build   build machine (Go + clang-19): the
#       cmd/strata-run test binary (stripped, gzipped; with STRATA_RUN_ARGS its TestCLI is the
#       strata-run command line, so one binary fits the device tool's 64 MiB with the tree)
#       and the sm_90 code objects of the seven families the decode engine launches, into
#       .dev/gpu-engine/ (carry that path)
#   bench/results/2026-11-29-gpu-engine/run.sh gpu     GPU machine, repository root: the
#       GPU-vs-CPU test on the tiny synthetic models; if it passes, the decode benchmark
#       on a synthetic Qwen3-30B-A3B shape (Q2_0 experts) over VRAM budgets. Logs and
#       tables go to $OUT.
set -uo pipefail
cd "$(dirname "$0")/../../.."

build() {
	set -e
	local target=sm_90
	local d=.dev/gpu-engine
	rm -rf "$d"
	mkdir -p "$d/co"
	export CGO_ENABLED=0
	go test -c -trimpath -ldflags=-s -o "$d/strata-run.test" ./cmd/strata-run
	gzip -9 "$d/strata-run.test"
	local flags
	flags=$(awk -F'\t' -v t="$target" '$1 == "target" && $2 == t { print $6 }' kernels/out/objects.txt)
	for fam in rmsnorm mmvq rope attention_decode quantize_q8_1 moe_decode gated_delta_net; do
		awk -F'\t' -v t="$target" -v f="$fam" '$1 == "object" && $2 == t && $3 == f { print $4 "\t" $5 }' kernels/out/objects.txt |
			while IFS=$'\t' read -r src obj; do
				mkdir -p "$d/co/$(dirname "$obj")"
				# shellcheck disable=SC2086 # flags are a list
				clang-19 $flags -I "$(dirname "$src")" -I kernels/out/include "$src" -o "$d/co/$obj"
				echo "built $d/co/$obj"
			done
	done
	tar -C "$d" -czf "$d/co.tar.gz" co && rm -r "$d/co"
}

gpu() {
	local out=${OUT:-.dev/out}
	mkdir -p "$out"
	local d=.dev/gpu-engine
	mkdir -p /tmp/gpu-engine && tar -C /tmp/gpu-engine -xzf "$d/co.tar.gz"
	export STRATA_CO_DIR=/tmp/gpu-engine/co
	local t=/tmp/strata-run.test
	gunzip -c "$d/strata-run.test.gz" >"$t" && chmod +x "$t"
	cli() { STRATA_RUN_ARGS="$*" "$t" -test.run '^TestCLI$' -test.v; }
	nvidia-smi --query-gpu=name,pci.bus_id,driver_version,memory.total --format=csv >"$out/nvidia-smi.log" 2>&1
	echo "== tiny: GPU vs CPU"
	STRATA_REQUIRE_GPU=1 "$t" -test.run 'TestGPUEngineMatchesCPU|TestBackendFlags' -test.v -test.timeout 120s >"$out/tiny.log" 2>&1
	local rc=$?
	grep -E "^(---|ok|FAIL|PASS)|NMSE|greedy|flip|bitwise" "$out/tiny.log" | head -40
	[ $rc -eq 0 ] || { echo "tiny test failed ($rc): no benchmark"; return $rc; }
	echo "== synth 30B-A3B shape, Q2_0 experts"
	local m=/tmp/q30-q2_0.gguf
	cli synth --arch qwen3moe --preset qwen3-30b-a3b --type q2_0 -o "$m" 2>&1 | tee "$out/synth.log"
	local bench=(env STRATA_GPU_BENCH=1 STRATA_BENCH_MODEL="$m" STRATA_BENCH_OUT="$out" STRATA_BENCH_TOKENS=48 "$t" -test.run TestGPUBench -test.v -test.timeout 200s)
	echo "== bench: decayed policy, budgets"
	STRATA_BENCH_BUDGETS_MIB=4096,6144,8192,12288,16384,24576,0 STRATA_BENCH_POLICIES=decayed "${bench[@]}" >"$out/bench-decayed.log" 2>&1
	echo "== bench: lru at the budgets that miss"
	STRATA_BENCH_BUDGETS_MIB=4096,6144 STRATA_BENCH_POLICIES=lru "${bench[@]}" >"$out/bench-lru.log" 2>&1
	echo "== bench: look-ahead prefetch at the budgets that miss"
	STRATA_BENCH_BUDGETS_MIB=4096,6144 STRATA_BENCH_POLICIES=decayed STRATA_BENCH_PREFETCH=1 "${bench[@]}" >"$out/bench-prefetch.log" 2>&1
	echo "== bench: copy group 1 and 32 at 4096 MiB"
	STRATA_BENCH_BUDGETS_MIB=4096 STRATA_BENCH_POLICIES=decayed STRATA_BENCH_GROUP=1 "${bench[@]}" >"$out/bench-g1.log" 2>&1
	STRATA_BENCH_BUDGETS_MIB=4096 STRATA_BENCH_POLICIES=decayed STRATA_BENCH_GROUP=32 "${bench[@]}" >"$out/bench-g32.log" 2>&1
	cat "$out"/gpu-engine-*.md
	grep -hE "FAIL|panic" "$out"/bench-*.log | head
	echo "== tiny-next: GPU vs CPU (qwen3next)"
	STRATA_REQUIRE_GPU=1 "$t" -test.run 'TestGPUEngineNextMatchesCPU' -test.v -test.timeout 60s >"$out/tiny-next.log" 2>&1
	grep -E "^(---|ok|FAIL|PASS)|NMSE|greedy|flip|bitwise" "$out/tiny-next.log" | head -20
	echo "== strata-run --backend gpu --stats at 6144 MiB"
	cli -m "$m" -p hello -n 24 --temp 0 --backend gpu --vram-budget-mib 6144 --stats --expert-profile "$out/profile.txt" >"$out/run.log" 2>&1
	tail -5 "$out/run.log"
	echo "== again, seeded from the profile the first run wrote"
	cli -m "$m" -p hello -n 24 --temp 0 --backend gpu --vram-budget-mib 6144 --stats --expert-profile "$out/profile.txt" >"$out/run2.log" 2>&1
	tail -3 "$out/run2.log"
}

case "${1:-}" in
build) build ;;
gpu) gpu ;;
*) echo "usage: $0 build|gpu" >&2; exit 2 ;;
esac
