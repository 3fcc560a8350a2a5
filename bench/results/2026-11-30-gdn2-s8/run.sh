#!/usr/bin/env bash
# Helper gdn2's H200 call of session 8 (issue 11): the 80B's batched delta-net recurrence as
# gated_delta_split split8 + gnorm against gated_delta_net recsplit + gnorm and recurrent
# (Options.OldDeltaNet, "+gdnold"), alternated on one engine. Call 1 (commit 2890bc7) had
# split8 as the default and recsplit behind "+gdn512"; after it recsplit is the default and
# split8 is behind "+gdn8" (Options.DeltaSplit8), the default tiles below name the new
# tokens; parity groups gated_delta_net and gated_delta_split
# (three processes, in the background from the start). Copied from
# bench/results/2026-11-30-gdn-s8/run.sh.
#
#   run.sh build   build machine, repository root: strata-run.test and parity.test
#       (CGO_ENABLED=0, -tags strata_nodemo, stripped, xz) and every sm_90 code object, as
#       co.tar.xz, into $DEV (default /work/main/.dev-gdn2).
#   run.sh run     GPU machine, repository root of the device copy (carry .dev-gdn2), $OUT set.
#       STRATA_S8_BUDGET seconds in all (default 180). STRATA_S8_TILES: TestGPUBench's
#       STRATA_BENCH_PTILES (default best+gdn8,best,best+gdnold,best+gdn8,best); STRATA_S8_PREFILL its
#       prompt lengths (default 512,4096); STRATA_S8_ENGINE=0 leaves out the GPU-vs-CPU
#       engine test; STRATA_S8_PARITY=0 the parity group.
#   STRATA_S8_DRY=1 run.sh run   the same flow with stub binaries (no GPU).
#
# Trees on the device: co (every object, unassembled), eco (the engine's set: mmq cut to its
# r64t64/r64t128 mma tiles, moe_prefill to r64t32/r64t64, mmq8 whole; every PTX assembled
# by ptxas first so no driver JIT runs inside a timing).
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)

