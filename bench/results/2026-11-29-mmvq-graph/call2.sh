#!/usr/bin/env bash
# Call 2 (H200): the new mmvq against the old (main at 39b2b1d) in one binary — benchmarks
# with the per-launch event and graph-replay columns, old/new interleaved, two rounds —, then
# parity of every family whose source changed (new code objects, fresh seeds), and the device
# ptxas report of the changed decode families.
#   build (worktree root): DEV=/work/main/.dev-mmvq bash call2.sh build
#   run (device, carry .dev-mmvq): OUT=$OUT bash .dev-mmvq/call2.sh
#   STRATA_DRY=1: stub binary and tools (rehearsal on the build machine).
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
variants="old new pf1s x4off u4"

build() {
	set -e
	local d=${DEV:-/work/main/.dev-mmvq} flags
	rm -rf "$d" && mkdir -p "$d/co-new"
	CGO_ENABLED=0 go test -c -trimpath -ldflags=-s -tags strata_nodemo -o "$d/parity.test" ./parity
	xz -9 -T2 "$d/parity.test"
	flags=$(awk -F'\t' '$1 == "target" && $2 == "sm_90" { print $6 }' kernels/out/objects.txt)
	# Every sm_90 family, new (parity loads whichever it tests).
	awk -F'\t' '$1 == "object" && $2 == "sm_90" { print $4 "\t" $5 }' kernels/out/objects.txt |
		while IFS=$'\t' read -r src obj; do
			mkdir -p "$d/co-new/$(dirname "$obj")"
			# shellcheck disable=SC2086 # flags are a list
			clang-19 $flags -I "$(dirname "$src")" -I kernels/out/include "$src" -o "$d/co-new/$obj"
		done
	# mmvq only: the old source (main) and two sweep builds of the new.
	local w
	w=$(mktemp -d)
	git show 39b2b1d:kernels/out/sm_90/mmvq.cu >"$w/old.cu"
	for v in old pf1s x4off u4; do
		local src=kernels/out/sm_90/mmvq.cu def=""
		case $v in old) src=$w/old.cu ;; pf1s) def="-DSTRATA_MMVQ_PF=1 -DSTRATA_MMVQ_PF_GB=16" ;; x4off) def=-DSTRATA_Q80_X4=0 ;; u4) def=-DSTRATA_MMVQ_U1=4 ;; esac
		mkdir -p "$d/co-$v/sm_90"
		# shellcheck disable=SC2086 # flags are a list
		clang-19 $flags $def -I kernels/out/sm_90 -I kernels/out/include "$src" -o "$d/co-$v/sm_90/mmvq.ptx"
	done
	rm -rf "$w"
	tar -C "$d" -czf "$d/co.tar.gz" $(for v in $variants; do echo "co-$v"; done) && rm -r "$d"/co-*
	cp "$here/call2.sh" "$d/"
	{ git rev-parse HEAD; git status --porcelain; } >"$d/commit"
	du -sh "$d"
}

