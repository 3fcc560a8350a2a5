#!/usr/bin/env bash
# Lead's final H200 call of session 6: the merged main. Every sm_90 family's parity (the
# attention and delta-net families each in their own processes), the GPU-vs-CPU engine tests,
# the runtime/cuda tests and the generated mapping probe; then the decode benchmarks (mmvq,
# both timings; moe_decode), the prefill benchmarks per tile (PTX assembled by ptxas first;
# moe_prefill r64t32 and mmq8 r64t128w8 are new this session), the model-op benchmarks of
# the decode path's small kernels (old and new), and the decode token old against new on one
# engine per model (TestDecodeProfile modes, 30B-A3B Q2_0 and 80B-A3B IQ2_XS), and one token
# of each under Nsight Compute (graph nodes as kernels) when time is left.
#
#   final.sh build   build machine, repository root: parity.test, strata-run.test, gpu.test
#       (model/gpu), cuda.test (runtime/cuda) (CGO_ENABLED=0, -tags strata_nodemo, stripped,
#       xz) and every sm_90 code object (co.tar.xz), into $DEV (default /work/main/.dev-final6).
#   final.sh run     GPU machine, repository root of the device copy (carry .dev-final6),
#       $OUT set. STRATA_FINAL_BUDGET seconds in all (default 420). STRATA_FINAL_MODES: the
#       TestDecodeProfile modes (comma list, on one engine per model).
#   STRATA_FINAL_DRY=1 final.sh run   the same flow with stub binaries (no GPU).
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)

