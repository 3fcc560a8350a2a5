#!/usr/bin/env bash
# Helper res's H200 call (session 10, issue 11): resident decode with fewer launches on the
# 80B-A3B's delta-net layers (gated_delta_net/recurrentq: the output's Q8_1 blocks written by
# the recurrence; recurrentcq: the conv folded in as well), proven (parity of the changed
# gated_delta_net variants, the GPU-vs-CPU engine tests) and timed against the old paths on one
# engine per model (TestDecodeProfile, alternated). Trimmed from bench/results/2026-11-30-dec-s9/run.sh.
#
#   run.sh build   build machine, repository root: gpu.test, strata-run.test, parity.test
#       (CGO_ENABLED=0, -tags strata_nodemo, -gcflags=all=-l -ldflags='-s -w', xz --x86) and
#       the sm_90 code objects the engine loads (mmq cut to r64t64/r64t128 mma, moe_prefill to
#       r64t32/48/64[pqx] mma), as co.tar.xz, into $DEV (default /work/main/.dev-res).
#   run.sh run     GPU machine, repository root of the device copy (carry .dev-res), $OUT set.
#       STRATA_RES_BUDGET seconds in all (default 135). STRATA_RES_M30 / STRATA_RES_M80: the
#       TestDecodeProfile modes per model; STRATA_RES_KT30 / STRATA_RES_KT80 their kernel-time
#       modes; STRATA_RES_PARITY: -test.run patterns under TestParity/sm_90/ (space separated).
#   STRATA_RES_DRY=1 run.sh run   the same flow with stub binaries (no GPU).
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)

build() {
	set -e
	cd "$here/../../.."
	local d=${DEV:-/work/main/.dev-res} target=sm_90 flags
	rm -rf "$d" && mkdir -p "$d/co"
	export CGO_ENABLED=0
	local gf=(-c -trimpath -tags strata_nodemo -gcflags=all=-l -ldflags='-s -w')
	go test "${gf[@]}" -o "$d/strata-run.test" ./cmd/strata-run
	go test "${gf[@]}" -o "$d/parity.test" ./parity
	go test "${gf[@]}" -o "$d/gpu.test" ./model/gpu
	xz -9e --x86 --lzma2=preset=9e -T2 "$d"/*.test
	flags=$(awk -F'\t' -v t="$target" '$1 == "target" && $2 == t { print $6 }' kernels/out/objects.txt)
	awk -F'\t' -v t="$target" '$1 == "object" && $2 == t { print $4 "\t" $5 }' kernels/out/objects.txt |
		while IFS=$'\t' read -r src obj; do
			case $obj in */mmq8x4*.ptx | */imma_tile.ptx | */prelude_probe.ptx) continue ;; esac
			mkdir -p "$d/co/$(dirname "$obj")"
			# shellcheck disable=SC2086 # flags are a list
			clang-19 $flags -I "$(dirname "$src")" -I kernels/out/include "$src" -o "$d/co/$obj"
			case $obj in
			*/mmq.ptx) python3 bench/results/2026-11-29-prefill-async/strip_ptx.py "$d/co/$obj" "$d/co/$obj.s" '_mma_r64t(64|128)$' >/dev/null && mv "$d/co/$obj.s" "$d/co/$obj" ;;
			*/moe_prefill.ptx) python3 bench/results/2026-11-29-prefill-async/strip_ptx.py "$d/co/$obj" "$d/co/$obj.s" '_mma_r64t(32|48|64)[pqx]?$' >/dev/null && mv "$d/co/$obj.s" "$d/co/$obj" ;;
			esac
		done
	tar -C "$d" -cf - co | xz -9e -T2 >"$d/co.tar.xz" && rm -r "$d/co"
	cp "$here/run.sh" "$d/"
	git rev-parse HEAD >"$d/commit"
	git status --porcelain >>"$d/commit"
	ls -la "$d"
	du -sh "$d"
}

