#!/usr/bin/env bash
# Batched prompt path (issue 11 item 4, prefill tok/s): build here, one H200 call.
#
#   final.sh build    build machine (Go + clang-19), from this worktree: the cmd/strata-run
#       and parity test binaries (CGO_ENABLED=0, stripped, xz), the sm_90 code objects of
#       every family the engine launches (mmq and moe_prefill reduced to the r64t64 mma
#       variants the engine picks, strip_ptx.py: the driver JIT-compiles every entry of a
#       PTX module at load, 48 variants of each ≈ 18 MB of PTX), into $DEV (default
#       /work/main/.dev-eprefill)
#   final.sh run      GPU machine, repository root of the device copy (carry .dev-eprefill),
#       $OUT set: the GPU-vs-CPU tests (both prompt paths), parity of rmsnorm_row, synth of
#       the 30B-A3B shape (Q2_0), and prompt tok/s at 512 and 4096 tokens, batched and token
#       by token, at unlimited and 4096 MiB. Everything inside STRATA_FINAL_BUDGET seconds
#       (default 145): each step's limit is cut to what is left after the later steps'
#       minimum. Writes $OUT/summary.md, $OUT/prefill.md (the table), $OUT/bench-rows.tsv,
#       $OUT/logs.tar.gz.
#   STRATA_FINAL_DRY=1 final.sh run   the same flow with stub binaries (no GPU): checks the
#       script's logic and time accounting.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)

build() {
	set -e
	cd "$here/../../.."
	local d=${DEV:-/work/main/.dev-eprefill} target=sm_90
	rm -rf "$d" && mkdir -p "$d/co"
	export CGO_ENABLED=0
	go test -c -trimpath -ldflags=-s -tags strata_nodemo -o "$d/strata-run.test" ./cmd/strata-run # no demo model: 20 MB less to carry
	go test -c -trimpath -ldflags=-s -o "$d/parity.test" ./parity
	xz -9e -T2 "$d/strata-run.test" "$d/parity.test"
	local flags
	flags=$(awk -F'\t' -v t="$target" '$1 == "target" && $2 == t { print $6 }' kernels/out/objects.txt)
	for fam in dequant rmsnorm rmsnorm_row mmvq rope attention_decode quantize_q8_1 moe_decode gated_delta_net mmq moe_prefill attention_prefill; do
		awk -F'\t' -v t="$target" -v f="$fam" '$1 == "object" && $2 == t && $3 == f { print $4 "\t" $5 }' kernels/out/objects.txt |
			while IFS=$'\t' read -r src obj; do
				mkdir -p "$d/co/$(dirname "$obj")"
				# shellcheck disable=SC2086 # flags are a list
				clang-19 $flags -I "$(dirname "$src")" -I kernels/out/include "$src" -o "$d/co/$obj"
				case $fam in
				mmq | moe_prefill)
					python3 "$here/strip_ptx.py" "$d/co/$obj" "$d/co/$obj.s" '_mma_r64t64$'
					mv "$d/co/$obj.s" "$d/co/$obj"
					;;
				esac
			done
	done
	tar -C "$d" -czf "$d/co.tar.gz" co && rm -r "$d/co"
	cp "$here/final.sh" "$d/"
	git rev-parse HEAD >"$d/commit"
	git status --porcelain >>"$d/commit"
	ls -la "$d"
	du -sh "$d"
}