run() {
	: "${OUT:?set OUT}"
	local d=$here w=/tmp/mmvq2 t0=$SECONDS dry=${STRATA_DRY:-0} budget=${STRATA_BUDGET:-140}
	rm -rf "$w" && mkdir -p "$w/logs"
	local L=$w/logs pt=$w/parity.test
	tar -C "$w" -xzf "$d/co.tar.gz"
	if [ "$dry" = 1 ]; then
		printf '#!/bin/sh\necho "stub $0 $*"; env | grep STRATA_ | sort\necho "d2d copy 1 GiB: 1 GB/s"\necho "q80      4096x14336                           1      21.85    2859.9    67.1%%     62476288 |      20.00    3000.0    70.0%%"\necho "--- PASS: TestParity/sm_90/mmvq/q80/x"\nsleep 1\n' >"$pt"
		chmod +x "$pt"
		mkdir -p "$w/stub"
		for x in ptxas nvidia-smi; do printf '#!/bin/sh\necho "stub %s $*"\n' "$x" >"$w/stub/$x"; chmod +x "$w/stub/$x"; done
		export PATH=$w/stub:$PATH
	else
		python3 -c 'import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2], "wb"))' "$d/parity.test.xz" "$pt"
		chmod +x "$pt"
		export PATH=$PATH:/usr/local/cuda/bin
	fi
	nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,temperature.gpu,power.draw --format=csv >"$L/gpu.txt" 2>&1
	cp "$d/commit" "$L/commit"
	export STRATA_REQUIRE_GPU=1
	# 1. Benchmarks, the GPU alone: n = 1 dense, every type, both timings, variants
	#    interleaved, two rounds; then every case (n = 1, 2, 4, 8 and the expert shapes) of new.
	b() { # b NAME VARIANT ENV...
		local name=$1 v=$2
		shift 2
		env STRATA_BENCH=1 STRATA_CO_DIR="$w/co-$v" "$@" timeout 40 "$pt" -test.v -test.timeout 38s -test.run '^TestBenchDecode$' >"$L/$name.log" 2>&1
		echo "$name exit $? at $((SECONDS - t0)) s"
		grep -E "^(floor|d2d|per launch|type|[a-z0-9]+ +(floor|[0-9]+x|experts))" "$L/$name.log" >"$L/$name.txt"
	}
	for r in 1 2; do
		for v in $variants; do b "bench-$v-$r" "$v" STRATA_BENCH_NS=1 STRATA_BENCH_EXPERTS=0; done
	done
	b bench-new-full new
	# 2. Parity of the changed families with the new code objects (correctness only, in
	#    parallel), and the device ptxas report of the changed decode families beside it.
	local left=$((budget - (SECONDS - t0) - 8)) pids=() i=0 g
	[ "$left" -lt 20 ] && left=20
	for g in "mmvq/(f16|bf16|q80)" "mmvq/q20" "mmvq/q4k" "mmvq/q6k" "mmvq/iq2xs" "mmvq/iq3xxs" "mmvq/iq3s" "mmvq/iq1m" \
		"dequant" "moe_decode" "mmq/(q4k|q80)" "moe_prefill/(q4k|q80)"; do
		echo "$g" >"$L/parity-$i.group"
		env STRATA_CO_DIR="$w/co-new" timeout "$left" "$pt" -test.v -test.timeout "$((left - 2))s" -test.run "TestParity/sm_90/$g/" >"$L/parity-$i.log" 2>&1 &
		pids+=($!)
		i=$((i + 1))
	done
	(
		for f in mmvq moe_decode dequant; do timeout "$left" ptxas -arch=sm_90 -v "$w/co-new/sm_90/$f.ptx" -o /dev/null >"$L/ptxas-new-$f.txt" 2>&1; done
		timeout "$left" ptxas -arch=sm_90 -v "$w/co-old/sm_90/mmvq.ptx" -o /dev/null >"$L/ptxas-old-mmvq.txt" 2>&1
	) &
	wait "${pids[@]}"
	wait
	echo "parity done at $((SECONDS - t0)) s (limit $left s)"
	tar -C "$w" -czf "$OUT/logs.tgz" logs
	cnt() { echo "passed $(cat "$@" | grep -cE '^\s*--- PASS: TestParity/.*/.*/.*/'), failed $(cat "$@" | grep -cE '^\s*--- FAIL: TestParity/.*/.*/.*/')"; }
	{
		echo "## parity: $(cnt "$L"/parity-*.log)"
		for f in "$L"/parity-*.log; do echo "- $(cat "${f%.log}.group"): $(cnt "$f")$(grep -qE 'panic|test timed out' "$f" && echo ' (panic/timeout)')"; done
		grep -hE "^\s*--- FAIL|panic:|test timed out" "$L"/parity-*.log | head -10
		echo "## ptxas (spills, registers)"
		grep -hE "spill|Used" "$L"/ptxas-*.txt | sort | uniq -c | sort -rn | head -8
		echo "## n = 1, 4096x14336: type, event µs, % d2d | graph µs, % d2d"
		grep -h "^d2d\|^floor: empty" "$L/bench-new-1.txt"
		for f in "$L"/bench-*-[12].txt; do echo "--- $(basename "$f" .txt)"; grep -E " 4096x14336 | floor: d2d copy of its" "$f" | awk '{ if ($2 == "floor:") printf "%s copy %s %s | %s %s\n", $1, $9, $11, $14, $16; else printf "%s %s %s | %s %s\n", $1, $4, $6, $9, $11 }' | paste -sd';'; done
		echo "total $((SECONDS - t0)) s"
	} | tee "$OUT/summary.txt"
}

case "${1:-run}" in
build) build ;;
run) run ;;
*) echo "usage: $0 build | run" >&2; exit 2 ;;
esac
