#!/usr/bin/env bash
# GPU engine, second session (issue 11): build here, run on the H200.
#
#   run.sh build         build machine (Go + clang-19), from this worktree: the cmd/strata-run
#       test binary (stripped, gzipped; with STRATA_RUN_ARGS its TestCLI is the strata-run
#       command line), the parity test binary and the sm_90 code objects of the families the
#       engine launches, into $DEV (default /work/main/.dev-engine)
#   run.sh call1         GPU machine (repository root of the device copy, carry .dev-engine):
#       tiny GPU-vs-CPU tests, 30B-A3B Q2_0 decode before/after, 80B-A3B synth time and disk,
#       a first 80B bench, strata-run --stats with its progress output
#   run.sh matrix        GPU machine: the benchmark matrix of issue 11 item 4
#   (the batched prompt path: set STRATA_BENCH_CHUNK=512 and STRATA_BENCH_PATHS=batched,token
#   in a bench line; ../2026-11-29-gpu-prefill/final.sh is its one-call form)
# Logs go to /tmp/ge-out, and one archive of them plus the tables to $OUT.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)

build() {
	set -e
	cd "$here/../../.."
	local d=${DEV:-/work/main/.dev-engine} target=sm_90
	rm -rf "$d" && mkdir -p "$d/co"
	export CGO_ENABLED=0
	go test -c -trimpath -ldflags=-s -o "$d/strata-run.test" ./cmd/strata-run
	xz -9e -T2 "$d/strata-run.test" # xz: the tree and the carry must fit 64 MiB together
	go test -c -trimpath -ldflags=-s -o "$d/parity.test" ./parity
	xz -9e -T2 "$d/parity.test"
	local flags
	flags=$(awk -F'\t' -v t="$target" '$1 == "target" && $2 == t { print $6 }' kernels/out/objects.txt)
	for fam in rmsnorm rmsnorm_row mmvq rope attention_decode quantize_q8_1 moe_decode gated_delta_net mmq moe_prefill attention_prefill; do
		awk -F'\t' -v t="$target" -v f="$fam" '$1 == "object" && $2 == t && $3 == f { print $4 "\t" $5 }' kernels/out/objects.txt |
			while IFS=$'\t' read -r src obj; do
				mkdir -p "$d/co/$(dirname "$obj")"
				# shellcheck disable=SC2086 # flags are a list
				clang-19 $flags -I "$(dirname "$src")" -I kernels/out/include "$src" -o "$d/co/$obj"
				case $fam in # the r64t64 mma variants the batched path launches (JIT time: ../2026-11-29-gpu-prefill)
				mmq | moe_prefill)
					python3 "$here/../2026-11-29-gpu-prefill/strip_ptx.py" "$d/co/$obj" "$d/co/$obj.s" '_mma_r64t64$'
					mv "$d/co/$obj.s" "$d/co/$obj"
					;;
				esac
			done
	done
	tar -C "$d" -czf "$d/co.tar.gz" co && rm -r "$d/co"
	cp "$here/run.sh" "$here/plot.py" "$d/" 2>/dev/null || cp "$here/run.sh" "$d/"
	git rev-parse HEAD >"$d/commit"
	ls -la "$d"
}

setup() {
	d=.dev-engine
	out=/tmp/ge-out
	mkdir -p "$out" /tmp/ge
	tar -C /tmp/ge -xzf "$d/co.tar.gz"
	export STRATA_CO_DIR=/tmp/ge/co
	t=/tmp/ge/sr.test
	unxz() { python3 -c 'import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2], "wb"))' "$1" "$2"; }
	unxz "$d/strata-run.test.xz" "$t" && chmod +x "$t"
	nvidia-smi --query-gpu=name,pci.bus_id,driver_version,memory.total,clocks.sm,clocks.max.sm --format=csv >"$out/nvidia-smi.log" 2>&1
	cat "$d/commit" >"$out/commit"
	df -h /tmp >"$out/df.log" 2>&1
	free -g >>"$out/df.log" 2>&1
}

