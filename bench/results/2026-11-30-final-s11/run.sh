#!/usr/bin/env bash
# Lead's H200 call(s) of session 11 (issue 11): the merged main's budget table — the three
# synthetic models of the issue at 12 / 16 / 24 GiB and unlimited, cold and warm decode,
# prefill 512 and 4096 — with the GPU-vs-CPU engine tests and the parity groups named.
# Derived from final-s10's run.sh (its steps are kept; the new one is `table`).
#
#   run.sh build   build machine, repository root: parity.test and strata-run.test
#       (CGO_ENABLED=0, -tags strata_nodemo, stripped, xz) and every sm_90 code object as
#       co.tar.xz, into $DEV (default /work/main/.dev-s11).
#   run.sh run     GPU machine, repository root of the device copy (carry .dev-s10), $OUT set.
#       STRATA_S11_BUDGET seconds in all (default 380). STRATA_S11_PARITY: parity groups
#       (-test.run patterns under TestParity/sm_90/, space separated; default none).
#       STRATA_S11_PARITY_S: their time limit (default 110).
#       STRATA_S11_STEPS: benchmark steps in order (default: table; also final-s10's gpu80
#       gpu30 gpu30x layer std budgets, and profile, which needs a gpu.test in the carry).
#       table: STRATA_S11_TABLE models (default q30-q2_0 q30-iq2_xs q80-iq2_xs),
#       STRATA_S11_BUDGETS (MiB, 0 unlimited; default 12288,16384,24576,0), STRATA_S11_WARM
#       (default 448), STRATA_S11_TABLE_S seconds a model (default 120). hg: the 80B at
#       STRATA_S11_HG_BUDGETS with STRATA_S11_HG_MODES (STRATA_BENCH_HOSTGAP; default A/C
#       alternated three times: the look-ahead with promotions against landing without). STRATA_S11_ENGINE=0 leaves out the GPU-vs-CPU engine tests.
#   STRATA_S11_DRY=1 run.sh run   the same flow with stub binaries (no GPU).
#
# Trees on the device: co (every object, unassembled: parity) and eco (the engine's set: mmq
# cut to its r64t64/r64t128 mma tiles, moe_prefill to r64t32/r64t48/r64t64, the rest whole;
# every PTX assembled by ptxas first so no driver JIT runs inside a timing).
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)

build() {
	set -e
	cd "$here/../../.."
	local d=${DEV:-/work/main/.dev-s11} target=sm_90 flags call=${STRATA_S11_CALL:-1}
	rm -rf "$d" && mkdir -p "$d/co"
	export CGO_ENABLED=0
	# Session 10 runs its calls from /work/main detached with the demo model out of the index
	# (45.1 MB tracked), so the carry holds ~21 MB: call 3 carries everything.
	if [ "$call" = 1 ] || [ "$call" = 3 ]; then
		go test -c -trimpath -ldflags=-s -tags strata_nodemo -o "$d/parity.test" ./parity
	fi
	if [ "$call" = 3 ]; then # call 3: parity.test, strata-run.test, gpu.test and every object
		go test -c -trimpath -ldflags=-s -tags strata_nodemo -o "$d/strata-run.test" ./cmd/strata-run
		go test -c -trimpath -ldflags=-s -tags strata_nodemo -o "$d/gpu.test" ./model/gpu
	elif [ "$call" != 1 ]; then
		go test -c -trimpath -ldflags=-s -tags strata_nodemo -o "$d/strata-run.test" ./cmd/strata-run
		go test -c -trimpath -ldflags=-s -tags strata_nodemo -o "$d/gpu.test" ./model/gpu
	fi
	xz -9e -T2 "$d"/*.test
	flags=$(awk -F'\t' -v t="$target" '$1 == "target" && $2 == t { print $6 }' kernels/out/objects.txt)
	awk -F'\t' -v t="$target" '$1 == "object" && $2 == t { print $4 "\t" $5 }' kernels/out/objects.txt |
		while IFS=$'\t' read -r src obj; do
			if [ "$call" = 2 ]; then
				case $obj in */mmq8x4*.ptx | */imma_tile.ptx | */prelude_probe.ptx) continue ;; esac
			fi
			mkdir -p "$d/co/$(dirname "$obj")"
			# shellcheck disable=SC2086 # flags are a list
			clang-19 $flags -I "$(dirname "$src")" -I kernels/out/include "$src" -o "$d/co/$obj"
			if [ "$call" = 2 ]; then
				case $obj in
				*/mmq.ptx) python3 "$here/../2026-11-29-prefill-async/strip_ptx.py" "$d/co/$obj" "$d/co/$obj.s" '_mma_r64t(64|128)$' >/dev/null && mv "$d/co/$obj.s" "$d/co/$obj" ;;
				*/moe_prefill.ptx) python3 "$here/../2026-11-29-prefill-async/strip_ptx.py" "$d/co/$obj" "$d/co/$obj.s" '_mma_r64t(32|48|64)[pqx]?$' >/dev/null && mv "$d/co/$obj.s" "$d/co/$obj" ;;
				esac
			fi
		done
	tar -C "$d" -cf - co | xz -9e -T2 >"$d/co.tar.xz" && rm -r "$d/co"
	cp "$here/run.sh" "$here/../2026-11-29-prefill-async/strip_ptx.py" "$d/"
	git rev-parse HEAD >"$d/commit"
	git status --porcelain >>"$d/commit"
	ls -la "$d"
	du -sh "$d"
}

