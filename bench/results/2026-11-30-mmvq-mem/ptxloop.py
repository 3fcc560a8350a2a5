# ptxloop.py O.ptx N.ptx: the one-column pass loop of each quantized mmvq kernel in clang's
# PTX (before ptxas), as passloop.py picks it in SASS: the smallest loop (label … backward
# bra) that reads LDS (ld.shared) and writes none (st.shared), with a dot4 (dp4a) in it.
# Prints its instruction count per 256-weight block (GR = 4 group-rows a lane an iteration,
# 16 blocks) and the opcodes that changed. PTX is not SASS: ptxas reschedules, fuses and
# rematerialises; the device's SASS counts (passloop.py) are the ones that count.
import re, sys, collections
def loops(path):
    out = {}
    txt = open(path).read()
    for part in txt.split('.entry strata_mmvq_')[1:]:
        name, body = part.split('(', 1)[0], part
        lines = [l.strip() for l in body.split('\n')]
        labels = {}
        ins = []
        for l in lines:
            if re.match(r'^\$?\w+:(\s*//.*)?$', l):
                labels[l.split(':')[0]] = len(ins)
            elif l and not l.startswith(('//', '.', '{', '}', ')')) and l.endswith(';'):
                ins.append(l)
        best = None
        for i, t in enumerate(ins):
            mm = re.search(r'\bbra(\.uni)?\s+(\S+);', t)
            if mm and mm.group(2) in labels and labels[mm.group(2)] <= i:
                b = ins[labels[mm.group(2)]:i + 1]
                tb = ' '.join(b)
                if 'ld.shared' in tb and 'st.shared' not in tb and 'dp4a' in tb and (best is None or len(b) < len(best)):
                    best = b
        if best:
            out[name] = collections.Counter(re.sub(r'^@!?%p\d+\s+', '', x).split()[0] for x in best)
    return out
o, n = loops(sys.argv[1]), loops(sys.argv[2])
for t in o:
    if t not in n:
        continue
    co, cn = o[t], n[t]
    so, sn = sum(co.values()), sum(cn.values())
    diff = {k: cn[k] - co[k] for k in set(co) | set(cn) if cn[k] != co[k]}
    print(f"{t:7s} O {so:4d} ({so/16:5.1f}/blk)  N {sn:4d} ({sn/16:5.1f}/blk)  " + ' '.join(f"{k}:{v:+d}" for k, v in sorted(diff.items(), key=lambda x: x[1])))
