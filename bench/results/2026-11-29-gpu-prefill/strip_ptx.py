import re, sys
# strip_ptx.py IN OUT REGEX: keep only the .entry functions whose name matches REGEX
src, dst, keep = sys.argv[1], sys.argv[2], re.compile(sys.argv[3])
lines = open(src).read().split('\n')
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
        dropped += 1
    i = j + 2
assert kept > 0
open(dst, 'w').write('\n'.join(out))
print(f'{src}: kept {kept} entries, dropped {dropped}', file=sys.stderr)
