#!/usr/bin/env bash
# Lead's H200 calls of session 7: the merged main with this session's changes measured old
# against new in one binary set.
#
#   run.sh build   build machine, repository root: parity.test, strata-run.test, gpu.test
#       (CGO_ENABLED=0, -tags strata_nodemo, stripped, xz) and every sm_90 code object plus
#       two kernels before this session (a2cd2ed: mmvq as "ref", moe_decode as "moemain"),
#       as co.tar.xz, into $DEV (default /work/main/.dev-s7).
#   run.sh run     GPU machine, repository root of the device copy (carry .dev-s7), $OUT set.
#       STRATA_S7_BUDGET seconds in all (default 270). STRATA_S7_PARITY: parity groups
#       (-test.run patterns under TestParity/sm_90/, space separated; default below).
#       STRATA_S7_STEPS: which benchmark steps run, in order (default profile gpubench
#       benchdec benchstd; also benchmoe, benchmmq8). STRATA_S7_MODES: TestDecodeProfile
#       modes. STRATA_S7_TILES: TestGPUBench's STRATA_BENCH_PTILES; STRATA_S7_BUDGETS its
#       budgets (MiB, comma list; default 0 = unlimited), STRATA_S7_TOKENS its decode tokens
#       (default 1), STRATA_S7_GPUBENCH_S its time limit a model (default 60).
#       STRATA_S7_MODELS: the synthetic models (default "q30-q2_0 q80-iq2_xs");
#       STRATA_S7_ENGINE=0 leaves out the GPU-vs-CPU engine tests.
#   STRATA_S7_DRY=1 run.sh run   the same flow with stub binaries (no GPU).
#
# Trees on the device: co (every object, unassembled: parity), eco (the engine's set: mmq cut
# to its r64t64/r64t128 mma tiles, moe_prefill to r64t32/r64t64, mmq8 whole; every PTX
# assembled by ptxas first so no driver JIT runs inside a timing), ref (a2cd2ed's mmvq,
# assembled), moemain (a2cd2ed's moe_decode, assembled).
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)

build() {
	set -e
	cd "$here/../../.."
	local d=${DEV:-/work/main/.dev-s7} target=sm_90 flags tmp k
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
	tmp=$(mktemp -d)
	git archive a2cd2ed kernels/out/sm_90 kernels/out/include | tar -x -C "$tmp"
	for k in ref:mmvq moemain:moe_decode; do
		mkdir -p "$d/co/${k%%:*}/sm_90"
		# shellcheck disable=SC2086 # flags are a list
		clang-19 $flags -I "$tmp/kernels/out/sm_90" -I "$tmp/kernels/out/include" "$tmp/kernels/out/sm_90/${k#*:}.cu" -o "$d/co/${k%%:*}/sm_90/${k#*:}.ptx"
	done
	rm -rf "$tmp"
	tar -C "$d" -cf - co | xz -9e -T2 >"$d/co.tar.xz" && rm -r "$d/co"
	cp "$here/run.sh" "$here/../2026-11-29-prefill-async/strip_ptx.py" "$d/"
	git rev-parse HEAD >"$d/commit"
	git status --porcelain >>"$d/commit"
	ls -la "$d"
	du -sh "$d"
}

