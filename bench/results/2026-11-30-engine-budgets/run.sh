#!/usr/bin/env bash
# Issue 11, item 4: the GPU engine at VRAM budgets 12, 16, 24 GiB and unlimited with the
# default miss path (--expert-misses auto) against the copy path; session 5, helper auto.
#
#   run.sh build    build machine (Go + clang-19), from this checkout: strata-run.test
#       (CGO_ENABLED=0, stripped, xz) and the sm_90 PTX of every family the engine launches
#       (mmq and moe_prefill cut to the r64t64 and r128t64 mma variants,
#       ../2026-11-29-prefill-async/strip_ptx.py), into $DEV (default /work/main/.dev-budgets)
#   run.sh run      GPU machine, repository root of the device copy (carry .dev-budgets),
#       $OUT set. ptxas assembles the PTX to cubins while a background job synthesizes
#       30B-A3B Q2_0, 80B-A3B IQ2_XS and 30B-A3B IQ2_XS (`strata-run synth`); then one
#       TestGPUBench (cmd/strata-run) per model: ctx 1024, the engine loaded with the batched
#       prompt path (chunk 512), per budget and miss mode: load, 64 greedy decode tokens
#       after an 8-token prompt (cold cache), then Reset and a 512-token prompt (batched).
#         30B Q2_0, 30B IQ2_XS: 12288, 16384, 24576 MiB, unlimited; auto only (every
#           expert has a slot at these budgets, so auto is the copy path's resident engine)
#         80B IQ2_XS: 16384, 12288, 24576 MiB with auto and copy; unlimited with auto
#         then, if 25 s are left: 30B Q2_0 at 4096 MiB, auto and copy
#       Everything inside STRATA_RUN_BUDGET seconds (default 230). Writes $OUT/summary.md
#       (step times), $OUT/rows.md (every ROW line as a table), $OUT/rows.tsv (the same rows,
#       tab-separated, for plot.py), $OUT/bench-rows.tsv (TestGPUBench's own),
#       $OUT/logs.tar.gz (every log).
#   STRATA_RUN_DRY=1 run.sh run   the same flow with stub binaries (no GPU): checks the
#       script's logic, tables and time accounting (STRATA_RUN_DRY_SLEEP: seconds per stub
#       call, default 1).
#   run.sh plot ROWS.tsv OUT.png   here, after the call: the plot (plot.py, matplotlib).
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)

build() {
	set -e
	cd "$here/../../.."
	local d=${DEV:-/work/main/.dev-budgets} target=sm_90 flags
	rm -rf "$d" && mkdir -p "$d/co"
	export CGO_ENABLED=0
	go test -c -trimpath -ldflags=-s -tags strata_nodemo -o "$d/strata-run.test" ./cmd/strata-run
	xz -9e -T2 "$d/strata-run.test"
	flags=$(awk -F'\t' -v t="$target" '$1 == "target" && $2 == t { print $6 }' kernels/out/objects.txt)
	for fam in rmsnorm rmsnorm_row mmvq rope attention_decode quantize_q8_1 moe_decode sample gated_delta_net mmq moe_prefill attention_prefill; do
		awk -F'\t' -v t="$target" -v f="$fam" '$1 == "object" && $2 == t && $3 == f { print $4 "\t" $5 }' kernels/out/objects.txt |
			while IFS=$'\t' read -r src obj; do
				mkdir -p "$d/co/$(dirname "$obj")"
				# shellcheck disable=SC2086 # flags are a list
				clang-19 $flags -I "$(dirname "$src")" -I kernels/out/include "$src" -o "$d/co/$obj"
				case $fam in
				mmq | moe_prefill)
					python3 "$here/../2026-11-29-prefill-async/strip_ptx.py" "$d/co/$obj" "$d/co/$obj.s" '_mma_r(64|128)t64$'
					mv "$d/co/$obj.s" "$d/co/$obj"
					;;
				esac
			done
	done
	tar -C "$d" -czf "$d/co.tar.gz" co && rm -r "$d/co"
	cp "$here/run.sh" "$d/"
	git rev-parse HEAD >"$d/commit"
	git status --porcelain >>"$d/commit"
	ls -la "$d"
	du -sh "$d"
}