build() {
	set -e
	cd "$here/../../.."
	local d=${DEV:-/work/main/.dev-gdn2} target=sm_90 flags
	rm -rf "$d" && mkdir -p "$d/co"
	export CGO_ENABLED=0
	go test -c -trimpath -ldflags=-s -tags strata_nodemo -o "$d/strata-run.test" ./cmd/strata-run
	go test -c -trimpath -ldflags=-s -tags strata_nodemo -o "$d/parity.test" ./parity
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
	local d=$here w=/tmp/s8gdn2 t0=$SECONDS budget=${STRATA_S8_BUDGET:-180} dry=${STRATA_S8_DRY:-0}
	: "${OUT:?set OUT}"
	rm -rf "$w" && mkdir -p "$w/logs" "$w/models"
	local L=$w/logs st=$w/sr.test pt=$w/parity.test P rel m=q80-iq2_xs lm
	left() { echo $((budget - (SECONDS - t0) - $1)); }
	# lim WANT RESERVE: WANT seconds, cut to what is left after RESERVE (at least 5)
	lim() { local l; l=$(left "$2"); [ "$l" -lt "$1" ] && echo $((l > 5 ? l : 5)) || echo "$1"; }
	local sum="$OUT/summary.md"
	echo "# gdn2-s8 run.sh run ($(date -u +%FT%TZ)), budget ${budget}s, dry $dry, commit $(head -1 "$d/commit" 2>/dev/null)" >"$sum"
	say() { echo "- $* at $((SECONDS - t0)) s" | tee -a "$sum"; }
	P=$(command -v ptxas || echo /usr/local/cuda/bin/ptxas)
	if [ "$dry" = 1 ]; then
		printf '#!/bin/sh\necho "stub $0 $*"; env | grep -E "^STRATA_(CO_DIR|BENCH_[A-Z_]+|RUN_ARGS)=" | sort; sleep %s\ncase "$STRATA_RUN_ARGS" in *" -o "*) f=${STRATA_RUN_ARGS##* -o }; : >"$f";; esac\necho "--- PASS: TestGPUEngineNextMatchesCPU (1.00s)"\necho "ROW | stub |"\necho PASS\n' "${STRATA_S8_DRY_SLEEP:-1}" >"$st"
		chmod +x "$st"
		sed 's/TestGPUEngineNextMatchesCPU/TestParity/' "$st" >"$pt" && chmod +x "$pt"
		mkdir -p "$w/co/sm_90"
		for f in mmvq mmq mmq8 moe_prefill moe_decode rmsnorm_row gated_delta_net gated_delta_split; do echo "// stub" >"$w/co/sm_90/$f.ptx"; done
		printf '#!/bin/sh\nwhile [ $# -gt 1 ]; do case $1 in -o) shift; o=$1;; *) i=$1;; esac; shift; done\ncp "$i" "$o"; echo "ptxas stub: Used 128 registers, 0 bytes spill stores"\n' >"$w/ptxas" && chmod +x "$w/ptxas"
		P=$w/ptxas
		printf '#!/usr/bin/env python3\nimport shutil, sys\nshutil.copyfile(sys.argv[1], sys.argv[2])\n' >"$w/strip_ptx.py"
	else
		python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' "$d/co.tar.xz" "$w"
		python3 -c 'import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2], "wb"))' "$d/strata-run.test.xz" "$st" && chmod +x "$st"
		python3 -c 'import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2], "wb"))' "$d/parity.test.xz" "$pt" && chmod +x "$pt"
		cp "$d/strip_ptx.py" "$w/"
		{ nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv; "$P" --version; } >"$L/machine.log" 2>&1
	fi
	cat "$d/commit" >"$L/commit" 2>/dev/null
	export STRATA_REQUIRE_GPU=1
	# the 80B synthetic model in the background, from the unassembled tree
	(
		STRATA_CO_DIR=$w/co STRATA_RUN_ARGS="synth --arch qwen3next --preset qwen3-next-80b-a3b --type iq2_xs -o $w/models/$m.gguf" timeout 100 "$st" -test.run '^TestCLI$' -test.v >"$L/synth-$m.log" 2>&1
		echo $? >"$w/models/$m.done"
	) &
	local syn=$!
	(cd "$w/co" && find . -type f) | while read -r rel; do
		mkdir -p "$w/eco/$(dirname "$rel")"
		case $rel in
		*/mmq.ptx) python3 "$w/strip_ptx.py" "$w/co/$rel" "$w/eco/$rel" '_mma_r64t(64|128)$' >/dev/null ;;
		*/moe_prefill.ptx) python3 "$w/strip_ptx.py" "$w/co/$rel" "$w/eco/$rel" '_mma_r64t(32|64)$' >/dev/null ;;
		*) cp "$w/co/$rel" "$w/eco/$rel" ;;
		esac
	done
	find "$w/eco" -name '*.ptx' | xargs -P 16 -I{} sh -c '"$1" -v -arch=sm_90 "$2" -o "$2.cubin" >"$2.log" 2>&1 && mv "$2.cubin" "$2" || echo "ptxas failed: $2"' _ "$P" {} >"$L/ptxas.log" 2>&1
	for f in gated_delta_net gated_delta_split; do cp "$w/eco/sm_90/$f.ptx.log" "$L/ptxas-$f.log" 2>/dev/null; done
	say "ptxas: $(grep -c failed "$L/ptxas.log") failed"
	# parity groups in three processes (split8; recsplit/gnorm/gnormsig; the old variants), in
	# the background
	local par1= par2= par3=
	if [ "${STRATA_S8_PARITY:-1}" = 1 ]; then
		lm=$(lim 150 10)
		(GOMAXPROCS=5 STRATA_CO_DIR=$w/eco timeout "$lm" "$pt" -test.run 'TestParity/[^/]+/gated_delta_split/split8/' -test.v -test.timeout "$((lm - 3))s" >"$L/parity-split8.log" 2>&1; say "parity split8 exit $?") &
		par1=$!
		(GOMAXPROCS=5 STRATA_CO_DIR=$w/eco timeout "$lm" "$pt" -test.run 'TestParity/[^/]+/gated_delta_net/(recsplit|gnorm|gnormsig)/' -test.v -test.timeout "$((lm - 3))s" >"$L/parity-new.log" 2>&1; say "parity recsplit/gnorm exit $?") &
		par2=$!
		(GOMAXPROCS=4 STRATA_CO_DIR=$w/eco timeout "$lm" "$pt" -test.run 'TestParity/[^/]+/gated_delta_net/(conv|recurrent|recurrentsig|chunk|scan)/' -test.v -test.timeout "$((lm - 3))s" >"$L/parity-old.log" 2>&1; say "parity old exit $?") &
		par3=$!
	fi
	if [ "${STRATA_S8_ENGINE:-1}" = 1 ]; then
		lm=$(lim 60 75)
		STRATA_CO_DIR=$w/eco timeout "$lm" "$st" -test.run '^TestGPUEngineNextMatchesCPU$' -test.v -test.timeout "$((lm - 3))s" >"$L/engine-tests.log" 2>&1
		say "engine tests exit $?"
	fi
	while [ ! -e "$w/models/$m.done" ] && [ "$(left 10)" -gt 0 ]; do sleep 1; done
	if [ -s "$w/models/$m.gguf" ] || [ "$dry" = 1 ]; then
		say "model ready"
		lm=$(lim 90 3)
		STRATA_CO_DIR=$w/eco STRATA_GPU_BENCH=1 STRATA_BENCH_MODEL=$w/models/$m.gguf STRATA_BENCH_OUT=$L STRATA_BENCH_LABEL=$m \
			STRATA_BENCH_POLICIES=decayed STRATA_BENCH_BUDGETS_MIB=0 STRATA_BENCH_CTX=4096 STRATA_BENCH_TOKENS=1 STRATA_BENCH_CHUNK=512 \
			STRATA_BENCH_PREFILL=${STRATA_S8_PREFILL:-512,4096} STRATA_BENCH_PTILES=${STRATA_S8_TILES:-best+gdn8,best,best+gdnold,best+gdn8,best} STRATA_BENCH_PKTIMES=512 \
			timeout "$lm" "$st" -test.run '^TestGPUBench$' -test.v -test.timeout "$((lm - 2))s" >"$L/gpubench-$m.log" 2>&1
		say "gpubench-$m exit $?"
	else
		say "$m: no model"
	fi
	kill "$syn" 2>/dev/null
	rm -f "$w"/models/*.gguf
	for p in $par1 $par2 $par3; do
		while kill -0 "$p" 2>/dev/null && [ "$(left 4)" -gt 0 ]; do sleep 1; done
	done
	{
		echo
		echo "## engine tests"
		grep -E "^\s*--- (PASS|FAIL): TestGPU[A-Za-z]*|^(ok|FAIL|PASS)$|panic" "$L/engine-tests.log" | head -20
		echo "## parity gated_delta_net, gated_delta_split"
		grep -hE "^\s*--- FAIL|^(ok|FAIL|PASS)$|panic" "$L"/parity-*.log 2>/dev/null | head -20
		grep -hE "gated_delta_(net|split)/" "$L"/parity-*.log 2>/dev/null | grep -vE "^\s*(---|===)" | head -100
		echo "## ptxas -v (gated_delta_net, gated_delta_split)"
		for f in "$L"/ptxas-*.log; do echo "--- $(basename "$f")"; grep -E "Compiling entry|spill|Used" "$f" | sed -E 's/^ptxas info *: //' | head -30; done
		echo "## prefill (TestGPUBench)"
		grep -hE "^ROW|FAIL|panic|tiles=[a-z0-9+]+: " "$L"/gpubench-*.log 2>/dev/null | head -40
		grep -hA30 "device time per token by kernel" "$L"/gpubench-*.log 2>/dev/null | grep -E "^\||prefill" | head -60
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