run() {
	local d=$here w=/tmp/s7 t0=$SECONDS budget=${STRATA_S7_BUDGET:-270} dry=${STRATA_S7_DRY:-0}
	: "${OUT:?set OUT}"
	rm -rf "$w" && mkdir -p "$w/logs" "$w/models"
	local L=$w/logs pt=$w/parity.test st=$w/sr.test gt=$w/gpu.test P rel
	left() { echo $((budget - (SECONDS - t0) - $1)); }
	# lim WANT RESERVE: WANT seconds, cut to what is left after RESERVE (at least 5)
	lim() { local l; l=$(left "$2"); [ "$l" -lt "$1" ] && echo $((l > 5 ? l : 5)) || echo "$1"; }
	local sum="$OUT/summary.md"
	echo "# final-s7 run.sh run ($(date -u +%FT%TZ)), budget ${budget}s, dry $dry, commit $(head -1 "$d/commit" 2>/dev/null)" >"$sum"
	say() { echo "- $* at $((SECONDS - t0)) s" | tee -a "$sum"; }
	P=$(command -v ptxas || echo /usr/local/cuda/bin/ptxas)
	if [ "$dry" = 1 ]; then
		printf '#!/bin/sh\necho "stub $0 $*"; env | grep -E "^STRATA_(CO_DIR|BENCH_[A-Z_]+|DECODE_[A-Z_]+|RUN_ARGS)=" | sort; sleep %s\ncase "$STRATA_RUN_ARGS" in *" -o "*) f=${STRATA_RUN_ARGS##* -o }; : >"$f";; esac\necho "--- PASS: TestParity/sm_90/x/y/z"\necho "ROW | stub |"\necho PASS\n' "${STRATA_S7_DRY_SLEEP:-1}" >"$pt"
		cp "$pt" "$st" && cp "$pt" "$gt" && chmod +x "$pt" "$st" "$gt"
		mkdir -p "$w/co/sm_90" "$w/co/ref/sm_90" "$w/co/moemain/sm_90"
		for f in mmvq mmq mmq8 moe_prefill moe_decode rmsnorm_row; do echo "// stub" >"$w/co/sm_90/$f.ptx"; done
		echo "// stub" >"$w/co/ref/sm_90/mmvq.ptx" && echo "// stub" >"$w/co/moemain/sm_90/moe_decode.ptx"
		printf '#!/bin/sh\nwhile [ $# -gt 1 ]; do case $1 in -o) shift; o=$1;; *) i=$1;; esac; shift; done\ncp "$i" "$o"; echo "ptxas stub: Used 128 registers, 0 bytes spill stores"\n' >"$w/ptxas" && chmod +x "$w/ptxas"
		P=$w/ptxas
		printf '#!/usr/bin/env python3\nimport shutil, sys\nshutil.copyfile(sys.argv[1], sys.argv[2])\n' >"$w/strip_ptx.py"
	else
		python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' "$d/co.tar.xz" "$w"
		for b in parity:parity strata-run:sr gpu:gpu; do
			python3 -c 'import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2], "wb"))' "$d/${b%%:*}.test.xz" "$w/${b#*:}.test" && chmod +x "$w/${b#*:}.test"
		done
		cp "$d/strip_ptx.py" "$w/"
		{ nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv; "$P" --version; } >"$L/machine.log" 2>&1
	fi
	cat "$d/commit" >"$L/commit" 2>/dev/null
	export STRATA_REQUIRE_GPU=1
	mv "$w/co/ref" "$w/ref" && mv "$w/co/moemain" "$w/moemain.src"
	(cd "$w/co" && find . -type f) | while read -r rel; do
		mkdir -p "$w/eco/$(dirname "$rel")"
		case $rel in
		*/mmq.ptx) python3 "$w/strip_ptx.py" "$w/co/$rel" "$w/eco/$rel" '_mma_r64t(64|128)$' >/dev/null ;;
		*/moe_prefill.ptx) python3 "$w/strip_ptx.py" "$w/co/$rel" "$w/eco/$rel" '_mma_r64t(32|64)$' >/dev/null ;;
		*) cp "$w/co/$rel" "$w/eco/$rel" ;;
		esac
	done
	# the two synthetic models, in the background, from the unassembled engine set's sibling
	(
		for spec in "q30-q2_0|qwen3moe --preset qwen3-30b-a3b --type q2_0" "q80-iq2_xs|qwen3next --preset qwen3-next-80b-a3b --type iq2_xs"; do
			case " ${STRATA_S7_MODELS:-q30-q2_0 q80-iq2_xs} " in *" ${spec%%|*} "*) ;; *) continue ;; esac
			STRATA_CO_DIR=$w/co STRATA_RUN_ARGS="synth --arch ${spec#*|} -o $w/models/${spec%%|*}.gguf" timeout 100 "$st" -test.run '^TestCLI$' -test.v >"$L/synth-${spec%%|*}.log" 2>&1
			echo $? >"$w/models/${spec%%|*}.done"
		done
	) &
	local syn=$!
	find "$w/eco" "$w/ref" "$w/moemain.src" -name '*.ptx' | xargs -P 16 -I{} sh -c '"$1" -v -arch=sm_90 "$2" -o "$2.cubin" >"$2.log" 2>&1 && mv "$2.cubin" "$2" || echo "ptxas failed: $2"' _ "$P" {} >"$L/ptxas.log" 2>&1
	cp -r "$w/eco" "$w/moemain" && cp "$w/moemain.src/sm_90/moe_decode.ptx" "$w/moemain/sm_90/moe_decode.ptx"
	for f in mmvq moe_decode mmq8 moe_prefill mmq; do cp "$w/eco/sm_90/$f.ptx.log" "$L/ptxas-$f.log" 2>/dev/null; done
	cp "$w/ref/sm_90/mmvq.ptx.log" "$L/ptxas-mmvq-ref.log" 2>/dev/null
	say "ptxas: $(grep -c failed "$L/ptxas.log") failed; spills: $(cat "$L"/ptxas-*.log 2>/dev/null | grep -cE ' [1-9][0-9]* bytes spill')"
	# parity (co, unassembled) beside the GPU-vs-CPU engine tests (eco)
	local pids=() g p1 i=0
	p1=$(lim ${STRATA_S7_PARITY_S:-150} 100)
	local all='attention_decode/ attention_prefill/ gated_delta_net/ mmvq/(f16|bf16)/ mmvq/(q80|q20)/ mmvq/(q4k|q6k|iq2xs)/ mmvq/(iq3xxs|iq3s|iq1m)/ ^mmq$/(q80|q20)_ ^mmq$/(q4k|q6k)_ ^mmq$/(iq2xs|iq3xxs)_ ^mmq$/(iq3s|iq1m)_ ^mmq8$/ moe_prefill/(q80|q20|q4k|q6k)_ moe_prefill/(iq2xs|iq3xxs|iq3s|iq1m)_ ^(dequant|moe_decode)$/ ^(quantize_q8_1|imma_tile|rmsnorm|rmsnorm_row|rope|embed|sample)$/'
	for g in ${STRATA_S7_PARITY-$all}; do
		echo "$g" >"$L/parity-$i.group"
		STRATA_CO_DIR=$w/co timeout "$p1" "$pt" -test.v -test.timeout "$((p1 - 3))s" -test.run "TestParity/sm_90/$g" >"$L/parity-$i.log" 2>&1 &
		pids+=($!)
		i=$((i + 1))
	done
	if [ "${STRATA_S7_ENGINE:-1}" = 1 ]; then
		STRATA_CO_DIR=$w/eco timeout "$p1" "$st" -test.run '^(TestGPUEngineMatchesCPU|TestGPUEngineNextMatchesCPU)$' -test.v -test.timeout "$((p1 - 3))s" >"$L/engine-tests.log" 2>&1
		say "engine tests exit $?"
	fi
	wait "${pids[@]}"
	say "parity done"
	waitm() { # waitm NAME: the model is there (0) or not in time (1)
		while [ ! -e "$w/models/$1.done" ] && [ "$(left 10)" -gt 0 ]; do sleep 1; done
		[ -s "$w/models/$1.gguf" ] || [ "$dry" = 1 ]
	}
	local s m lm
	for s in ${STRATA_S7_STEPS:-profile gpubench benchdec benchstd}; do
		case $s in
		profile) # the decode token, modes on one engine per model
			for m in q30-q2_0 q80-iq2_xs; do
				waitm $m || { say "$m: no model"; continue; }
				lm=$(lim 45 5)
				STRATA_CO_DIR=$w/eco STRATA_DECODE_PROFILE=1 STRATA_BENCH_MODEL=$w/models/$m.gguf STRATA_BENCH_TOKENS=128 STRATA_BENCH_CTX=1024 \
					STRATA_DECODE_MODES=${STRATA_S7_MODES:-base,mmvqold,base,mmvqold} \
					timeout "$lm" "$gt" -test.run '^TestDecodeProfile$' -test.v -test.timeout "$((lm - 2))s" >"$L/time-$m.log" 2>&1
				say "time-$m exit $?"
			done
			;;
		gpubench) # prefill: tiles and the mmvq fallback's groups, old against new on one engine
			for m in ${STRATA_S7_MODELS:-q30-q2_0 q80-iq2_xs}; do
				waitm $m || { say "$m: no model"; continue; }
				lm=$(lim "${STRATA_S7_GPUBENCH_S:-60}" 5)
				STRATA_CO_DIR=$w/eco STRATA_GPU_BENCH=1 STRATA_BENCH_MODEL=$w/models/$m.gguf STRATA_BENCH_OUT=$L STRATA_BENCH_LABEL=$m \
					STRATA_BENCH_POLICIES=decayed STRATA_BENCH_BUDGETS_MIB=${STRATA_S7_BUDGETS:-0} STRATA_BENCH_CTX=4096 STRATA_BENCH_TOKENS=${STRATA_S7_TOKENS:-1} STRATA_BENCH_CHUNK=512 \
					STRATA_BENCH_PREFILL=512,4096 STRATA_BENCH_PTILES=${STRATA_S7_TILES:-t64+cols8+attnold,best,t64+cols8+attnold,best} STRATA_BENCH_PKTIMES=${STRATA_S7_PKTIMES-512} \
					timeout "$lm" "$st" -test.run '^TestGPUBench$' -test.v -test.timeout "$((lm - 2))s" >"$L/gpubench-$m.log" 2>&1
				say "gpubench-$m exit $?"
			done
			;;
		benchdec) # mmvq at the engine's decode shapes: geom 0, the engine's geometry, a2cd2ed's kernel
			lm=$(lim 40 5)
			STRATA_CO_DIR=$w/eco STRATA_BENCH_MMVQ_REF=$w/ref STRATA_BENCH=1 STRATA_BENCH_ENGINE=1 STRATA_BENCH_FLOORS=0 STRATA_BENCH_OUT=$L \
				timeout "$lm" "$pt" -test.v -test.timeout "$((lm - 2))s" -test.run '^TestBenchDecode$' >"$L/bench-engine.log" 2>&1
			say "bench-engine exit $?"
			;;
		benchstd) # mmvq at 4096×14336, n = 1 (issue 5's table; every type, events and graph view)
			lm=$(lim 40 5)
			mkdir -p "$L/std"
			STRATA_CO_DIR=$w/eco STRATA_BENCH=1 STRATA_BENCH_NS=1 STRATA_BENCH_EXPERTS=0 STRATA_BENCH_OUT=$L/std \
				timeout "$lm" "$pt" -test.v -test.timeout "$((lm - 2))s" -test.run '^TestBenchDecode$' >"$L/bench-std.log" 2>&1
			say "bench-std exit $?"
			;;
		benchmoe) # moe_decode against a2cd2ed's (the slot-table prefetch)
			lm=$(lim 30 5)
			STRATA_CO_DIR=$w/eco STRATA_BENCH=1 STRATA_BENCH_OUT=$L STRATA_BENCH_TYPES=q20,iq2xs,q80 STRATA_BENCH_MOE_MODS="main=$w/moemain" \
				timeout "$lm" "$pt" -test.run '^TestBenchMoeDecode$' -test.v -test.timeout "$((lm - 2))s" >"$L/bench-moe.log" 2>&1
			say "bench-moe exit $?"
			;;
		benchmmq8) # mmq8 r64t128w8a (cp.async activations) against r64t128w8, twice
			for i in 1 2; do
				mkdir -p "$L/prefill-w8-$i"
				lm=$(lim 30 3)
				STRATA_CO_DIR=$w/eco STRATA_BENCH=1 STRATA_BENCH_OUT=$L/prefill-w8-$i STRATA_BENCH_FILTER='_mma_r64t128w8a?$' \
					timeout "$lm" "$pt" -test.run '^TestBenchPrefill$' -test.v -test.timeout "$((lm - 2))s" >"$L/prefill-w8-$i.log" 2>&1
				say "prefill-w8-$i exit $?"
			done
			;;
		esac
	done
	kill "$syn" 2>/dev/null
	rm -f "$w"/models/*.gguf
	{
		echo
		echo "## parity"
		for f in "$L"/parity-*.log; do echo "- $(cat "${f%.log}.group"): passed $(grep -cE '^\s*--- PASS: TestParity/.*/.*/.*/' "$f"), failed $(grep -cE '^\s*--- FAIL: TestParity/.*/.*/.*/' "$f") $(grep -E '^(ok|PASS|FAIL)$' "$f" | tr '\n' ' ')"; done
		grep -hE "^\s*--- FAIL|panic|timed out" "$L"/parity-*.log | head -20
		echo "## engine tests"
		grep -E "^\s*--- (PASS|FAIL): TestGPU[A-Za-z]*( |$)|^(ok|FAIL|PASS)$|panic" "$L/engine-tests.log" | head
		echo "## ptxas -v (registers, spills)"
		for f in "$L"/ptxas-*.log; do echo "--- $(basename "$f")"; grep -E "spill|Used" "$f" | sed -E 's/^ptxas info *: //' | sort | uniq -c | sort -rn | head -8; done
		echo "## decode token (TestDecodeProfile)"
		grep -hE "^model|^\| |^ROW|differ|FAIL|panic" "$L"/time-*.log 2>/dev/null | head -60
		echo "## prefill (TestGPUBench)"
		grep -hE "^ROW|FAIL|panic|tiles=[a-z0-9+]+: " "$L"/gpubench-*.log 2>/dev/null | head -40
		grep -hA30 "device time per token by kernel" "$L"/gpubench-*.log 2>/dev/null | grep -E "^\||prefill" | head -80
		echo "## mmvq at the engine's decode shapes"
		cat "$L/bench.txt" 2>/dev/null || grep -hE "FAIL|panic" "$L/bench-engine.log"
		echo "## mmvq at 4096×14336, n = 1"
		cat "$L/std/bench.txt" 2>/dev/null || grep -hE "FAIL|panic" "$L/bench-std.log" 2>/dev/null
		echo "## moe_decode"
		cat "$L/bench-moe.txt" 2>/dev/null || grep -hE "FAIL|panic" "$L/bench-moe.log"
		echo "## mmq8 w8a vs w8 (TOPS)"
		for f in "$L"/prefill-w8-*/bench_prefill.txt; do echo "--- $f"; grep -E "_mma_|ceiling" "$f"; done 2>/dev/null
		echo
		echo "total: $((SECONDS - t0)) s"
	} >>"$sum"
	cp "$L"/bench*.txt "$OUT/" 2>/dev/null
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
