#!/usr/bin/env bash
# attention_prefill's head-size tensor-core kernels (f16mma128, f16mma128s, f16mma256) against
# the one for every head size (f16mma) on the H200: one call. Copied from
# bench/results/2026-11-30-attnmma-s8/run.sh.
#
#   run.sh build   build machine, repository root: parity.test and strata-run.test
#       (CGO_ENABLED=0, -tags strata_nodemo, stripped, xz) and every sm_90 code object, as
#       co.tar.xz, into $DEV (default /work/main/.dev-attn2).
#   run.sh run     GPU machine, repository root of the device copy (carry .dev-attn2), $OUT set.
#       STRATA_AP_BUDGET seconds in all (default 140).
#   STRATA_AP_DRY=1 run.sh run   the same flow with stub binaries (no GPU).
#
# Steps: ptxas-assemble the engine's tree (eco; co stays unassembled for parity; plus
# attention_prefill's PTX with f16mma128's .minnctapersm 3 -> 4 and 2, ptxas -v only); in
# parallel: the synthetic 30B-A3B Q2_0 and 80B-A3B IQ2_XS models (background), parity of the
# new variants in 3 processes, the GPU-vs-CPU engine tests, TestBenchModelOps prefill (every
# variant at the 80B and 30B shapes); then TestGPUBench prefill 512/4096 on both synthetic
# models with the head-size kernel (best) and f16mma (+attngen), alternating, and the
# per-kernel device times at 512.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)

