#!/usr/bin/env bash
# PTX identity of the mmvq kernels (mmvq-s9; from mmvq4-s8/ptx_identity.sh): builds kernels/out/<t>/mmvq.cu of
# this tree and of a reference commit (default e81172f, main before this branch)
# with clang-19 and the flags of kernels/out/objects.txt, cuts every .entry (its signature
# line through the closing brace) and compares the reference's entries with the same symbols
# here byte for byte (and with the function-numbered labels $L__BB<n>_ normalised: an entry
# that moved in the module). Usage: bash ptx_identity.sh [ref] (from the repository root).
set -euo pipefail
ref=${1:-e81172f}
tmp=$(mktemp -d)
git archive "$ref" kernels/out | tar -x -C "$tmp"
rc=0
for t in ${TARGETS:-sm_80 sm_86 sm_89 sm_90}; do
  flags=$(awk -F'\t' -v t="$t" '$1=="target" && $2==t {print $6}' kernels/out/objects.txt)
  clang-19 $flags -Ikernels/out/include -o "$tmp/new_$t.ptx" "kernels/out/$t/mmvq.cu"
  (cd "$tmp" && clang-19 $flags -Ikernels/out/include -o "$tmp/ref_$t.ptx" "kernels/out/$t/mmvq.cu")
  python3 - "$tmp/ref_$t.ptx" "$tmp/new_$t.ptx" "$t" <<'PY' || rc=1
import re, sys
def entries(path):
    out, cur, name = {}, None, None
    for line in open(path):
        m = re.match(r'\.visible \.entry (\w+)\(', line)
        if m:
            name, cur = m.group(1), [line]
        elif cur is not None:
            cur.append(line)
            if line.startswith('}'):
                out[name] = ''.join(cur); cur = None
    return out
ref, new = entries(sys.argv[1]), entries(sys.argv[2])
bad = [k for k in ref if ref[k] != new.get(k)]
# $L__BB<function index>_<block> labels (and the comments naming BB<index>_<block>) number the module's functions in order: an entry
# whose place in the module moved differs in them alone (the same code)
lab = lambda s: re.sub(r'BB\d+_', 'BB_', s or '')
moved = [k for k in bad if lab(ref[k]) == lab(new.get(k))]
bad = [k for k in bad if k not in moved]
extra = sorted(set(new) - set(ref))
print(f"{sys.argv[3]}: {len(ref)} reference entries, {len(ref) - len(bad) - len(moved)} byte-identical here, {len(moved)} identical but for their function's label number, differing/missing: {bad or 'none'}; default kernels byte-identical: {all(ref[k] == new.get(k) for k in ref if not re.search(r'_g[0-9]+$', k))}; new entries: {len(extra)} ({', '.join(extra[:3])}{', …' if len(extra) > 3 else ''})")
sys.exit(1 if bad else 0)
PY
done
rm -rf "$tmp"
exit $rc