build() {
	set -e
	cd "$here/../../.."
	local d=${DEV:-/work/main/.dev-final6} target=sm_90 flags
	rm -rf "$d" && mkdir -p "$d/co"
	export CGO_ENABLED=0
	go test -c -trimpath -ldflags=-s -tags strata_nodemo -o "$d/strata-run.test" ./cmd/strata-run
	go test -c -trimpath -ldflags=-s -tags strata_nodemo -o "$d/parity.test" ./parity
	go test -c -trimpath -ldflags=-s -tags strata_nodemo -o "$d/gpu.test" ./model/gpu
	go test -c -trimpath -ldflags=-s -tags strata_nodemo -o "$d/cuda.test" ./runtime/cuda
	xz -9e -T2 "$d"/*.test
	flags=$(awk -F'\t' -v t="$target" '$1 == "target" && $2 == t { print $6 }' kernels/out/objects.txt)
	awk -F'\t' -v t="$target" '$1 == "object" && $2 == t { print $4 "\t" $5 }' kernels/out/objects.txt |
		while IFS=$'\t' read -r src obj; do
			mkdir -p "$d/co/$(dirname "$obj")"
			# shellcheck disable=SC2086 # flags are a list
			clang-19 $flags -I "$(dirname "$src")" -I kernels/out/include "$src" -o "$d/co/$obj"
		done
	tar -C "$d" -cf - co | xz -9e -T2 >"$d/co.tar.xz" && rm -r "$d/co" # xz: the carry limit includes the tracked tree
	cp "$here/final.sh" "$here/../2026-11-29-prefill-async/strip_ptx.py" "$d/"
	DEV=$d bash "$here/../2026-11-30-moe-decode/mods.sh" build # moe_decode base (e89a9ba) and nopf trees
	git rev-parse HEAD >"$d/commit"
	git status --porcelain >>"$d/commit"
	ls -la "$d"
	du -sh "$d"
}

run() {
	local d=$here w=/tmp/final6 t0=$SECONDS budget=${STRATA_FINAL_BUDGET:-420} dry=${STRATA_FINAL_DRY:-0}
	: "${OUT:?set OUT}"
	rm -rf "$w" && mkdir -p "$w/logs" "$w/models"
	local out=$w/logs pt=$w/parity.test st=$w/sr.test gt=$w/gpu.test ct=$w/cuda.test
	left() { echo $((budget - (SECONDS - t0) - $1)); }
	# lim WANT RESERVE: WANT seconds, cut to what is left after RESERVE (at least 5)
	lim() { local l; l=$(left "$2"); [ "$l" -lt "$1" ] && echo $((l > 5 ? l : 5)) || echo "$1"; }
	local sum="$OUT/summary.md"
	echo "# final.sh run ($(date -u +%FT%TZ)), budget ${budget}s, dry $dry, commit $(head -1 "$d/commit" 2>/dev/null)" >"$sum"
	echo >>"$sum"
	if [ "$dry" = 1 ]; then
		printf '#!/bin/sh\necho "stub $0 $*"; env | grep -E "^STRATA_(CO_DIR|BENCH_[A-Z]+|PREP_[A-Z]+)=" | sort; sleep %s\ncase "$STRATA_RUN_ARGS" in *" -o "*) f=${STRATA_RUN_ARGS##* -o }; : >"$f";; esac\necho "--- PASS: TestParity/sm_90/x/y/z"\necho "ROW | stub |"\necho PASS\n' "${STRATA_FINAL_DRY_SLEEP:-1}" >"$pt"
		for b in "$st" "$gt" "$ct"; do cp "$pt" "$b"; done
		chmod +x "$pt" "$st" "$gt" "$ct"
		mkdir -p "$w/co" "$w/eco" "$w/trees/r64t64"
	else
		python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' "$d/co.tar.xz" "$w"
		for b in parity:parity strata-run:sr gpu:gpu cuda:cuda; do
			[ -f "$d/${b%%:*}.test.xz" ] || continue # (cuda.test is left out when the carry is tight)
			python3 -c 'import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2], "wb"))' "$d/${b%%:*}.test.xz" "$w/${b#*:}.test" && chmod +x "$w/${b#*:}.test"
		done
		# the engine's set and the per-tile trees, cut from co
		local f rel t pt2
		(cd "$w/co" && find . -type f) | while read -r rel; do
			mkdir -p "$w/eco/$(dirname "$rel")"
			case $rel in
			*/mmq.ptx | */moe_prefill.ptx)
				python3 "$d/strip_ptx.py" "$w/co/$rel" "$w/eco/$rel" '_mma_r(64|128)t64$'
				for t in r128t64 r64t64 r64t128 r64t32; do
					pt2=$t
					case $rel in
					*/moe_prefill.ptx) [ $t = r64t128 ] && pt2=r128t32 ;;
					*) [ $t = r64t32 ] && continue ;; # moe_prefill's tile only
					esac
					mkdir -p "$w/trees/$t/$(dirname "$rel")"
					python3 "$d/strip_ptx.py" "$w/co/$rel" "$w/trees/$t/$rel" "_mma_$pt2\$"
				done
				;;
			*/mmq8.ptx)
				cp "$w/co/$rel" "$w/eco/$rel"
				mkdir -p "$w/trees/w8/$(dirname "$rel")"
				cp "$w/co/$rel" "$w/trees/w8/$rel"
				;;
			*) cp "$w/co/$rel" "$w/eco/$rel" ;;
			esac
		done
		{ nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm,clocks.max.mem --format=csv; nproc; free -g; } >"$out/gpu.txt" 2>&1
	fi
	echo "- setup done at $((SECONDS - t0)) s" | tee -a "$sum"
	export STRATA_REQUIRE_GPU=1
	cat "$d/commit" >"$out/commit" 2>/dev/null
	step() { # step NAME SECONDS-LIMIT CMD...
		local name=$1 secs=$2 s=$SECONDS
		shift 2
		timeout "$secs" "$@" >"$out/$name.log" 2>&1
		echo "- $name: exit $? in $((SECONDS - s)) s (limit $secs s, $((SECONDS - t0)) s so far)" | tee -a "$sum"
	}
	# ptxas on the prefill trees, in the background (CPU only)
	(
		P=$(command -v ptxas || echo /usr/local/cuda/bin/ptxas)
		for f in "$w"/trees/*/sm_90/*.ptx; do
			[ -e "$f" ] || continue
			("$P" -arch=sm_90 "$f" -o "${f%.ptx}.cubin" >"$f.ptxas.log" 2>&1 && mv "${f%.ptx}.cubin" "$f") &
		done
		wait
	) &
	local ptx=$!
	# Phase 1, together: parity, the GPU-vs-CPU engine tests, the runtime/cuda tests, synth.
	local p1 pids=() i=0 g
	p1=$(lim 150 170)
	for g in attention_decode attention_prefill gated_delta_net \
		"mmvq/(f16|bf16|q80)" "mmvq/(q20|q4k|q6k)" "mmvq/(iq2xs|iq3xxs|iq3s|iq1m)" \
		"mmq/(q80|q20)" "mmq/(q4k|q6k)" "mmq/(iq2xs|iq3xxs)" "mmq/(iq3s|iq1m)" "mmq8" \
		"moe_prefill/(q80|q20|q4k|q6k)" "moe_prefill/(iq2xs|iq3xxs|iq3s|iq1m)" \
		"(dequant|moe_decode)" "(quantize_q8_1|imma_tile|rmsnorm|rmsnorm_row|rope|embed|sample)"; do
		echo "$g" >"$out/parity-$i.group"
		STRATA_CO_DIR=$w/co timeout "$p1" "$pt" -test.v -test.timeout "$((p1 - 3))s" -test.run "TestParity/sm_90/$g/" >"$out/parity-$i.log" 2>&1 &
		pids+=($!)
		i=$((i + 1))
	done
	STRATA_CO_DIR=$w/eco timeout "$p1" "$st" -test.run '^(TestGPUEngineMatchesCPU|TestGPUEngineNextMatchesCPU)$' -test.v -test.timeout 300s >"$out/engine-tests.log" 2>&1 &
	local eng=$!
	STRATA_CO_DIR=$w/eco timeout "$p1" "$ct" -test.v -test.timeout 200s >"$out/cuda-tests.log" 2>&1 &
	local cu=$!
	STRATA_CO_DIR=$w/co timeout "$p1" "$pt" -test.v -test.timeout 60s -test.run '^TestMappingProbeGPU$' >"$out/probe-test.log" 2>&1 &
	local prb=$!
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
	wait "$cu"
	echo "- runtime/cuda tests: exit $? at $((SECONDS - t0)) s" | tee -a "$sum"
	wait "$prb"
	echo "- TestMappingProbeGPU: exit $? at $((SECONDS - t0)) s" | tee -a "$sum"
	wait "$ptx"
	echo "- ptxas: done at $((SECONDS - t0)) s" | tee -a "$sum"
	# Phase 2, one at a time.
	step bench-decode "$(lim 60 120)" env STRATA_CO_DIR="$w/co" STRATA_BENCH=1 STRATA_BENCH_OUT="$out" "$pt" -test.v -test.timeout 120s -test.run '^TestBenchDecode$'
	step bench-moe "$(lim 30 100)" env STRATA_CO_DIR="$w/co" STRATA_BENCH=1 STRATA_BENCH_OUT="$out" "$pt" -test.v -test.timeout 120s -test.run '^TestBenchMoeDecode$'
	local t tt
	for t in r128t64 r64t64 r64t128 r64t32 w8; do
		[ -d "$w/trees/$t" ] || continue
		tt=$t
		[ $t = r64t128 ] && tt="(r64t128|r128t32)"
		[ $t = w8 ] && tt=r64t128w8
		mkdir -p "$out/prefill-$t"
		step "prefill-$t" "$(lim 25 75)" env STRATA_CO_DIR="$w/trees/$t" STRATA_BENCH=1 STRATA_BENCH_OUT="$out/prefill-$t" \
			STRATA_BENCH_FILTER="_mma_$tt\$" "$pt" -test.run '^TestBenchPrefill$' -test.v -test.timeout 100s
	done
	wait "$syn"
	echo "- synth: exit $? at $((SECONDS - t0)) s" | tee -a "$sum"
	# the small kernels of the decode path, old and new forms side by side
	step bench-ops "$(lim 40 150)" env STRATA_CO_DIR="$w/co" STRATA_BENCH=1 STRATA_BENCH_OUT="$out" STRATA_BENCH_OPS="${STRATA_FINAL_OPS:-attention_small,rmsnorm_row,argmax}" \
		"$pt" -test.run '^TestBenchModelOps$' -test.v -test.timeout 120s
	# the decode token, old paths against new on one engine per model (TestDecodeProfile
	# fails when the greedy tokens of two modes differ)
	local m
	for m in q30-q2_0 q80-iq2_xs; do
		if [ -s "$w/models/$m.gguf" ] || [ "$dry" = 1 ]; then
			step "time-$m" "$(lim 70 60)" env STRATA_CO_DIR="$w/eco" STRATA_DECODE_PROFILE=1 STRATA_BENCH_MODEL="$w/models/$m.gguf" \
				STRATA_DECODE_MODES="${STRATA_FINAL_MODES:-base,nopdl,attnold,oldnorm,oldrow,oldargmax,base,nopdl,attnold,oldnorm}" STRATA_BENCH_TOKENS=128 STRATA_BENCH_CTX=1024 \
				"$gt" -test.run '^TestDecodeProfile$' -test.v -test.timeout 300s
		fi
	done
	# moe_decode against the kernel before this session's change (base) and without its L2
	# prefetch (nopf): parity, TestBenchMoeDecode, TestDecodeProfile on both trees
	if [ -f "$d/mods.sh" ]; then
		step moe-mods "$(lim 150 60)" env CO="$w/eco" PT="$pt" GT="$gt" MODELS="$w/models" OUT="$OUT" STRATA_MOE_DRY="$dry" MOE_MODS="base nopf" \
			bash "$d/mods.sh" run
	fi
	# one token of each under Nsight Compute, graph nodes as kernels (where the time goes now)
	local NCU
	NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
	for m in q30-q2_0 q80-iq2_xs; do
		[ -s "$w/models/$m.gguf" ] && [ -n "$NCU" ] && [ "$(left 0)" -gt 50 ] || continue
		step "ncu-$m" "$(lim 60 5)" "$NCU" --clock-control none --cache-control none --profile-from-start off \
			--graph-profiling node --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,launch__grid_size,launch__block_size \
			-f -o "$w/ncu-$m" env STRATA_CO_DIR="$w/eco" STRATA_DECODE_PROFILE=1 STRATA_BENCH_MODEL="$w/models/$m.gguf" STRATA_DECODE_MODES=none \
			STRATA_PROFILE_MODES=base STRATA_PROFILE_TOKENS=1 STRATA_BENCH_CTX=1024 \
			"$gt" -test.run '^TestDecodeProfile$' -test.v -test.timeout 300s
		[ -f "$w/ncu-$m.ncu-rep" ] && "$NCU" -i "$w/ncu-$m.ncu-rep" --page raw --csv 2>"$out/ncu-import-$m.log" | gzip >"$out/ncu-$m.csv.gz"
	done
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
		echo "## mapping probe (generated fill kernel, HIP's path)"
		grep -E "^\s*--- |^(ok|FAIL|PASS)|panic" "$out/probe-test.log" | head -10
		echo
		echo "## runtime/cuda tests"
		grep -E "^\s*--- (FAIL|SKIP)|^(ok|FAIL|PASS)|panic" "$out/cuda-tests.log" | head -20
		grep -cE "^\s*--- PASS" "$out/cuda-tests.log"
		echo
		echo "## decode benchmarks"
		for f in bench.txt bench-moe.txt; do [ -f "$out/$f" ] && { echo "--- $f"; cat "$out/$f"; }; done
		echo
		echo "## prefill (TOPS per tile)"
		for f in "$out"/prefill-*/bench_prefill.txt; do echo "--- ${f#"$out"/}"; grep -E "_mma_|ceiling" "$f"; done 2>/dev/null
		echo
		echo "## model-op benchmarks (TestBenchModelOps)"
		grep -vE "^=== RUN|^\s*--- PASS" "$out/bench-ops.log" 2>/dev/null | head -80
		echo
		echo "## decode token, modes on one engine (TestDecodeProfile)"
		for f in "$out"/time-*.log; do [ -e "$f" ] && { echo "--- ${f#"$out"/}"; grep -vE "^=== RUN" "$f" | head -40; }; done
		grep -hE "FAIL|panic" "$out"/bench-*.log "$out"/prefill-*.log "$out"/time-*.log 2>/dev/null | head
		echo "total: $((SECONDS - t0)) s"
	} >>"$sum"
	cp "$out"/bench*.txt "$OUT"/ 2>/dev/null
	tar -C "$w" -czf "$OUT/logs.tgz" logs
	grep -vE "^(iq|q[0-9]|f16|bf16)" "$sum" | head -150
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
