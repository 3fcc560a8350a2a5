#!/usr/bin/env bash
# Issue 11, session 7, helper pfeng: the batched prompt path's per-launch token tiles
# (model/gpu/tiles.go: mmq r64t64 / r64t128 / mmq8 r64t128w8, moe_prefill r64t32 / r64t64)
# against the engine's old r64t64 everywhere, on one engine per model (Engine.SetPrefillTiles
# between prompts), plus the GPU-vs-CPU engine tests (whose chunk-16 runs take the batched
# path in the default mode, TilesBest). Trimmed from ../2026-11-30-final-s6/final.sh and
# ../2026-11-30-engine-budgets/run.sh.
#
#   run.sh build    build machine (Go + clang-19), repository root of the tree to measure:
#       strata-run.test (CGO_ENABLED=0, -tags strata_nodemo, stripped, xz) and the sm_90 PTX
#       of every family the engine loads, mmq cut to its r64t64 and r64t128 mma kernels and
#       moe_prefill to r64t32 and r64t64 (../2026-11-29-prefill-async/strip_ptx.py), as
#       co.tar.xz, into $DEV (default /work/main/.dev-pfeng; carry that directory).
#   run.sh run      GPU machine, repository root of the device copy, $OUT set:
#       1. ptxas assembles every PTX file (the driver's JIT takes > 15 s a tree) while
#          `strata-run synth` writes 30B-A3B Q2_0 and then 80B-A3B IQ2_XS in the background;
#       2. TestGPUEngineMatchesCPU and TestGPUEngineNextMatchesCPU;
#       3. per model, resident (budget unlimited), ctx 4096, chunk 512: TestGPUBench with
#          prompts of 64 (warm-up), 512 and 4096 tokens, each in tiles t64, best, t64, best
#          (STRATA_BENCH_PTILES), then one 512-token prompt per mode with the device time per
#          kernel (STRATA_BENCH_PKTIMES);
#       4. $OUT/summary.md: step times, test results, the table (tok/s per mode, both runs,
#          and best against t64), the kernel tables; $OUT/logs.tgz: every log.
#       Everything inside STRATA_RUN_BUDGET seconds (default 115).
#   STRATA_RUN_DRY=1 run.sh run   the same flow with stub binaries (no GPU, no models).
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)

build() {
	set -e
	cd "$here/../../.."
	local d=${DEV:-/work/main/.dev-pfeng} target=sm_90 flags keep
	rm -rf "$d" && mkdir -p "$d/co"
	export CGO_ENABLED=0
	go test -c -trimpath -ldflags=-s -tags strata_nodemo -o "$d/strata-run.test" ./cmd/strata-run
	xz -9e -T2 "$d/strata-run.test"
	flags=$(awk -F'\t' -v t="$target" '$1 == "target" && $2 == t { print $6 }' kernels/out/objects.txt)
	for fam in rmsnorm rmsnorm_row mmvq rope attention_decode quantize_q8_1 moe_decode sample gated_delta_net fill mmq mmq8 moe_prefill attention_prefill; do
		awk -F'\t' -v t="$target" -v f="$fam" '$1 == "object" && $2 == t && $3 == f { print $4 "\t" $5 }' kernels/out/objects.txt |
			while IFS=$'\t' read -r src obj; do
				mkdir -p "$d/co/$(dirname "$obj")"
				# shellcheck disable=SC2086 # flags are a list
				clang-19 $flags -I "$(dirname "$src")" -I kernels/out/include "$src" -o "$d/co/$obj"
				keep=
				case $fam in
				mmq) keep='_mma_r64t(64|128)$' ;;
				moe_prefill) keep='_mma_r64t(32|64)$' ;;
				esac
				if [ -n "$keep" ]; then
					python3 "$here/../2026-11-29-prefill-async/strip_ptx.py" "$d/co/$obj" "$d/co/$obj.s" "$keep"
					mv "$d/co/$obj.s" "$d/co/$obj"
				fi
			done
	done
	tar -C "$d" -cf - co | xz -9e -T2 >"$d/co.tar.xz" && rm -r "$d/co"
	cp "$here/run.sh" "$d/"
	git rev-parse HEAD >"$d/commit"
	git status --porcelain >>"$d/commit"
	ls -la "$d"
	du -sh "$d"
}