run() {
	local d=$here w=/tmp/s11 t0=$SECONDS budget=${STRATA_S11_BUDGET:-380} dry=${STRATA_S11_DRY:-0}
	: "${OUT:?set OUT}"
	rm -rf "$w" && mkdir -p "$w/logs" "$w/models"
	local L=$w/logs pt=$w/parity.test st=$w/sr.test gt=$w/gpu.test P rel
	left() { echo $((budget - (SECONDS - t0) - $1)); }
	# lim WANT RESERVE: WANT seconds, cut to what is left after RESERVE (at least 5)
	lim() { local l; l=$(left "$2"); [ "$l" -lt "$1" ] && echo $((l > 5 ? l : 5)) || echo "$1"; }
	local sum="$OUT/summary.md"
	echo "# final-s11 run.sh run ($(date -u +%FT%TZ)), budget ${budget}s, dry $dry, commit $(head -1 "$d/commit" 2>/dev/null)" >"$sum"
	say() { echo "- $* at $((SECONDS - t0)) s" | tee -a "$sum"; }
	P=$(command -v ptxas || echo /usr/local/cuda/bin/ptxas)
	if [ "$dry" = 1 ]; then
		printf '#!/bin/sh\necho "stub $0 $*"; env | grep -E "^STRATA_(CO_DIR|BENCH_[A-Z_]+|DECODE_[A-Z_]+|RUN_ARGS)=" | sort; sleep %s\ncase "$STRATA_RUN_ARGS" in *" -o "*) f=${STRATA_RUN_ARGS##* -o }; : >"$f";; esac\necho "--- PASS: TestParity/sm_90/x/y/z"\necho "ROW | stub |"\necho PASS\n' "${STRATA_S11_DRY_SLEEP:-1}" >"$pt"
		cp "$pt" "$st" && cp "$pt" "$gt" && chmod +x "$pt" "$st" "$gt"
		mkdir -p "$w/co/sm_90"
		for f in mmvq mmq mmq8 mmq8x4 moe_prefill moe_decode rmsnorm_row gated_delta_net; do echo "// stub" >"$w/co/sm_90/$f.ptx"; done
		printf '#!/bin/sh\nwhile [ $# -gt 1 ]; do case $1 in -o) shift; o=$1;; *) i=$1;; esac; shift; done\ncp "$i" "$o"; echo "ptxas stub: Used 128 registers, 0 bytes spill stores"\n' >"$w/ptxas" && chmod +x "$w/ptxas"
		P=$w/ptxas
		printf '#!/usr/bin/env python3\nimport shutil, sys\nshutil.copyfile(sys.argv[1], sys.argv[2])\n' >"$w/strip_ptx.py"
	else
		python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' "$d/co.tar.xz" "$w"
		for b in parity:parity strata-run:sr gpu:gpu; do
			[ -f "$d/${b%%:*}.test.xz" ] || continue
			python3 -c 'import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2], "wb"))' "$d/${b%%:*}.test.xz" "$w/${b#*:}.test" && chmod +x "$w/${b#*:}.test"
		done
		cp "$d/strip_ptx.py" "$w/"
		{ nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv; "$P" --version; } >"$L/machine.log" 2>&1
	fi
	cat "$d/commit" >"$L/commit" 2>/dev/null
	export STRATA_REQUIRE_GPU=1
	(cd "$w/co" && find . -type f) | while read -r rel; do
		mkdir -p "$w/eco/$(dirname "$rel")"
		case $rel in
		*/mmq.ptx) python3 "$w/strip_ptx.py" "$w/co/$rel" "$w/eco/$rel" '_mma_r64t(64|128)$' >/dev/null ;;
		*/moe_prefill.ptx) python3 "$w/strip_ptx.py" "$w/co/$rel" "$w/eco/$rel" '_mma_r64t(32|48|64)[pqx]?$' >/dev/null ;;
		*) cp "$w/co/$rel" "$w/eco/$rel" ;;
		esac
	done
	# STRATA_S11_DROP: families (file names under sm_90, no .ptx) left out of eco, so the layer
	# bench runs only the families it should compare
	for f in ${STRATA_S11_DROP:-}; do rm -f "$w/eco/sm_90/$f.ptx"; done
	# the synthetic models, in the background
	(
		for spec in "q80-iq2_xs|qwen3next --preset qwen3-next-80b-a3b --type iq2_xs" "q30-q2_0|qwen3moe --preset qwen3-30b-a3b --type q2_0" "q30-iq2_xs|qwen3moe --preset qwen3-30b-a3b --type iq2_xs" "q30-q6_k|qwen3moe --preset qwen3-30b-a3b --type q6_K"; do
			case " ${STRATA_S11_MODELS:-q80-iq2_xs q30-q2_0 q30-iq2_xs} " in *" ${spec%%|*} "*) ;; *) continue ;; esac
			STRATA_CO_DIR=$w/co STRATA_RUN_ARGS="synth --arch ${spec#*|} -o $w/models/${spec%%|*}.gguf" timeout 100 "$st" -test.run '^TestCLI$' -test.v >"$L/synth-${spec%%|*}.log" 2>&1
			echo $? >"$w/models/${spec%%|*}.done"
		done
	) &
	local syn=$!
	find "$w/eco" -name '*.ptx' | xargs -P 16 -I{} sh -c '"$1" -v -arch=sm_90 "$2" -o "$2.cubin" >"$2.log" 2>&1 && mv "$2.cubin" "$2" || echo "ptxas failed: $2"' _ "$P" {} >"$L/ptxas.log" 2>&1
	for f in "$w"/eco/sm_90/*.ptx.log; do cp "$f" "$L/ptxas-$(basename "${f%.ptx.log}").log"; done
	say "ptxas: $(grep -c failed "$L/ptxas.log") failed; spills: $(cat "$L"/ptxas-*.log 2>/dev/null | grep -cE ' [1-9][0-9]* bytes spill')"
	# parity (co, unassembled) beside the GPU-vs-CPU engine tests (eco)
	local pids=() g p1 i=0
	p1=$(lim "${STRATA_S11_PARITY_S:-110}" "${STRATA_S11_PARITY_RESERVE:-150}")
	for g in ${STRATA_S11_PARITY:-}; do
		echo "$g" >"$L/parity-$i.group"
		STRATA_CO_DIR=$w/co timeout "$p1" "$pt" -test.v -test.timeout "$((p1 - 3))s" -test.run "TestParity/sm_90/$g" >"$L/parity-$i.log" 2>&1 &
		pids+=($!)
		i=$((i + 1))
	done
	if [ "${STRATA_S11_ENGINE:-1}" = 1 ]; then
		STRATA_CO_DIR=$w/eco timeout "$p1" "$st" -test.run '^(TestGPUEngineMatchesCPU|TestGPUEngineNextMatchesCPU)$' -test.v -test.timeout "$((p1 - 3))s" >"$L/engine-tests.log" 2>&1
		say "engine tests exit $?"
	fi
	wait "${pids[@]}"
	say "parity done"
	waitm() { # waitm NAME: the model is there (0) or not in time (1)
		while [ ! -e "$w/models/$1.done" ] && [ "$(left 10)" -gt 0 ]; do sleep 1; done
		[ -s "$w/models/$1.gguf" ] || [ "$dry" = 1 ]
	}
	# gpub NAME MODEL TILES PREFILL BUDGETS TOKENS SECONDS: TestGPUBench on one engine
	gpub() {
		waitm "$2" || { say "$2: no model"; return; }
		local lm
		lm=$(lim "$7" 5)
		STRATA_CO_DIR=$w/eco STRATA_GPU_BENCH=1 STRATA_BENCH_MODEL=$w/models/$2.gguf STRATA_BENCH_OUT=$L STRATA_BENCH_LABEL=$1 \
			STRATA_BENCH_POLICIES=decayed STRATA_BENCH_BUDGETS_MIB=$5 STRATA_BENCH_CTX=4096 STRATA_BENCH_TOKENS=$6 STRATA_BENCH_CHUNK=${CHUNK:-512} \
			STRATA_BENCH_PREFILL=$4 STRATA_BENCH_PTILES=$3 STRATA_BENCH_PKTIMES=${PKTIMES-512} STRATA_BENCH_WARM=${WARM:-0} STRATA_BENCH_LANDPROMOTE=${LANDPROMOTE:-0} \
			timeout "$lm" "$st" -test.run '^TestGPUBench$' -test.v -test.timeout "$((lm - 2))s" >"$L/gpubench-$1.log" 2>&1
		say "gpubench-$1 exit $?"
	}
	local s m lm
	for s in ${STRATA_S11_STEPS:-table}; do
		case $s in
		gpu80) gpub q80 q80-iq2_xs "${STRATA_S11_T80:-best,best+attnf32+shdec+gdnold,best,best+attnf32+shdec+gdnold}" 512,4096 0 1 60 ;;
		gpu30) gpub q30 q30-q2_0 "${STRATA_S11_T30:-best,best+attnf32,best,best+attnf32}" 512,4096 0 1 40 ;;
		gpu30x) gpub q30x q30-iq2_xs "${STRATA_S11_T30X:-t32,best,t32,best}" 512 0 1 35 ;;
		gpu30q6) gpub q30q6 q30-q6_k "${STRATA_S11_T30Q6:-s8,best,s8,best}" 512,2048 0 1 60 ;;
		gpu30q6c) CHUNK=2048 gpub q30q6c q30-q6_k "${STRATA_S11_T30Q6:-s8,best,s8,best}" 2048 0 1 60 ;; # chunks of 2048: 128 pairs an expert (TilesBest r64t48x, TilesS8 r64t64)
		budgets) gpub budgets q80-iq2_xs best 512,4096 "${STRATA_S11_BUDGETS:-12288,16384,24576,0}" 64 "${STRATA_S11_BUDGETS_S:-110}" ;;
		table) # issue 11's table: every model, every budget, cold decode, warm decode (WARM untimed steps first), prefill 512 / 4096
			for m in ${STRATA_S11_TABLE:-q30-q2_0 q30-iq2_xs q80-iq2_xs}; do
				PKTIMES= WARM=${STRATA_S11_WARM:-448} gpub "table-$m" "$m" best 512,4096 "${STRATA_S11_BUDGETS:-12288,16384,24576,0}" 64 "${STRATA_S11_TABLE_S:-120}"
			done
			;;
		tablelp) # landing with promotions (Options.LandPromote) at the budgets: cold and warm decode, no prompts
			LANDPROMOTE=1 PKTIMES= WARM=${STRATA_S11_WARM:-448} gpub table-lp-q80-iq2_xs q80-iq2_xs best 0 "${STRATA_S11_LP_BUDGETS:-12288,16384,24576}" 64 "${STRATA_S11_LP_S:-80}"
			;;
		hg) # the session's path against the one before, alternated on one engine per budget (STRATA_BENCH_HOSTGAP, token events on):
			# A = look-ahead with promotions, batch before the launch (final-s10's default); C = landing, no promotions (this session's default)
			if waitm q80-iq2_xs; then
				lm=$(lim "${STRATA_S11_HG_S:-100}" 5)
				STRATA_CO_DIR=$w/eco STRATA_GPU_BENCH=1 STRATA_BENCH_MODEL=$w/models/q80-iq2_xs.gguf STRATA_BENCH_OUT=$L STRATA_BENCH_LABEL=hg \
					STRATA_BENCH_POLICIES=decayed STRATA_BENCH_BUDGETS_MIB="${STRATA_S11_HG_BUDGETS:-12288,16384,24576}" STRATA_BENCH_CTX=4096 \
					STRATA_BENCH_TOKENS=64 STRATA_BENCH_CHUNK=512 \
					STRATA_BENCH_HOSTGAP="${STRATA_S11_HG_MODES:-new+argmax+ahead,new+argmax+ahead+land+nopromote,new+argmax+ahead,new+argmax+ahead+land+nopromote,new+argmax+ahead,new+argmax+ahead+land+nopromote}" \
					timeout "$lm" "$st" -test.run '^TestGPUBench$' -test.v -test.timeout "$((lm - 2))s" >"$L/gpubench-hg.log" 2>&1
				say "gpubench-hg exit $?"
			else
				say "q80-iq2_xs: no model"
			fi
			;;
		conn32) # hostgap-s9's question: does a second hardware queue for the copies take the ~1 ms a token off at 12 GiB?
			CUDA_DEVICE_MAX_CONNECTIONS=32 gpub conn32 q80-iq2_xs best 0 12288 64 40
			gpub conn8 q80-iq2_xs best 0 12288 64 40 ;;
		layer) # mmq8 / mmq8x / mmq8x4 at 4096×14336 and moe_prefill r64t32 / r64t48 at the 30B shape
			for i in 1 2; do
				mkdir -p "$L/layer-$i"
				lm=$(lim "${STRATA_S11_LAYER_S:-35}" 3)
				STRATA_CO_DIR=$w/eco STRATA_BENCH=1 STRATA_BENCH_OUT=$L/layer-$i STRATA_BENCH_FILTER="${STRATA_S11_LAYER:-_mma_r64t(128w8|32|48)[pq]?$}" STRATA_BENCH_ROUNDS=${STRATA_S11_ROUNDS:-1} \
					timeout "$lm" "$pt" -test.run '^TestBenchPrefill$' -test.v -test.timeout "$((lm - 2))s" >"$L/layer-$i.log" 2>&1
				say "layer-$i exit $?"
			done
			;;
		std) # mmvq at 4096×14336, n = 1 (issue 5's table; every type, events and graph view)
			lm=$(lim 40 5)
			mkdir -p "$L/std"
			STRATA_CO_DIR=$w/eco STRATA_BENCH=1 STRATA_BENCH_NS=1 STRATA_BENCH_EXPERTS=0 STRATA_BENCH_OUT=$L/std \
				timeout "$lm" "$pt" -test.v -test.timeout "$((lm - 2))s" -test.run '^TestBenchDecode$' >"$L/bench-std.log" 2>&1
			say "bench-std exit $?"
			;;
		profile) # the decode token: every mode's last logits bitwise equal to base's (nfuse's check)
			for m in q30-q2_0 q80-iq2_xs; do
				waitm $m || { say "$m: no model"; continue; }
				lm=$(lim 35 5)
				STRATA_CO_DIR=$w/eco STRATA_DECODE_PROFILE=1 STRATA_BENCH_MODEL=$w/models/$m.gguf STRATA_BENCH_TOKENS=64 STRATA_BENCH_CTX=1024 \
					STRATA_DECODE_MODES=${STRATA_S11_MODES:-base,mmvqold,oldnorm,nopdl} \
					timeout "$lm" "$gt" -test.run '^TestDecodeProfile$' -test.v -test.timeout "$((lm - 2))s" >"$L/time-$m.log" 2>&1
				say "time-$m exit $?"
			done
			;;
		esac
	done
	kill "$syn" 2>/dev/null
	rm -f "$w"/models/*.gguf
	{
		echo
		echo "## parity"
		for f in "$L"/parity-*.log; do echo "- $(cat "${f%.log}.group"): passed $(grep -cE '^\s*--- PASS: TestParity/.*/.*/.*/' "$f"), failed $(grep -cE '^\s*--- FAIL: TestParity/.*/.*/.*/' "$f"), skipped $(grep -cE '^\s*--- SKIP: TestParity/.*/.*/.*/' "$f") $(grep -E '^(ok|PASS|FAIL)$' "$f" | tr '\n' ' ')"; done
		grep -hE "^\s*--- FAIL|panic|timed out" "$L"/parity-*.log | head -20
		echo "## engine tests"
		grep -E "^\s*--- (PASS|FAIL): TestGPU[A-Za-z]*( |$)|^(ok|FAIL|PASS)$|panic" "$L/engine-tests.log" | head
		echo "## ptxas -v (registers, spills)"
		for f in "$L"/ptxas-*.log; do echo "--- $(basename "$f")"; grep -E "spill|Used" "$f" | sed -E 's/^ptxas info *: //' | sort | uniq -c | sort -rn | head -6; done
		echo "## prefill (TestGPUBench)"
		for f in "$L"/gpubench-*.log; do echo "--- $(basename "$f")"; grep -hE "^ROW|^PHASES|FAIL|panic|tiles=[a-z0-9+]+: |ceilings:" "$f" | head -40; done 2>/dev/null
		grep -hA30 "device time per token by kernel" "$L"/gpubench-*.log 2>/dev/null | grep -E "^\||prefill" | head -90
		echo "## layer benches (TOPS)"
		for f in "$L"/layer-*/bench_prefill.txt; do echo "--- $f"; grep -E "_mma_|ceiling" "$f"; done 2>/dev/null
		echo "## mmvq at 4096×14336, n = 1"
		cat "$L/std/bench.txt" 2>/dev/null || grep -hE "FAIL|panic" "$L/bench-std.log" 2>/dev/null
		echo "## decode token (TestDecodeProfile)"
		grep -hE "^model|^\| |^ROW|differ|FAIL|panic|^(ok|PASS)$" "$L"/time-*.log 2>/dev/null | head -40
		echo
		echo "total: $((SECONDS - t0)) s"
	} >>"$sum"
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