run() {
	local d=$here out=/tmp/ep-out t0=$SECONDS budget=${STRATA_FINAL_BUDGET:-145} dry=${STRATA_FINAL_DRY:-0}
	: "${OUT:?set OUT}"
	rm -rf "$out" /tmp/ep && mkdir -p "$out" /tmp/ep
	# left RESERVE: seconds left of the budget after RESERVE for the later steps
	left() { echo $((budget - (SECONDS - t0) - $1)); }
	# lim WANT RESERVE: WANT, cut to what is left after RESERVE (at least 5)
	lim() { local l; l=$(left "$2"); [ "$l" -lt "$1" ] && echo $((l > 5 ? l : 5)) || echo "$1"; }
	local t=/tmp/ep/sr.test tp=/tmp/ep/parity.test
	if [ "$dry" = 1 ]; then
		# stubs: print what they were asked and sleep a token time
		for b in $t $tp; do printf '#!/bin/sh\necho "stub $0 $*"; env | grep -E "^STRATA_" | sort; sleep %s\necho PASS\n' "${STRATA_FINAL_DRY_SLEEP:-1}" >"$b"; chmod +x "$b"; done
		mkdir -p /tmp/ep/co
	else
		tar -C /tmp/ep -xzf "$d/co.tar.gz"
		unxz() { python3 -c 'import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2], "wb"))' "$1" "$2"; }
		unxz "$d/strata-run.test.xz" "$t" && unxz "$d/parity.test.xz" "$tp" && chmod +x "$t" "$tp"
		nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm --format=csv >"$out/nvidia-smi.log" 2>&1
	fi
	export STRATA_CO_DIR=/tmp/ep/co STRATA_REQUIRE_GPU=1
	cat "$d/commit" >"$out/commit" 2>/dev/null
	local sum="$OUT/summary.md"
	{
		echo "# final.sh run ($(date -u +%FT%TZ)), budget ${budget}s, dry $dry"
		echo
	} >"$sum"
	step() { # step NAME SECONDS-LIMIT LOG CMD...: run, record exit status and time
		local name=$1 secs=$2 log=$3 s=$SECONDS rc
		shift 3
		timeout "$secs" "$@" >"$log" 2>&1
		rc=$?
		echo "- $name: exit $rc in $((SECONDS - s)) s (limit $secs s, $((SECONDS - t0)) s so far)" | tee -a "$sum"
		return $rc
	}
	echo "setup: $((SECONDS - t0)) s" | tee -a "$sum"
	# 1. tiny GPU vs CPU, both prompt paths (qwen3next has only the token path)
	step "tiny GPU vs CPU (TestGPUEngineMatchesCPU, TestGPUEngineNextMatchesCPU)" "$(lim 45 80)" "$out/tiny.log" \
		"$t" -test.run '^(TestGPUEngineMatchesCPU|TestGPUEngineNextMatchesCPU)$' -test.v -test.timeout 300s
	grep -E "^(--- |ok|FAIL|PASS)|chunk [0-9]+: |near tie|NMSE .* > " "$out/tiny.log" | head -40 | sed 's/^/    /' >>"$sum"
	# 2. parity of rmsnorm_row
	step "parity rmsnorm_row" "$(lim 25 65)" "$out/parity.log" \
		"$tp" -test.run 'TestParity/sm_90/rmsnorm_row/' -test.v -test.timeout 300s
	grep -E "^(ok|FAIL|PASS)|--- FAIL" "$out/parity.log" | head -8 | sed 's/^/    /' >>"$sum"
	# 3. the 30B-A3B shape, Q2_0 experts
	local m=/tmp/q30-q2_0.gguf
	step "synth 30B-A3B Q2_0" "$(lim 40 40)" "$out/synth.log" \
		env STRATA_RUN_ARGS="synth --arch qwen3moe --preset qwen3-30b-a3b --type q2_0 -o $m" "$t" -test.run '^TestCLI$' -test.v -test.timeout 300s
	grep -E "^wrote" "$out/synth.log" | sed 's/^/    /' >>"$sum"
	# 4. prompt tok/s: one load per budget, both paths on the same engine (token by token
	# first, so that a failure of the new path cannot cost its baseline; only up to 512
	# tokens: 4096 that way is ~33 s), decode 8 tokens (warm-up and a check)
	step "bench 30B-A3B Q2_0: prompt 512/4096, batched and token by token, unlimited and 4096 MiB" "$(lim 200 3)" "$out/bench.log" \
		env STRATA_GPU_BENCH=1 STRATA_BENCH_MODEL="$m" STRATA_BENCH_OUT="$out" STRATA_BENCH_LABEL=prefill- \
		STRATA_BENCH_CHUNK=512 STRATA_BENCH_PATHS=token,batched STRATA_BENCH_TOKEN_MAX=512 STRATA_BENCH_PREFILL=512,4096 \
		STRATA_BENCH_BUDGETS_MIB=0,4096 STRATA_BENCH_POLICIES=decayed STRATA_BENCH_TOKENS=8 STRATA_BENCH_CTX=4608 \
		"$t" -test.run '^TestGPUBench$' -test.v -test.timeout 300s
	{
		echo
		echo "## rows (as they were measured: ROW lines of bench.log)"
		echo
		echo "| budget MiB | policy | phase | cache slots | of experts | hit rate | MB copied/token | copy GB/s | launches/token | host µs/launch | sync ms/token | ms/token | tok/s | bound ms | bound/achieved | load s |"
		echo "|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
		grep -E "^ROW " "$out/bench.log" | sed 's/^ROW //'
		grep -E "ceilings|load failed|FAIL|panic" "$out/bench.log" | head -5
	} >"$OUT/prefill.md"
	rm -f "$m"
	cp "$out"/bench-rows.tsv "$OUT/" 2>/dev/null
	echo "total: $((SECONDS - t0)) s" | tee -a "$sum"
	tar -C "$out" -czf "$OUT/logs.tar.gz" .
	true
}

case "${1:-run}" in
build) build ;;
run) run ;;
*) echo "usage: $0 build | run" >&2; exit 2 ;;
esac
