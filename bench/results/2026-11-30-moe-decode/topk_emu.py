# Emulates wave 0's old (butterfly of (f32, id)) and new (order keys, wave maxima) top-k
# selection on 32 lanes and compares the chosen ids, in order, on tie-heavy inputs; the new
# one's per-lane best both as a first-wins scan and as strata_moe_best's tree of u64 maxima.
import random, struct, math
def f32(x): return struct.unpack('<f', struct.pack('<f', x))[0]
def bits(x): return struct.unpack('<I', struct.pack('<f', x))[0]
def key(x):
    u = 0 if x == 0.0 else bits(x)
    return (~u & 0xffffffff) if u & 0x80000000 else (u | 0x80000000)
def unkey(k):
    u = (k & 0x7fffffff) if k & 0x80000000 else (~k & 0xffffffff)
    return struct.unpack('<f', struct.pack('<I', u))[0]
NEG = -math.inf
def old(l, ne, k, NI):
    v = [[l[ln+32*i] if ln+32*i < ne else NEG for i in range(NI)] for ln in range(32)]
    left = [sum(1<<i for i in range(NI) if ln+32*i < ne) for ln in range(32)]
    def scan(ln):
        bv, bi = NEG, 0x7fffffff
        for i in range(NI):
            if (left[ln]>>i)&1 and (v[ln][i] > bv or bi == 0x7fffffff): bv, bi = v[ln][i], ln+32*i
        return bv, bi
    best = [scan(ln) for ln in range(32)]
    out = []
    for j in range(k):
        cv = [b[0] for b in best]; ci = [b[1] for b in best]
        s = 16
        while s:
            ncv, nci = cv[:], ci[:]
            for ln in range(32):
                ov, oi = cv[ln^s], ci[ln^s]
                if ov > cv[ln] or (ov == cv[ln] and oi < ci[ln]): ncv[ln], nci[ln] = ov, oi
            cv, ci = ncv, nci; s >>= 1
        c, cvv = ci[0], cv[0]
        assert all(x == c for x in ci)
        if c < ne:
            o = c & 31
            left[o] &= ~(1 << (c >> 5)); best[o] = scan(o)
        out.append((c, cvv))
    return out
def new(l, ne, k, NI):
    kv = [[key(l[ln+32*i]) if ln+32*i < ne else key(NEG) for i in range(NI)] for ln in range(32)]
    left = [sum(1<<i for i in range(NI) if ln+32*i < ne) for ln in range(32)]
    def scan(ln):
        bh, bl = 0, 0
        for i in range(NI):
            if (left[ln]>>i)&1 and (bl == 0 or kv[ln][i] > bh): bh, bl = kv[ln][i], 1024-(ln+32*i)
        # strata_moe_best: the same as a tree of u64 maxima
        c = [(kv[ln][i] << 32 | (1024-(ln+32*i))) if (left[ln]>>i)&1 else 0 for i in range(NI)]
        c = [max(c[i], c[i+NI//2]) for i in range(NI//2)]
        s = NI//4
        while s:
            c = [max(c[i], c[i+s]) for i in range(s)] + c[s:]
            s //= 2
        assert c[0] == (bh << 32 | bl), (c[0], bh, bl)
        return bh, bl
    best = [scan(ln) for ln in range(32)]
    out = []
    for j in range(k):
        ch = max(b[0] for b in best)
        cl = max(b[1] if b[0] == ch else 0 for b in best)
        ci = 1024 - cl
        if cl != 0:
            o = ci & 31
            left[o] &= ~(1 << (ci >> 5)); best[o] = scan(o)
        out.append((ci, unkey(ch)))
    return out
rng = random.Random(5)
n = 0
for trial in range(3000):
    ne = rng.choice([1,2,5,31,32,33,64,100,128,129,200,256,300,512,700,1000,1024])
    NI = 4 if ne <= 128 else 8 if ne <= 256 else 16 if ne <= 512 else 32
    k = rng.randint(1, min(ne, 32))
    mode = rng.randrange(4)
    if mode == 0: l = [f32(rng.gauss(0, 3)) for _ in range(ne)]
    elif mode == 1: l = [float(rng.randint(-3, 3)) for _ in range(ne)]
    elif mode == 2: l = [rng.choice([0.0, -0.0, 1.0, -1.0, NEG, math.inf, f32(1e-40), f32(-1e-40)]) for _ in range(ne)]
    else: l = [rng.choice([NEG, -0.0, 0.0]) for _ in range(ne)]
    a, b = old(l, ne, k, NI), new(l, ne, k, NI)
    ia, ib = [x[0] for x in a], [x[0] for x in b]
    assert ia == ib, (ne, k, mode, ia, ib)
    # the value handed to e^(l - m): equal, or ±0 (same exp)
    for (x, y) in zip(a, b):
        assert x[1] == y[1] and (bits(x[1]) == bits(y[1]) or x[1] == 0.0), (x, y)
    n += 1
print("ok", n, "cases: ids identical in order; chosen values equal (±0 only where 0)")