# stub writes the dry run's stand-in for strata-run.test: it prints its arguments and
# environment, sleeps, creates synth's output file, and prints TestGPUBench's ROW lines for
# each prompt and tile mode it was given (tok/s made up: best 5 % above t64).
stub() {
	cat >"$1" <<'EOF'
#!/bin/sh
echo "stub $0 $*"; env | grep -E "^STRATA_(CO_DIR|BENCH_[A-Z]+|RUN_ARGS)=" | sort
sleep "${STRATA_RUN_DRY_SLEEP:-1}"
case "$STRATA_RUN_ARGS" in *" -o "*) f=${STRATA_RUN_ARGS##* -o }; : >"$f";; esac
if [ -n "${STRATA_BENCH_PREFILL:-}" ]; then
	for n in $(echo "$STRATA_BENCH_PREFILL" | tr , ' '); do
		for m in $(echo "${STRATA_BENCH_PTILES:-best}" | tr , ' '); do
			v=$((4000000 / (n + 500))); [ "$m" = best ] && v=$((v * 105 / 100))
			echo "ROW | unlimited | decayed | prefill $n batched (moe_prefill 48, fallback 0) tiles=$m | 6144 | 6144 | 1.000 | 0.0 | 0.0 | 8 | 20.00 | 0.10 | 0.30 | $v.0 | 0.438 | 1.600 | 5.0 |"
		done
	done
	printf '\nstub, budget unlimited, prefill 512 tiles=t64: device time per token by kernel (events around each launch), 0.250 ms in all\n\n| kernel | launches/token | µs/token | µs/launch | share |\n|---|---:|---:|---:|---:|\n| moe_prefill/q20_mma_r64t64 | 0.4 | 60.0 | 150.00 | 24.0%% |\n'
fi
echo "--- PASS: TestStub (0.00s)"
echo PASS
EOF
	chmod +x "$1"
}

