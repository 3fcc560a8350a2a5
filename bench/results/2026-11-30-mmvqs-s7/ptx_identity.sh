#!/usr/bin/env bash
# PTX identity of the default mmvq kernels (mmvq2, session 7): builds kernels/out/<t>/mmvq.cu of
# this tree and of a reference commit (default a2cd2ed, the kernels before decode geometries)
# with clang-19 and the flags of kernels/out/objects.txt, cuts every .entry (its signature
# line through the closing brace) and compares the reference's entries with the same symbols
# here byte for byte. Usage: bash ptx_identity.sh [ref] (from the repository root).
set -euo pipefail
ref=${1:-a2cd2ed}
tmp=$(mktemp -d)
git archive "$ref" kernels/out | tar -x -C "$tmp"
rc=0
for t in sm_80 sm_86 sm_89 sm_90; do
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
extra = sorted(set(new) - set(ref))
print(f"{sys.argv[3]}: {len(ref)} reference entries, {len(ref) - len(bad)} byte-identical here, differing/missing: {bad or 'none'}; new entries: {len(extra)} ({', '.join(extra[:3])}{', …' if len(extra) > 3 else ''})")
sys.exit(1 if bad else 0)
PY
done
rm -rf "$tmp"
exit $rc