build() {
	set -e
	cd "$here/../../.."
	local d=${DEV:-/work/main/.dev-attn2} target=sm_90 flags
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
	local d=$here w=/tmp/attn2 t0=$SECONDS budget=${STRATA_AP_BUDGET:-140} dry=${STRATA_AP_DRY:-0}
	: "${OUT:?set OUT}"
	rm -rf "$w" && mkdir -p "$w/logs" "$w/models"
	local L=$w/logs pt=$w/parity.test st=$w/sr.test P
	left() { echo $((budget - (SECONDS - t0) - $1)); }
	lim() { local l; l=$(left "$2"); [ "$l" -lt "$1" ] && echo $((l > 5 ? l : 5)) || echo "$1"; }
	local sum="$OUT/summary.md"
	echo "# attn2-s8 run.sh run ($(date -u +%FT%TZ)), budget ${budget}s, dry $dry, commit $(head -1 "$d/commit" 2>/dev/null)" >"$sum"
	say() { echo "- $* at $((SECONDS - t0)) s" | tee -a "$sum"; }
	P=$(command -v ptxas || echo /usr/local/cuda/bin/ptxas)
	if [ "$dry" = 1 ]; then
		printf '#!/bin/sh\necho "stub $0 $*"; env | grep -E "^STRATA_(CO_DIR|BENCH_[A-Z_]+|RUN_ARGS)=" | sort; sleep %s\ncase "$STRATA_RUN_ARGS" in *" -o "*) f=${STRATA_RUN_ARGS##* -o }; : >"$f";; esac\necho "--- PASS: TestParity/sm_90/x/y/z"\necho "ROW | stub |"\necho PASS\n' "${STRATA_AP_DRY_SLEEP:-1}" >"$pt"
		cp "$pt" "$st" && chmod +x "$pt" "$st"
		mkdir -p "$w/co/sm_90"
		for f in attention_prefill mmq moe_prefill; do echo "// stub" >"$w/co/sm_90/$f.ptx"; done
		printf '#!/bin/sh\nwhile [ $# -gt 1 ]; do case $1 in -o) shift; o=$1;; *) i=$1;; esac; shift; done\ncp "$i" "$o"; echo "ptxas stub: Used 128 registers, 0 bytes spill stores"\n' >"$w/ptxas" && chmod +x "$w/ptxas"
		P=$w/ptxas
		printf '#!/usr/bin/env python3\nimport shutil, sys\nshutil.copyfile(sys.argv[1], sys.argv[2])\n' >"$w/strip_ptx.py"
	else
		python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' "$d/co.tar.xz" "$w"
		for b in parity:parity strata-run:sr; do
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
		*/moe_prefill.ptx) python3 "$w/strip_ptx.py" "$w/co/$rel" "$w/eco/$rel" '_mma_r64t(32|64)$' >/dev/null ;;
		*) cp "$w/co/$rel" "$w/eco/$rel" ;;
		esac
	done
	local syn=() spec
	for spec in "q30-q2_0|qwen3moe --preset qwen3-30b-a3b --type q2_0" "q80-iq2_xs|qwen3next --preset qwen3-next-80b-a3b --type iq2_xs"; do
		(
			STRATA_CO_DIR=$w/co STRATA_RUN_ARGS="synth --arch ${spec#*|} -o $w/models/${spec%%|*}.gguf" timeout 100 "$st" -test.run '^TestCLI$' -test.v >"$L/synth-${spec%%|*}.log" 2>&1
			echo $? >"$w/models/${spec%%|*}.done"
		) &
		syn+=($!)
	done
	# f16mma128's register use at 4 and 2 blocks an SM (ptxas -v only, not timed)
	for b in 4 2; do
		sed "/@strata_attention_prefill_f16mma128\$/s/minnctapersm 3/minnctapersm $b/" "$w/co/sm_90/attention_prefill.ptx" >"$w/ap-minb$b.ptx"
		"$P" -v -arch=sm_90 "$w/ap-minb$b.ptx" -o "$w/ap-minb$b.cubin" >"$L/ptxas-ap-minb$b.log" 2>&1 &
	done
	find "$w/eco" -name '*.ptx' | xargs -P 16 -I{} sh -c '"$1" -v -arch=sm_90 "$2" -o "$2.cubin" >"$2.log" 2>&1 && mv "$2.cubin" "$2" || echo "ptxas failed: $2"' _ "$P" {} >"$L/ptxas.log" 2>&1
	cp "$w/eco/sm_90/attention_prefill.ptx.log" "$L/ptxas-attention_prefill.log" 2>/dev/null
	say "ptxas: $(grep -c failed "$L/ptxas.log") failed"
	local pids=() g p1 i=0
	p1=$(lim 90 50)
	for g in "attention_prefill/f16mma256/t=2048" "attention_prefill/(f16mma128|f16mma128s)/t=512," "attention_prefill/(f16mma128|f16mma128s|f16mma256)/t=(1|100|37|65),"; do
		echo "$g" >"$L/parity-$i.group"
		STRATA_CO_DIR=$w/co timeout "$p1" "$pt" -test.v -test.timeout "$((p1 - 3))s" -test.run "TestParity/sm_90/$g" >"$L/parity-$i.log" 2>&1 &
		pids+=($!)
		i=$((i + 1))
	done
	STRATA_CO_DIR=$w/eco STRATA_BENCH=1 STRATA_BENCH_OPS=prefill STRATA_BENCH_OUT=$L timeout "$p1" "$pt" -test.run '^TestBenchModelOps$' -test.v \
		-test.timeout "$((p1 - 3))s" >"$L/bench-ops.log" 2>&1 &
	pids+=($!)
	STRATA_CO_DIR=$w/eco timeout "$p1" "$st" -test.run '^(TestGPUEngineMatchesCPU|TestGPUEngineNextMatchesCPU)$' -test.v -test.timeout "$((p1 - 3))s" >"$L/engine-tests.log" 2>&1
	say "engine tests exit $?"
	wait "${pids[@]}"
	say "parity and bench ops done"
	local m lm
	for m in q30-q2_0 q80-iq2_xs; do
		while [ ! -e "$w/models/$m.done" ] && [ "$(left 10)" -gt 0 ]; do sleep 1; done
		if [ -s "$w/models/$m.gguf" ] || [ "$dry" = 1 ]; then
			lm=$(lim 40 4)
			STRATA_CO_DIR=$w/eco STRATA_GPU_BENCH=1 STRATA_BENCH_MODEL=$w/models/$m.gguf STRATA_BENCH_OUT=$L STRATA_BENCH_LABEL=$m \
				STRATA_BENCH_POLICIES=decayed STRATA_BENCH_BUDGETS_MIB=0 STRATA_BENCH_CTX=4096 STRATA_BENCH_TOKENS=1 STRATA_BENCH_CHUNK=512 \
				STRATA_BENCH_PREFILL=512,4096 STRATA_BENCH_PTILES=best,best+attngen,best,best+attngen STRATA_BENCH_PKTIMES=512 \
				timeout "$lm" "$st" -test.run '^TestGPUBench$' -test.v -test.timeout "$((lm - 2))s" >"$L/gpubench-$m.log" 2>&1
			say "gpubench-$m exit $?"
		else
			say "$m: no model"
		fi
	done
	kill "${syn[@]}" 2>/dev/null
	rm -f "$w"/models/*.gguf
	{
		echo
		echo "## parity"
		for f in "$L"/parity-*.log; do echo "- $(cat "${f%.log}.group"): passed $(grep -cE '^\s*--- PASS: TestParity/.*/.*/.*/' "$f"), failed $(grep -cE '^\s*--- FAIL: TestParity/.*/.*/.*/' "$f") $(grep -E '^(ok|PASS|FAIL)$' "$f" | tr '\n' ' ')"; done
		grep -hE "^\s*--- FAIL|panic|timed out" "$L"/parity-*.log | head -20
		grep -hE "TestParity/sm_90/attention_prefill/.*out:" "$L"/parity-*.log | head -20
		echo "## engine tests"
		grep -E "^\s*--- (PASS|FAIL): TestGPU[A-Za-z]*( |$)|^(ok|FAIL|PASS)$|panic" "$L/engine-tests.log" | head
		echo "## ptxas -v attention_prefill"
		grep -A2 -E "Compiling.*f16mma" "$L/ptxas-attention_prefill.log" | grep -E "Compiling|spill|Used" | sed -E 's/^ptxas info *: //' | head -30
		for b in 4 2; do echo "f16mma128 at .minnctapersm $b:"; grep -A2 -E "Compiling.*f16mma128'" "$L/ptxas-ap-minb$b.log" | grep -E "spill|Used" | sed -E 's/^ptxas info *: //'; done
		echo "## TestBenchModelOps prefill"
		grep -E "^prefill|^f16|^q8|FAIL|panic" "$L/bench-ops.log" | head -40
		echo "## prefill (TestGPUBench)"
		grep -hE "^ROW|FAIL|panic" "$L"/gpubench-*.log 2>/dev/null | head -20
		grep -hA40 "device time per token by kernel" "$L"/gpubench-*.log 2>/dev/null | grep -E "^\||prefill" | grep -E "prefill|attention|---|kernel" | head -40
		echo
		echo "total: $((SECONDS - t0)) s"
	} >>"$sum"
	cp "$L"/modelops.txt "$OUT/" 2>/dev/null
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
