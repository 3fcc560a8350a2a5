#!/usr/bin/env bash
# Session 7, helper mmvqs (issues 5 and 11): mmvq at the engine's decode shapes, the decode
# geometries (geom 1..4) against the default path (geom 0), in one H200 call.
#
#   run.sh build   build machine, from this worktree's root: parity.test, gpu.test (model/gpu),
#       strata-run.test (synth, the GPU-vs-CPU engine tests) (CGO_ENABLED=0, -tags
#       strata_nodemo, stripped, xz) and every sm_90 code object (co.tar.xz), into $DEV
#       (default /work/main/.dev-mmvqs), with this script and strip_ptx.py.
#   run.sh run     GPU machine, repository root of the device copy (carry .dev-mmvqs), $OUT
#       set: OUT=$OUT bash .dev-mmvqs/run.sh run. Steps (times from final-s6's check.sh):
#         1. unpack; ptxas every PTX of the engine's set (eco: mmq/moe_prefill cut to their
#            r64t64/r128t64 mma tiles) so nothing waits for the driver's JIT; ptxas -v of
#            mmvq into logs/ptxas-mmvq.log (registers, spills) — while both synthetic models
#            are written in the background;
#         2. in parallel: mmvq parity (every sm_90 variant and case, three processes, the
#            geometry cases included) and the GPU-vs-CPU engine tests (the geometries on the
#            tiny models' shapes);
#         3. TestBenchDecode with STRATA_BENCH_ENGINE=1: mmvq at the 30B/80B decode shapes,
#            geom 0 against the engine's geometry and against the kernels before (ref:
#            a2cd2ed's mmvq) (events and graph view, median of 60, weights rotated over
#            ≥ 256 MiB), the bitwise check of geom 0 and the geometry, per-token sums;
#         4. TestDecodeProfile per model, modes $STRATA_MMVQS_MODES on one engine (default
#            base,mmvqold,base,mmvqold,nopdl,mmvqoldnopdl: the device ms of a token's graph
#            and the caller's tok/s, each mode 128 tokens; tokens must be equal in every mode).
#       Expected ~110 s; the steps are cut to STRATA_MMVQS_BUDGET seconds (default 180).
#   STRATA_MMVQS_DRY=1 run.sh run   the same flow with stub binaries (no GPU), for rehearsal.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)