# stub writes the dry run's stand-in for strata-run.test: it prints its environment, sleeps,
# creates synth's output file, and prints ROW lines shaped as TestGPUBench's for each budget
# and miss mode it was given.
stub() {
	cat >"$1" <<EOF
#!/bin/sh
echo "stub \$0 \$*"; env | grep -E "^STRATA_" | sort
sleep ${STRATA_RUN_DRY_SLEEP:-1}
case "\$STRATA_RUN_ARGS" in *" -o "*) f=\${STRATA_RUN_ARGS##* -o }; : >"\$f";; esac
[ -n "\${STRATA_BENCH_BUDGETS_MIB:-}" ] || { echo PASS; exit 0; }
echo "    cmd_bench_test.go:190: ceilings: device-to-device 4170 GB/s (read + written), pinned host-to-device 55.4 GB/s"
for b in \$(echo "\$STRATA_BENCH_BUDGETS_MIB" | tr , ' '); do
	for m in \$(echo "\${STRATA_BENCH_MISSES:-auto}" | tr , ' '); do
		p=\$m; [ "\$m" = auto ] && p=auto:map; [ "\$b" = 0 ] && [ "\$m" = auto ] && p=auto:copy
		echo "ROW | \$b | decayed/\$p | decode | 1000 | 6144 | 0.900 | 20.0 | 40.0 | 11 | 4.00 | 2.00 | 5.00 | \$((100 + b / 200)).0 | 1.000 | 0.200 | 3.0 |"
		echo "ROW | \$b | decayed/\$p | prefill 512 batched (moe_prefill 40, fallback 8) | 1000 | 6144 | 0.950 | 10.0 | 40.0 | 0 | 0.00 | 0.10 | 0.40 | \$((2000 + b / 20)).0 | 0.100 | 0.250 | 3.0 |"
	done
done
echo PASS
EOF
	chmod +x "$1"
}

