import re, sys
# strip_ptx.py IN OUT REGEX: keep only the .entry functions whose name matches REGEX.
# As bench/results/2026-11-29-gpu-prefill/strip_ptx.py, but a dropped function's leading
# module-scope declarations are kept: LLVM emits a global (.shared arrays, .const tables)
# after the "// .globl" comment of the first function that uses it, so dropping that
# function's whole unit left later kernels with unknown symbols (ptxas: "Unknown symbol").
src, dst, keep = sys.argv[1], sys.argv[2], re.compile(sys.argv[3])
lines = open(src).read().split('\n')
entry = re.compile(r'^(\.visible |\.weak )?\.(entry|func)\b')
out, i, kept, dropped = [], 0, 0, 0
while i < len(lines):
    m = re.match(r'\t// \.globl\t(\S+)', lines[i])
    if not m:
        out.append(lines[i]); i += 1; continue
    j = i
    while not lines[j].strip().startswith('// -- End function'):
        j += 1
    assert lines[j + 1] == '}', lines[j + 1]
    if keep.search(m.group(1)):
        out.extend(lines[i:j + 2]); kept += 1
    else:
        k = i + 1
        while not entry.match(lines[k]):
            k += 1
        out.extend(lines[i + 1:k]); dropped += 1
    i = j + 2
assert kept > 0
open(dst, 'w').write('\n'.join(out))
print(f'{src}: kept {kept} entries, dropped {dropped}', file=sys.stderr)