build() {
	set -e
	cd "$here/../../.."
	local d=${DEV:-/work/main/.dev-mmvqs} target=sm_90 flags
	rm -rf "$d" && mkdir -p "$d/co"
	export CGO_ENABLED=0
	go test -c -trimpath -ldflags=-s -tags strata_nodemo -o "$d/parity.test" ./parity
	go test -c -trimpath -ldflags=-s -tags strata_nodemo -o "$d/gpu.test" ./model/gpu
	go test -c -trimpath -ldflags=-s -tags strata_nodemo -o "$d/strata-run.test" ./cmd/strata-run
	xz -9e -T2 "$d"/*.test
	flags=$(awk -F'\t' -v t="$target" '$1 == "target" && $2 == t { print $6 }' kernels/out/objects.txt)
	awk -F'\t' -v t="$target" '$1 == "object" && $2 == t { print $4 "\t" $5 }' kernels/out/objects.txt |
		while IFS=$'\t' read -r src obj; do
			mkdir -p "$d/co/$(dirname "$obj")"
			# shellcheck disable=SC2086 # flags are a list
			clang-19 $flags -I "$(dirname "$src")" -I kernels/out/include "$src" -o "$d/co/$obj"
		done
	# ref: mmvq of the kernels before the geometries (STRATA_MMVQS_REF, default a2cd2ed, the
	# session's main), for the benchmark's "ref" rows (geom 0 of the new kernel against it)
	local tmp src
	tmp=$(mktemp -d)
	git archive "${STRATA_MMVQS_REF:-a2cd2ed}" kernels/out/sm_90 kernels/out/include | tar -x -C "$tmp"
	src=$tmp/kernels/out/sm_90/mmvq.cu
	mkdir -p "$d/co/ref/sm_90"
	# shellcheck disable=SC2086 # flags are a list
	clang-19 $flags -I "$(dirname "$src")" -I "$tmp/kernels/out/include" "$src" -o "$d/co/ref/sm_90/mmvq.ptx"
	rm -rf "$tmp"
	tar -C "$d" -cf - co | xz -9e -T2 >"$d/co.tar.xz" && rm -r "$d/co" # the carry limit includes the tracked tree
	cp "$here/run.sh" "$here/../2026-11-29-prefill-async/strip_ptx.py" "$d/"
	git rev-parse HEAD >"$d/commit"
	git status --porcelain >>"$d/commit"
	ls -la "$d"
	du -sh "$d"
}

run() {
	local d=$here w=/tmp/mmvqs t0=$SECONDS budget=${STRATA_MMVQS_BUDGET:-180} dry=${STRATA_MMVQS_DRY:-0}
	: "${OUT:?set OUT}"
	rm -rf "$w" && mkdir -p "$w/logs" "$w/models"
	local L=$w/logs pt=$w/parity.test st=$w/sr.test gt=$w/gpu.test P
	left() { echo $((budget - (SECONDS - t0) - $1)); }
	# lim WANT RESERVE: WANT seconds, cut to what is left after RESERVE (at least 5)
	lim() { local l; l=$(left "$2"); [ "$l" -lt "$1" ] && echo $((l > 5 ? l : 5)) || echo "$1"; }
	local sum="$OUT/summary.md"
	echo "# mmvqs run.sh run ($(date -u +%FT%TZ)), budget ${budget}s, dry $dry, commit $(head -1 "$d/commit" 2>/dev/null)" >"$sum"
	say() { echo "- $* at $((SECONDS - t0)) s" | tee -a "$sum"; }
	P=$(command -v ptxas || echo /usr/local/cuda/bin/ptxas)
	if [ "$dry" = 1 ]; then
		printf '#!/bin/sh\necho "stub $0 $*"; env | grep -E "^STRATA_(CO_DIR|BENCH_[A-Z_]+|DECODE_[A-Z_]+)=" | sort; sleep %s\ncase "$STRATA_RUN_ARGS" in *" -o "*) f=${STRATA_RUN_ARGS##* -o }; : >"$f";; esac\necho "--- PASS: TestParity/sm_90/mmvq/q80/x"\necho "ROW | stub |"\necho PASS\n' "${STRATA_MMVQS_DRY_SLEEP:-1}" >"$pt"
		cp "$pt" "$st" && cp "$pt" "$gt" && chmod +x "$pt" "$st" "$gt"
		mkdir -p "$w/co/sm_90" "$w/co/ref/sm_90" && echo "// stub" >"$w/co/sm_90/mmvq.ptx" && echo "// stub" >"$w/co/sm_90/mmq.ptx" && echo "// stub" >"$w/co/ref/sm_90/mmvq.ptx"
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
	# 1. the engine's set (eco) and ref, assembled; the models in the background
	local rel
	mkdir -p "$w/ref" && { [ ! -d "$w/co/ref" ] || { mv "$w/co/ref"/* "$w/ref/" && rmdir "$w/co/ref"; }; }
	(cd "$w/co" && find . -type f) | while read -r rel; do
		mkdir -p "$w/eco/$(dirname "$rel")"
		case $rel in
		*/mmq.ptx | */moe_prefill.ptx) python3 "$w/strip_ptx.py" "$w/co/$rel" "$w/eco/$rel" '_mma_r(64|128)t64$' >/dev/null ;;
		*) cp "$w/co/$rel" "$w/eco/$rel" ;;
		esac
	done
	(
		for spec in "q30-q2_0|qwen3moe --preset qwen3-30b-a3b --type q2_0" "q80-iq2_xs|qwen3next --preset qwen3-next-80b-a3b --type iq2_xs"; do
			STRATA_CO_DIR=$w/eco STRATA_RUN_ARGS="synth --arch ${spec#*|} -o $w/models/${spec%%|*}.gguf" timeout 100 "$st" -test.run '^TestCLI$' -test.v >"$L/synth-${spec%%|*}.log" 2>&1
			echo $? >"$w/models/${spec%%|*}.done"
		done
	) &
	local syn=$!
	find "$w/eco" "$w/ref" -name '*.ptx' | xargs -P 16 -I{} sh -c '"$1" -v -arch=sm_90 "$2" -o "$2.cubin" >"$2.log" 2>&1 && mv "$2.cubin" "$2" || echo "ptxas failed: $2"' _ "$P" {} >"$L/ptxas.log" 2>&1
	cat "$w/eco/sm_90/mmvq.ptx.log" >"$L/ptxas-mmvq.log" 2>/dev/null
	cat "$w/ref/sm_90/mmvq.ptx.log" >"$L/ptxas-mmvq-ref.log" 2>/dev/null
	say "ptxas: $(grep -c failed "$L/ptxas.log") failed; mmvq: $(grep -cE '[1-9][0-9]* bytes spill' "$L/ptxas-mmvq.log") functions with spills; $(grep -oE 'Used [0-9]+ registers' "$L/ptxas-mmvq.log" | sort | uniq -c | tr '\n' ';')"
	# 2. parity of mmvq (three processes) beside the engine tests
	local pids=() g p1
	p1=$(lim 75 70)
	for g in "mmvq/(f16|bf16|q80|q20)/" "mmvq/(q4k|q6k|iq2xs)/" "mmvq/(iq3xxs|iq3s|iq1m)/"; do
		STRATA_CO_DIR=$w/eco timeout "$p1" "$pt" -test.v -test.timeout "$((p1 - 3))s" -test.run "TestParity/sm_90/$g" >"$L/parity-${#pids[@]}.log" 2>&1 &
		pids+=($!)
	done
	STRATA_CO_DIR=$w/eco timeout "$p1" "$st" -test.run '^(TestGPUEngineMatchesCPU|TestGPUEngineNextMatchesCPU)$' -test.v -test.timeout "$((p1 - 3))s" >"$L/engine-tests.log" 2>&1
	say "engine tests exit $?"
	wait "${pids[@]}"
	say "parity done"
	# 3. mmvq at the engine's shapes
	local b3
	b3=$(lim 30 45)
	local ref=
	[ -f "$w/ref/sm_90/mmvq.ptx" ] && ref=$w/ref
	STRATA_CO_DIR=$w/eco STRATA_BENCH_MMVQ_REF=$ref STRATA_BENCH=1 STRATA_BENCH_ENGINE=1 STRATA_BENCH_FLOORS=0 STRATA_BENCH_OUT=$L timeout "$b3" "$pt" -test.v -test.timeout "$((b3 - 2))s" -test.run '^TestBenchDecode$' >"$L/bench-engine.log" 2>&1
	say "bench-engine exit $?"
	# 4. the decode token, modes on one engine per model
	local m st4
	for m in q30-q2_0 q80-iq2_xs; do
		while [ ! -e "$w/models/$m.done" ] && [ "$(left 10)" -gt 0 ]; do sleep 1; done
		[ -e "$w/models/$m.done" ] || { say "$m: no model in time"; continue; }
		st4=$(lim 40 5)
		STRATA_CO_DIR=$w/eco STRATA_DECODE_PROFILE=1 STRATA_BENCH_MODEL=$w/models/$m.gguf STRATA_BENCH_TOKENS=128 STRATA_BENCH_CTX=1024 \
			STRATA_DECODE_MODES=${STRATA_MMVQS_MODES:-base,mmvqold,base,mmvqold,nopdl,mmvqoldnopdl} \
			timeout "$st4" "$gt" -test.run '^TestDecodeProfile$' -test.v -test.timeout "$((st4 - 2))s" >"$L/time-$m.log" 2>&1
		say "time-$m exit $? (synth exit $(cat "$w/models/$m.done"))"
	done
	kill "$syn" 2>/dev/null
	rm -f "$w"/models/*.gguf
	{
		echo
		echo "## parity (mmvq)"
		for f in "$L"/parity-*.log; do echo "- $(basename "$f"): passed $(grep -cE '^\s*--- PASS: TestParity/.*/.*/.*/' "$f"), failed $(grep -cE '^\s*--- FAIL: TestParity/.*/.*/.*/' "$f") $(grep -E '^(ok|PASS|FAIL)$' "$f" | tr '\n' ' ')"; done
		grep -hE "^\s*--- FAIL|panic|timed out" "$L"/parity-*.log | head -20
		echo "## engine tests"
		grep -E "^\s*--- (PASS|FAIL): TestGPU[A-Za-z]*( |$)|^(ok|FAIL|PASS)$|panic" "$L/engine-tests.log" | head
		echo "## ptxas -v, mmvq (then ref's)"
		grep -E "spill|Used" "$L/ptxas-mmvq.log" | sort | uniq -c | head -20
		grep -E "spill|Used" "$L/ptxas-mmvq-ref.log" | sort | uniq -c | head -20
		echo "## mmvq at the engine's decode shapes"
		cat "$L/bench.txt" 2>/dev/null || grep -E "FAIL|panic" "$L/bench-engine.log"
		echo "## decode token (TestDecodeProfile)"
		grep -hE "^model|^\| mode|^ROW|differ|FAIL|panic" "$L"/time-*.log
		echo
		echo "total: $((SECONDS - t0)) s"
	} >>"$sum"
	cp "$L/bench.txt" "$OUT/" 2>/dev/null
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