run() {
	local d=$here w=/tmp/budgets t0=$SECONDS budget=${STRATA_RUN_BUDGET:-230} dry=${STRATA_RUN_DRY:-0}
	: "${OUT:?set OUT}"
	rm -rf "$w" && mkdir -p "$w/logs" "$w/models"
	local out=$w/logs t=$w/sr.test
	left() { echo $((budget - (SECONDS - t0) - $1)); }
	# lim WANT RESERVE: WANT seconds, cut to what is left after RESERVE (at least 5)
	lim() { local l; l=$(left "$2"); [ "$l" -lt "$1" ] && echo $((l > 5 ? l : 5)) || echo "$1"; }
	local ptx=""
	if [ "$dry" = 1 ]; then
		stub "$t"
		mkdir -p "$w/co"
	else
		tar -C "$w" -xzf "$d/co.tar.gz"
		python3 -c 'import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2], "wb"))' "$d/strata-run.test.xz" "$t" && chmod +x "$t"
		{ nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm --format=csv; nproc; df -h /tmp; free -g; } >"$out/machine.log" 2>&1
		# The driver's JIT of a whole tree takes > 15 s (final-s4): assemble every PTX file to
		# a cubin under the same name first (cuModuleLoadData takes either), in parallel, while
		# the first model is synthesized. A file ptxas fails on stays PTX (JIT at load).
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
	step() { # step NAME SECONDS-LIMIT LOG CMD...: run, record exit status and time
		local name=$1 secs=$2 log=$3 s=$SECONDS rc
		shift 3
		timeout "$secs" "$@" >"$log" 2>&1
		rc=$?
		echo "- $name: exit $rc in $((SECONDS - s)) s (limit $secs s, $((SECONDS - t0)) s so far)" | tee -a "$sum"
		return $rc
	}
	echo "- setup: $((SECONDS - t0)) s" | tee -a "$sum"
	# Models, in the order the benchmarks want them; NAME.ready (or NAME.failed) when done.
	(
		for spec in "q30-q2_0|qwen3moe --preset qwen3-30b-a3b --type q2_0" "q80-iq2_xs|qwen3next --preset qwen3-next-80b-a3b --type iq2_xs" \
			"q30-iq2_xs|qwen3moe --preset qwen3-30b-a3b --type iq2_xs"; do
			name=${spec%%|*}
			s=$SECONDS
			STRATA_RUN_ARGS="synth --arch ${spec#*|} -o $w/models/$name.gguf" timeout 100 "$t" -test.run '^TestCLI$' -test.v -test.timeout 300s >"$out/synth-$name.log" 2>&1 &
			echo $! >"$w/synth.pid"
			if wait $!; then
				echo "$((SECONDS - s))" >"$w/models/$name.ready"
			else
				echo "$((SECONDS - s))" >"$w/models/$name.failed"
			fi
		done
	) &
	local synth=$!
	# waitfor NAME RESERVE: wait until the model is ready (0) or failed / out of time (1)
	waitfor() {
		while [ ! -e "$w/models/$1.ready" ] && [ ! -e "$w/models/$1.failed" ] && [ "$(left "$2")" -gt 5 ]; do sleep 1; done
		echo "  (waited for $1 until $((SECONDS - t0)) s: $(ls "$w/models" | grep "^$1\." | grep -v gguf | tr '\n' ' '))" | tee -a "$sum"
		[ -e "$w/models/$1.ready" ]
	}
	if [ -n "$ptx" ]; then
		wait "$ptx"
		echo "- ptxas: $(ls "$w"/co/sm_90/*.ptx | wc -l) files, $(grep -lE "error|fatal" "$w"/co/sm_90/*.ptxas.log 2>/dev/null | wc -l) failed, done at $((SECONDS - t0)) s" | tee -a "$sum"
		cp "$w"/co/sm_90/*.ptxas.log "$out/" 2>/dev/null
	fi
	bench() { # bench NAME MODEL SECONDS RESERVE BUDGETS MISSES: TestGPUBench on MODEL
		local name=$1 m=$2 secs=$3 res=$4 budgets=$5 misses=$6
		step "bench $name (budgets $budgets, misses $misses)" "$(lim "$secs" "$res")" "$out/bench-$name.log" \
			env STRATA_GPU_BENCH=1 STRATA_BENCH_MODEL="$m" STRATA_BENCH_OUT="$out" STRATA_BENCH_LABEL="$name" STRATA_BENCH_POLICIES=decayed \
			STRATA_BENCH_CTX=1024 STRATA_BENCH_TOKENS=64 STRATA_BENCH_CHUNK=512 STRATA_BENCH_PREFILL=512 \
			STRATA_BENCH_BUDGETS_MIB="$budgets" STRATA_BENCH_MISSES="$misses" "$t" -test.run '^TestGPUBench$' -test.v -test.timeout 300s
		grep -E "ceilings:|expert misses|load failed|FAIL|panic" "$out/bench-$name.log" | head -12 | sed 's/^/    /' >>"$sum"
	}
	local m30=$w/models/q30-q2_0.gguf m80=$w/models/q80-iq2_xs.gguf m30x=$w/models/q30-iq2_xs.gguf
	# Reserves: what the later steps need (80B: 7 engines at ~15 s; a 30B model: 4 at ~6 s).
	if waitfor q30-q2_0 160; then
		bench q30-q2_0 "$m30" 40 150 12288,16384,24576,0 auto
	fi
	if waitfor q80-iq2_xs 60; then
		bench q80-iq2_xs "$m80" 110 45 16384,12288,24576 auto,copy
		bench q80-iq2_xs-unl "$m80" 25 30 0 auto
	fi
	rm -f "$m80"
	if waitfor q30-iq2_xs 5; then
		bench q30-iq2_xs "$m30x" 40 3 12288,16384,24576,0 auto
	fi
	rm -f "$m30x"
	if [ -e "$w/models/q30-q2_0.ready" ] && [ "$(left 0)" -ge 25 ]; then
		bench q30-q2_0-4g "$m30" 25 2 4096 auto,copy
	else
		echo "- bench q30-q2_0-4g: skipped ($(left 0) s left)" | tee -a "$sum"
	fi
	# a synthesis still running (its wait ran out of time): stop it and its subshell, by id
	kill "$synth" 2>/dev/null
	[ -e "$w/synth.pid" ] && kill "$(cat "$w/synth.pid")" 2>/dev/null
	rm -f "$w"/models/*.gguf
	grep -h "^wrote" "$out"/synth-*.log | sed 's/^/    /' >>"$sum"
	for f in "$w"/models/*.ready "$w"/models/*.failed; do
		[ -e "$f" ] && echo "    synth $(basename "$f"): $(cat "$f") s" >>"$sum"
	done
	local names="q30-q2_0 q80-iq2_xs q80-iq2_xs-unl q30-iq2_xs q30-q2_0-4g"
	{
		echo "## rows (as measured: the ROW lines of the bench logs, in order)"
		echo
		echo "| budget MiB | policy/misses | phase | cache slots | of experts | hit rate | MB copied/token | copy GB/s | launches/token | host µs/launch | sync ms/token | ms/token | tok/s | bound ms | bound/achieved | load s |"
		echo "|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
		for f in $names; do
			[ -e "$out/bench-$f.log" ] || continue
			echo "| **$f** |"
			grep -E "^ROW " "$out/bench-$f.log" | sed 's/^ROW //'
		done
	} >"$OUT/rows.md"
	# rows.tsv: the model, then the ROW line's 16 columns (budget MiB … load s), for plot.py
	local l
	for f in $names; do
		[ -e "$out/bench-$f.log" ] || continue
		l=${f%-unl} && l=${l%-4g}
		grep -E "^ROW " "$out/bench-$f.log" | sed 's/^ROW //' |
			awk -F' *[|] *' -v l="$l" 'NF == 18 { printf "%s", l; for (i = 2; i < NF; i++) printf "\t%s", $i; print "" }'
	done >"$OUT/rows.tsv"
	cp "$out"/bench-rows.tsv "$OUT/" 2>/dev/null
	echo "- rows: $(wc -l <"$OUT/rows.tsv") in rows.tsv" | tee -a "$sum"
	echo "- total: $((SECONDS - t0)) s" | tee -a "$sum"
	tar -C "$w" -czf "$OUT/logs.tar.gz" logs
	true
}

case "${1:-run}" in
build) build ;;
run) run ;;
plot)
	shift
	/usr/bin/python3 "$here/plot.py" "$@"
	;;
*)
	echo "usage: $0 build | run | plot ROWS.tsv OUT.png" >&2
	exit 2
	;;
esac
