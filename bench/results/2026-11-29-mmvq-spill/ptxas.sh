#!/usr/bin/env bash
# ptxas -v of the mmvq PTX, before (commit a031fc5) and after (this branch), per NVIDIA
# target, compiled exactly as kernels/out/objects.txt says. Usage (worktree root):
#   PTXAS=/path/to/ptxas bench/results/2026-11-29-mmvq-spill/ptxas.sh > ptxas.txt
set -euo pipefail
P=${PTXAS:-ptxas}
w=$(mktemp -d)
"$P" --version | tail -1
for t in sm_80 sm_86 sm_89 sm_90; do
	flags=$(awk -F'\t' -v t="$t" '$1 == "target" && $2 == t { print $6 }' kernels/out/objects.txt)
	git show a031fc5:kernels/out/$t/mmvq.cu >"$w/before.cu"
	cp kernels/out/$t/mmvq.cu "$w/after.cu"
	for v in before after; do
		# shellcheck disable=SC2086 # flags are a list
		clang-19 $flags -I kernels/out/$t -I kernels/out/include "$w/$v.cu" -o "$w/$v.ptx"
		echo "== $t $v: kernel, stack frame, spill stores, spill loads, registers"
		"$P" -arch="$t" -v "$w/$v.ptx" -o /dev/null 2>&1 | grep -E "entry function|spill|Used" | paste - - - |
			sed -E "s/ptxas info *: //g; s/Compiling entry function //; s/ for 'sm_[0-9]+'//; s/ bytes stack frame, / /; s/ bytes spill stores, / /; s/ bytes spill loads//; s/Used //; s/, [0-9]+ bytes cmem\[0\]//"
	done
done
rm -rf "$w"