# cli LIMIT LOG ARGS...: strata-run ARGS through the test binary, under a time limit
cli() {
	local secs=$1 log=$2
	shift 2
	local s=$SECONDS
	STRATA_RUN_ARGS="$*" timeout "$secs" "$t" -test.run '^TestCLI$' -test.v -test.timeout "${secs}s" >"$log" 2>&1
	echo "   $* -> exit $? in $((SECONDS - s)) s"
}

# bench BIN LIMIT NAME MODEL [VAR=VALUE...]: TestGPUBench under a time limit
bench() {
	local bin=$1 secs=$2 name=$3 m=$4
	shift 4
	local s=$SECONDS
	env STRATA_GPU_BENCH=1 STRATA_BENCH_MODEL="$m" STRATA_BENCH_OUT="$out" "$@" timeout "$secs" "$bin" -test.run '^TestGPUBench$' -test.v -test.timeout "${secs}s" >"$out/$name.log" 2>&1
	echo "== $name: exit $? in $((SECONDS - s)) s"
	grep -E "^\||ceilings|FAIL|panic|load failed" "$out/$name.log" | head -40
}

finish() {
	tar -C "$out" -czf "$OUT/logs.tar.gz" .
	cp "$out"/*.md "$out"/*.tsv "$out"/*.png "$OUT/" 2>/dev/null
	true
}

call1() {
	setup
	echo "== tiny GPU vs CPU"
	STRATA_REQUIRE_GPU=1 timeout 90 "$t" -test.run 'TestGPUEngineMatchesCPU|TestGPUEngineNextMatchesCPU|TestBackendFlags' -test.v -test.timeout 85s >"$out/tiny.log" 2>&1
	echo "   exit $?"
	grep -E "^(---|ok|FAIL|PASS)|NMSE|near tie" "$out/tiny.log" | head -30
	local m=/tmp/q30-q2_0.gguf
	echo "== synth 30B-A3B Q2_0"
	cli 100 "$out/synth-30b-q2_0.log" synth --arch qwen3moe --preset qwen3-30b-a3b --type q2_0 -o $m
	bench "$t" 60 before-30b-q2_0 $m STRATA_BENCH_LABEL=before- STRATA_BENCH_HOSTKV=1 STRATA_BENCH_NORESIDENT=1 STRATA_BENCH_NOFUSE=1 STRATA_BENCH_TOKENS=32 STRATA_BENCH_BUDGETS_MIB=4096,0 STRATA_BENCH_POLICIES=decayed
	bench "$t" 90 after-30b-q2_0 $m STRATA_BENCH_LABEL=after- STRATA_BENCH_TOKENS=48 STRATA_BENCH_CTX=1024 STRATA_BENCH_PREFILL=512 STRATA_BENCH_BUDGETS_MIB=4096,8192,0 STRATA_BENCH_POLICIES=decayed
	echo "== strata-run --stats at 6144 MiB (progress output)"
	cli 60 "$out/run-stats.log" -m $m -p hello -n 24 --temp 0 --backend gpu --vram-budget-mib 6144 --stats --expert-profile "$out/profile.txt"
	tail -6 "$out/run-stats.log" | cut -c1-300
	rm -f $m
	local n=/tmp/q80-iq2_xs.gguf
	echo "== synth 80B-A3B IQ2_XS (time, disk)"
	cli 150 "$out/synth-80b-iq2_xs.log" synth --arch qwen3next --preset qwen3-next-80b-a3b --type iq2_xs -o $n
	ls -la $n; df -h /tmp | tail -1
	bench "$t" 100 after-80b-iq2_xs $n STRATA_BENCH_LABEL=80b- STRATA_BENCH_TOKENS=16 STRATA_BENCH_BUDGETS_MIB=16384,0 STRATA_BENCH_POLICIES=decayed
	finish
}

# matrix30 MODEL LABEL: the 30B-A3B-shape rows: budgets that miss and the issue's budgets,
# decode and a 512-token prompt at each, a 4096-token prompt at the unlimited budget
matrix30() {
	local m=$1 lb=$2
	bench "$t" 110 "m-$lb-a" "$m" STRATA_BENCH_LABEL="$lb" STRATA_BENCH_TOKENS=64 STRATA_BENCH_CTX=4608 STRATA_BENCH_PREFILL=512 STRATA_BENCH_BUDGETS_MIB=4096,6144,12288,16384,24576 STRATA_BENCH_POLICIES=decayed
	bench "$t" 80 "m-$lb-b" "$m" STRATA_BENCH_LABEL="$lb" STRATA_BENCH_TOKENS=64 STRATA_BENCH_CTX=4608 STRATA_BENCH_PREFILL=512,4096 STRATA_BENCH_BUDGETS_MIB=0 STRATA_BENCH_POLICIES=decayed
}

call2() {
	setup
	tp=/tmp/ge/parity.test
	[ -f "$d/parity.test.xz" ] && unxz "$d/parity.test.xz" "$tp" && chmod +x "$tp"
	echo "== parity rmsnorm_row (and rmsnorm beside it), when the parity binary came along"
	[ -x "$tp" ] && STRATA_CO_DIR=/tmp/ge/co STRATA_REQUIRE_GPU=1 timeout 60 "$tp" -test.run 'TestParity/sm_90/(rmsnorm|rmsnorm_row)/' -test.v -test.timeout 55s >"$out/parity.log" 2>&1
	echo "   exit $?"; grep -E "^(ok|FAIL|PASS)|--- FAIL" "$out/parity.log" | head; grep -E "rmsnorm(_row)?/addq81/rows=1,n=2048" "$out/parity.log" | head -4
	echo "== tiny GPU vs CPU"
	STRATA_REQUIRE_GPU=1 timeout 90 "$t" -test.run 'TestGPUEngineMatchesCPU|TestGPUEngineNextMatchesCPU|TestBackendFlags' -test.v -test.timeout 85s >"$out/tiny.log" 2>&1
	echo "   exit $?"
	grep -E "^(---|ok|FAIL|PASS)|NMSE|near tie" "$out/tiny.log" | head -30
	local m=/tmp/q30-q2_0.gguf
	echo "== synth 30B-A3B Q2_0"
	cli 100 "$out/synth-30b-q2_0.log" synth --arch qwen3moe --preset qwen3-30b-a3b --type q2_0 -o $m
	bench "$t" 40 abl-first $m STRATA_BENCH_LABEL=abl-first- STRATA_BENCH_HOSTKV=1 STRATA_BENCH_NORESIDENT=1 STRATA_BENCH_NOFUSE=1 STRATA_BENCH_NOROWNORM=1 STRATA_BENCH_TOKENS=32 STRATA_BENCH_BUDGETS_MIB=4096,0 STRATA_BENCH_POLICIES=decayed
	bench "$t" 30 abl-norow $m STRATA_BENCH_LABEL=abl-norownorm- STRATA_BENCH_NOROWNORM=1 STRATA_BENCH_TOKENS=32 STRATA_BENCH_BUDGETS_MIB=4096,0 STRATA_BENCH_POLICIES=decayed
	bench "$t" 30 abl-final $m STRATA_BENCH_LABEL=abl-final- STRATA_BENCH_TOKENS=32 STRATA_BENCH_BUDGETS_MIB=4096,0 STRATA_BENCH_POLICIES=decayed
	matrix30 $m q30-q2_0
	echo "== strata-run --stats at 6144 MiB, twice (the second seeded from the first's profile)"
	cli 40 "$out/run-stats.log" -m $m -p hello -n 24 --temp 0 --backend gpu --vram-budget-mib 6144 --stats --expert-profile "$out/profile.txt"
	cli 40 "$out/run-stats2.log" -m $m -p hello -n 24 --temp 0 --backend gpu --vram-budget-mib 6144 --stats --expert-profile "$out/profile.txt"
	tail -4 "$out/run-stats2.log" | cut -c1-300
	rm -f $m
	m=/tmp/q30-iq2_xs.gguf
	echo "== synth 30B-A3B IQ2_XS"
	cli 100 "$out/synth-30b-iq2_xs.log" synth --arch qwen3moe --preset qwen3-30b-a3b --type iq2_xs -o $m
	matrix30 $m q30-iq2_xs
	rm -f $m
	finish
}

plotall() {
	grep -hv "^abl-" "$d"/rows-call2.tsv "$out"/bench-rows.tsv | grep -v "^kt-" >"$out/rows-all.tsv"
	python3 "$d/plot.py" "$out/tok-s-vs-budget.png" "$out/rows-all.tsv" 2>&1 | tail -3
}

call3() {
	setup
	local n=/tmp/q80-iq2_xs.gguf m=/tmp/q30-q2_0.gguf
	echo "== synth 80B-A3B IQ2_XS and 30B-A3B Q2_0"
	cli 100 "$out/synth-80b-iq2_xs.log" synth --arch qwen3next --preset qwen3-next-80b-a3b --type iq2_xs -o $n
	cli 100 "$out/synth-30b-q2_0.log" synth --arch qwen3moe --preset qwen3-30b-a3b --type q2_0 -o $m
	ls -la $n $m | tee -a "$out/df.log"; df -h /tmp | tail -1 | tee -a "$out/df.log"
	bench "$t" 110 m-q80-a $n STRATA_BENCH_LABEL=q80-iq2_xs STRATA_BENCH_TOKENS=32 STRATA_BENCH_CTX=4608 STRATA_BENCH_PREFILL=512 STRATA_BENCH_BUDGETS_MIB=12288,16384,24576 STRATA_BENCH_POLICIES=decayed
	bench "$t" 40 kt-q80 $n STRATA_BENCH_LABEL=kt-q80- STRATA_BENCH_KTIMES=1 STRATA_BENCH_TOKENS=16 STRATA_BENCH_BUDGETS_MIB=0,12288 STRATA_BENCH_POLICIES=decayed
	bench "$t" 30 kt-q30 $m STRATA_BENCH_LABEL=kt-q30- STRATA_BENCH_KTIMES=1 STRATA_BENCH_TOKENS=16 STRATA_BENCH_BUDGETS_MIB=0,4096 STRATA_BENCH_POLICIES=decayed
	bench "$t" 90 m-q30-q2_0-c $m STRATA_BENCH_LABEL=q30-q2_0 STRATA_BENCH_TOKENS=16 STRATA_BENCH_CTX=4608 STRATA_BENCH_PREFILL=4096 STRATA_BENCH_BUDGETS_MIB=12288,24576 STRATA_BENCH_POLICIES=decayed
	plotall
	cat "$out"/gpu-engine-kt-*.md | grep -A14 "device time" | head -70
	bench "$t" 140 m-q80-b $n STRATA_BENCH_LABEL=q80-iq2_xs STRATA_BENCH_TOKENS=32 STRATA_BENCH_CTX=4608 STRATA_BENCH_PREFILL=512,4096 STRATA_BENCH_BUDGETS_MIB=0 STRATA_BENCH_POLICIES=decayed
	plotall
}

case "${1:-}" in
build) shift; build "$@" ;;
call1) call1 ;;
call2) call2 ;;
call3) call3 ;;
finish) out=/tmp/ge-out; finish ;;
matrix) matrix ;;
*) echo "usage: $0 build | call1 | call2 | call3 | finish" >&2; exit 2 ;;
esac