run() {
	local d=$here w=/tmp/res-s10run t0=$SECONDS budget=${STRATA_RES_BUDGET:-135} dry=${STRATA_RES_DRY:-0}
	: "${OUT:?set OUT}"
	rm -rf "$w" && mkdir -p "$w/logs" "$w/models"
	local L=$w/logs pt=$w/parity.test st=$w/sr.test gt=$w/gpu.test P
	left() { echo $((budget - (SECONDS - t0) - $1)); }
	# lim WANT RESERVE: WANT seconds, cut to what is left after RESERVE (at least 5)
	lim() { local l; l=$(left "$2"); [ "$l" -lt "$1" ] && echo $((l > 5 ? l : 5)) || echo "$1"; }
	local sum="$OUT/summary.md"
	echo "# res-s10 run.sh run ($(date -u +%FT%TZ)), budget ${budget}s, dry $dry, commit $(head -1 "$d/commit" 2>/dev/null)" >"$sum"
	say() { echo "- $* at $((SECONDS - t0)) s" | tee -a "$sum"; }
	P=$(command -v ptxas || echo /usr/local/cuda/bin/ptxas)
	if [ "$dry" = 1 ]; then
		printf '#!/bin/sh\necho "stub $0 $*"; env | grep -E "^STRATA_(CO_DIR|BENCH_[A-Z_]+|DECODE_[A-Z_]+|RUN_ARGS)=" | sort; sleep %s\ncase "$STRATA_RUN_ARGS" in *" -o "*) f=${STRATA_RUN_ARGS##* -o }; : >"$f";; esac\necho "--- PASS: TestParity/sm_90/x/y/z"\necho "ROW | stub |"\necho PASS\n' "${STRATA_RES_DRY_SLEEP:-1}" >"$pt"
		cp "$pt" "$st" && cp "$pt" "$gt" && chmod +x "$pt" "$st" "$gt"
		mkdir -p "$w/co/sm_90"
		for f in mmvq mmq moe_prefill moe_decode rmsnorm_row gated_delta_net attention_decode; do echo "// stub" >"$w/co/sm_90/$f.ptx"; done
		printf '#!/bin/sh\nwhile [ $# -gt 1 ]; do case $1 in -o) shift; o=$1;; *) i=$1;; esac; shift; done\ncp "$i" "$o"; echo "ptxas stub: Used 128 registers, 0 bytes spill stores"\n' >"$w/ptxas" && chmod +x "$w/ptxas"
		P=$w/ptxas
	else
		python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' "$d/co.tar.xz" "$w"
		for b in parity:parity strata-run:sr gpu:gpu; do
			[ -f "$d/${b%%:*}.test.xz" ] || continue
			python3 -c 'import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2], "wb"))' "$d/${b%%:*}.test.xz" "$w/${b#*:}.test" && chmod +x "$w/${b#*:}.test"
		done
		{ nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv; "$P" --version; } >"$L/machine.log" 2>&1
	fi
	cat "$d/commit" >"$L/commit" 2>/dev/null
	export STRATA_REQUIRE_GPU=1
	cp -r "$w/co" "$w/eco"
	# the synthetic models, in the background
	(
		for spec in "q30-q2_0|qwen3moe --preset qwen3-30b-a3b --type q2_0" "q80-iq2_xs|qwen3next --preset qwen3-next-80b-a3b --type iq2_xs"; do
			STRATA_CO_DIR=$w/co STRATA_RUN_ARGS="synth --arch ${spec#*|} -o $w/models/${spec%%|*}.gguf" timeout 100 "$st" -test.run '^TestCLI$' -test.v >"$L/synth-${spec%%|*}.log" 2>&1
			echo $? >"$w/models/${spec%%|*}.done"
		done
	) &
	local syn=$!
	find "$w/eco" -name '*.ptx' | xargs -P 16 -I{} sh -c '"$1" -v -arch=sm_90 "$2" -o "$2.cubin" >"$2.log" 2>&1 && mv "$2.cubin" "$2" || echo "ptxas failed: $2"' _ "$P" {} >"$L/ptxas.log" 2>&1
	for f in "$w"/eco/sm_90/*.ptx.log; do cp "$f" "$L/ptxas-$(basename "${f%.ptx.log}").log"; done
	say "ptxas: $(grep -c failed "$L/ptxas.log") failed; spills: $(cat "$L"/ptxas-*.log 2>/dev/null | grep -cE ' [1-9][0-9]* bytes spill')"
	# parity of the gated_delta_net variants this change made or whose args grew (oq): every
	# case but the prefill ones (float64 references of 4096+ tokens), in two processes (eco,
	# assembled), beside the GPU-vs-CPU engine tests (the engine's defaults)
	local pids=() g i=0 p1
	p1=$(lim 45 90)
	# shellcheck disable=SC2086 # a list of patterns
	for g in ${STRATA_RES_PARITY:-'gated_delta_net/^recurrentq$/^(decode|t=)' 'gated_delta_net/^(conv|recurrent)$/^(decode|t=)'}; do
		[ -x "$pt" ] || break
		echo "$g" >"$L/parity-$i.group"
		STRATA_CO_DIR=$w/eco timeout "$p1" "$pt" -test.v -test.timeout "$((p1 - 3))s" -test.run "TestParity/sm_90/$g" >"$L/parity-$i.log" 2>&1 &
		pids+=($!)
		i=$((i + 1))
	done
	STRATA_CO_DIR=$w/eco timeout "$p1" "$st" -test.run '^(TestGPUEngineMatchesCPU|TestGPUEngineNextMatchesCPU)$' -test.v -test.timeout "$((p1 - 3))s" >"$L/engine-tests.log" 2>&1
	say "engine tests exit $?"
	[ ${#pids[@]} -gt 0 ] && wait "${pids[@]}"
	say "parity done (${#pids[@]} processes)"
	waitm() { # waitm NAME: the model is there (0) or not in time (1)
		while [ ! -e "$w/models/$1.done" ] && [ "$(left 10)" -gt 0 ]; do sleep 1; done
		[ -s "$w/models/$1.gguf" ] || [ "$dry" = 1 ]
	}
	# prof LOG MODEL MODES KTMODES SECONDS: TestDecodeProfile on one engine (64 tokens, ctx 1024)
	prof() {
		waitm "$2" || { say "$2: no model"; return 1; }
		local lm rc
		lm=$(lim "$5" 3)
		STRATA_CO_DIR=$w/eco STRATA_DECODE_PROFILE=1 STRATA_BENCH_MODEL=$w/models/$2.gguf STRATA_BENCH_TOKENS=64 STRATA_BENCH_CTX=1024 \
			STRATA_DECODE_MODES=$3 STRATA_DECODE_KT_MODES=$4 STRATA_DECODE_KT_TOKENS=8 \
			timeout "$lm" "$gt" -test.run '^TestDecodeProfile$' -test.v -test.timeout "$((lm - 2))s" >"$L/$1.log" 2>&1
		rc=$?
		say "$1 ($3; kt $4) exit $rc"
		return $rc
	}
	# 30B: no delta-net layer, so s9 and base are the same launches (the control); 80B: session
	# 9's path (s9) against the new default (base), alternated, then each change alone off
	prof time-q30 q30-q2_0 "${STRATA_RES_M30:-s9,base,s9,base}" "${STRATA_RES_KT30:-base}" 30
	# (call 1 ran s9,base,s9,base,gdnqoff,cqoff with recurrentcq as base; cqoff, recurrentq
	# alone, won and is base since recurrentcq's revert)
	prof time-q80 q80-iq2_xs "${STRATA_RES_M80:-s9,base,s9,base,gdnqoff}" "${STRATA_RES_KT80:-s9,base}" 55
	kill "$syn" 2>/dev/null
	rm -f "$w"/models/*.gguf
	{
		echo
		echo "## parity"
		for f in "$L"/parity-*.log; do echo "- $(cat "${f%.log}.group"): passed $(grep -cE '^\s*--- PASS: TestParity/.*/.*/.*/' "$f"), failed $(grep -cE '^\s*--- FAIL: TestParity/.*/.*/.*/' "$f"), skipped $(grep -cE '^\s*--- SKIP: TestParity/.*/.*/.*/' "$f") $(grep -E '^(ok|PASS|FAIL)$' "$f" | tr '\n' ' ')"; done
		grep -hE "^\s*--- FAIL|panic|timed out|recurrentc?q/" "$L"/parity-*.log | head -40
		echo "## engine tests"
		grep -E "^\s*--- (PASS|FAIL): TestGPU[A-Za-z]*( |$)|^(ok|FAIL|PASS)$|panic" "$L/engine-tests.log" | head
		echo "## ptxas -v gated_delta_net (registers, spills)"
		grep -E "spill|Used" "$L/ptxas-gated_delta_net.log" 2>/dev/null | sed -E 's/^ptxas info *: //' | sort | uniq -c | sort -rn | head -8
		echo "## decode token (TestDecodeProfile)"
		grep -hE "^model|^\| |^ROW|^KT|differ|not bitwise|FAIL|panic|graphs stopped|^(ok|PASS)$" "$L"/time-*.log 2>/dev/null | head -150
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