run() {
	local d=$here w=/tmp/pfeng t0=$SECONDS budget=${STRATA_RUN_BUDGET:-115} dry=${STRATA_RUN_DRY:-0}
	: "${OUT:?set OUT}"
	rm -rf "$w" && mkdir -p "$w/logs" "$w/models"
	local out=$w/logs t=$w/sr.test ptx=""
	left() { echo $((budget - (SECONDS - t0) - $1)); }
	# lim WANT RESERVE: WANT seconds, cut to what is left after RESERVE (at least 5)
	lim() { local l; l=$(left "$2"); [ "$l" -lt "$1" ] && echo $((l > 5 ? l : 5)) || echo "$1"; }
	if [ "$dry" = 1 ]; then
		stub "$t"
		mkdir -p "$w/co/sm_90"
	else
		python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' "$d/co.tar.xz" "$w"
		python3 -c 'import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2], "wb"))' "$d/strata-run.test.xz" "$t" && chmod +x "$t"
		{ nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm --format=csv; nproc; df -h /tmp; free -g; } >"$out/machine.log" 2>&1
		# every PTX file to a cubin under the same name (cuModuleLoadData takes either), in
		# parallel, while the first model is written; a file ptxas fails on stays PTX
		local P
		P=$(command -v ptxas || ls /usr/local/cuda*/bin/ptxas 2>/dev/null | head -1)
		(
			for f in "$w"/co/sm_90/*.ptx; do
				(timeout 60 "$P" -arch=sm_90 "$f" -o "$f.cubin" >"$f.ptxas.log" 2>&1 && mv "$f.cubin" "$f") &
			done
			wait
		) &
		ptx=$!
	fi
	export STRATA_CO_DIR=$w/co STRATA_REQUIRE_GPU=1
	cat "$d/commit" >"$out/commit" 2>/dev/null
	local sum="$OUT/summary.md"
	echo "# run.sh run ($(date -u +%FT%TZ)), budget ${budget}s, dry $dry, commit $(head -1 "$d/commit" 2>/dev/null)" >"$sum"
	echo >>"$sum"
	step() { # step NAME SECONDS-LIMIT CMD...: run, record exit status and time
		local name=$1 secs=$2 s=$SECONDS rc
		shift 2
		timeout "$secs" "$@" >"$out/$name.log" 2>&1
		rc=$?
		echo "- $name: exit $rc in $((SECONDS - s)) s (limit $secs s, $((SECONDS - t0)) s so far)" | tee -a "$sum"
		return $rc
	}
	# the models, in order; NAME.ready (or NAME.failed) when done
	(
		for spec in "q30-q2_0|qwen3moe --preset qwen3-30b-a3b --type q2_0" "q80-iq2_xs|qwen3next --preset qwen3-next-80b-a3b --type iq2_xs"; do
			name=${spec%%|*}
			s=$SECONDS
			STRATA_RUN_ARGS="synth --arch ${spec#*|} -o $w/models/$name.gguf" timeout 90 "$t" -test.run '^TestCLI$' -test.v -test.timeout 300s >"$out/synth-$name.log" 2>&1 &
			echo $! >"$w/synth.pid"
			if wait $!; then
				echo "$((SECONDS - s))" >"$w/models/$name.ready"
			else
				echo "$((SECONDS - s))" >"$w/models/$name.failed"
			fi
		done
	) &
	local synth=$!
	waitfor() { # waitfor NAME RESERVE: the model is ready (0), or failed / out of time (1)
		while [ ! -e "$w/models/$1.ready" ] && [ ! -e "$w/models/$1.failed" ] && [ "$(left "$2")" -gt 5 ]; do sleep 1; done
		echo "  (waited for $1 until $((SECONDS - t0)) s: $(ls "$w/models" | grep "^$1\." | grep -v gguf | tr '\n' ' '))" | tee -a "$sum"
		[ -e "$w/models/$1.ready" ]
	}
	if [ -n "$ptx" ]; then
		wait "$ptx"
		echo "- ptxas: $(ls "$w"/co/sm_90/*.ptx | wc -l) files, $(grep -lE "error|fatal" "$w"/co/sm_90/*.ptxas.log 2>/dev/null | wc -l) failed, done at $((SECONDS - t0)) s" | tee -a "$sum"
		cp "$w"/co/sm_90/*.ptxas.log "$out/" 2>/dev/null
	fi
	echo "- setup: $((SECONDS - t0)) s" | tee -a "$sum"
	step engine-tests "$(lim 30 70)" "$t" -test.run '^(TestGPUEngineMatchesCPU|TestGPUEngineNextMatchesCPU)$' -test.v -test.timeout 120s
	bench() { # bench NAME MODEL SECONDS RESERVE: TestGPUBench, tiles old against new
		step "bench-$1" "$(lim "$3" "$4")" env STRATA_GPU_BENCH=1 STRATA_BENCH_MODEL="$2" STRATA_BENCH_OUT="$out" STRATA_BENCH_LABEL="$1" \
			STRATA_BENCH_POLICIES=decayed STRATA_BENCH_BUDGETS_MIB=0 STRATA_BENCH_CTX=4096 STRATA_BENCH_TOKENS=1 STRATA_BENCH_CHUNK=512 \
			STRATA_BENCH_PREFILL=64,512,4096 STRATA_BENCH_PTILES=t64,best,t64,best STRATA_BENCH_PKTIMES=512 \
			"$t" -test.run '^TestGPUBench$' -test.v -test.timeout 300s
		grep -E "ceilings:|prefill 512 tiles=[a-z0-9]+: [a-z0-9_]+: |load failed|FAIL|panic" "$out/bench-$1.log" | head -10 | sed 's/^/    /' >>"$sum"
	}
	# reserves: the 80B needs ~55 s (load ~12 s, four 4096-token prompts)
	if waitfor q30-q2_0 60; then
		bench q30-q2_0 "$w/models/q30-q2_0.gguf" 40 55
	fi
	rm -f "$w/models/q30-q2_0.gguf"
	if waitfor q80-iq2_xs 5; then
		bench q80-iq2_xs "$w/models/q80-iq2_xs.gguf" 60 2
	fi
	# a synthesis still running (its wait ran out of time): stop it and its subshell, by id
	kill "$synth" 2>/dev/null
	[ -e "$w/synth.pid" ] && kill "$(cat "$w/synth.pid")" 2>/dev/null
	rm -f "$w"/models/*.gguf
	{
		grep -h "^wrote" "$out"/synth-*.log | sed 's/^/    /'
		echo
		echo "## engine tests"
		grep -E "^\s*--- (PASS|FAIL): TestGPU|^(ok|FAIL|PASS)$|panic" "$out/engine-tests.log" | head -30
		echo
		echo "## prefill, tiles t64 (r64t64 everywhere) against best (tiles.go), resident, chunk 512"
		echo
		python3 - "$out" <<'PY'
import re, sys, glob, os
rows = {}
for f in sorted(glob.glob(os.path.join(sys.argv[1], "bench-*.log"))):
    model = os.path.basename(f)[6:-4]
    for line in open(f):
        m = re.match(r"ROW \|(.*)\|\s*$", line)
        if not m:
            continue
        c = [x.strip() for x in m.group(1).split("|")]
        p = re.match(r"prefill (\d+) batched .*tiles=(\w+)", c[2]) if len(c) > 12 else None
        if p:
            rows.setdefault((model, int(p.group(1))), {}).setdefault(p.group(2), []).append(float(c[12]))
print("| model | prompt | t64 tok/s (runs) | best tok/s (runs) | best / t64 |")
print("|---|---:|---|---|---:|")
for (model, n), v in sorted(rows.items()):
    a, b = v.get("t64", []), v.get("best", [])
    ma, mb = (sum(a) / len(a) if a else 0), (sum(b) / len(b) if b else 0)
    r = f"{100 * (mb / ma - 1):+.1f} %" if ma and mb else "—"
    note = " (warm-up)" if n < 512 else ""
    print(f"| {model} | {n}{note} | {ma:.1f} ({', '.join(f'{x:.1f}' for x in a)}) | {mb:.1f} ({', '.join(f'{x:.1f}' for x in b)}) | {r} |")
PY
		echo
		echo "## device time per kernel, one 512-token prompt per mode"
		python3 - "$out" <<'PY'
import sys, glob, os
# each table: its title line, then its rows (the 14 largest shares)
for f in sorted(glob.glob(os.path.join(sys.argv[1], "bench-*.log"))):
    lines, i = open(f).read().split("\n"), 0
    while i < len(lines):
        if "device time per token by kernel" in lines[i] and " prefill " in lines[i]:
            print("\n" + lines[i].strip() + "\n")
            i += 1
            while i < len(lines) and not lines[i].startswith("|"):
                i += 1
            n = 0
            while i < len(lines) and lines[i].startswith("|"):
                if n < 16:
                    print(lines[i])
                n += 1
                i += 1
        else:
            i += 1
PY
		grep -hE "^\s*--- FAIL|panic|test timed out" "$out"/*.log 2>/dev/null | head
		echo
		echo "total: $((SECONDS - t0)) s"
	} >>"$sum"
	cp "$out"/bench-rows.tsv "$out"/gpu-engine-*.md "$OUT/" 2>/dev/null
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
