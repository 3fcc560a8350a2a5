# passloop.py SASS GR XW [CLOCK_MHZ D2D_GBS]: the one-column pass loop of each mmvq kernel
# (GR = U·R group-rows a lane per pass; XW = 12: the innermost loop that reads staged
# activations by LDS.128 and stores nothing to LDS; XW = 9, main's stride: the innermost
# loop with LDS and no STS or LDG — IQ1_M's and the IQ types' table reads are LDS too), its
# instructions per 256-weight block by pipe class, and the time a kernel running that loop
# cannot beat at 4096x14336 on 132 SMs x 4 sub-partitions:
#   issue: 1 warp instruction a clock per sub-partition;
#   alu:   integer/logic pipe, 16 lanes a clock: a warp instruction every 2 clocks;
#   fma:   IMAD/IDP/I2F and fp32 on the FMA pipes: counted at a warp instruction every 2 clocks
#          (the heavy pipe's integer rate; fp32 ops are few here).
# One loop iteration is one warp's GR group-rows per lane: 32·GR groups, 4·GR blocks.
import re, sys, collections
txt = open(sys.argv[1]).read()
gr = int(sys.argv[2])
xw = int(sys.argv[3])
mhz = float(sys.argv[4]) if len(sys.argv) > 4 else 1980.0
d2d = float(sys.argv[5]) if len(sys.argv) > 5 else 4258.0
ALU = {"LOP3", "SHF", "IADD3", "PRMT", "SGXT", "ISETP", "SEL", "FSEL", "LEA", "POPC", "FLO", "BMSK",
       "P2R", "R2P", "IMNMX", "VIMNMX", "IABS", "MOV", "CS2R", "PLOP3", "BREV", "LEA.HI", "UMOV"}
FMA = {"IMAD", "IDP", "I2FP", "I2F", "FMUL", "FFMA", "FADD", "HADD2", "HFMA2", "HMUL2", "F2I", "F2F"}
MIO = {"LD", "LDG", "LDS", "SHFL", "CCTL"}
BPB = {"q80": 272, "q20": 72, "q4k": 144, "q6k": 210, "iq2xs": 74, "iq3xxs": 98, "iq3s": 110, "iq1m": 56}
nblocks = 4096 * 14336 // 256
act = 14336 // 32 * 36
slots = 132 * 4 * mhz * 1e6  # warp-instruction issue slots a second, whole GPU
print(f"# clock {mhz:.0f} MHz, d2d {d2d:.0f} GB/s, {nblocks} blocks; per 256-weight block, warp instructions:")
print(f"{'type':7s} {'loop':>5s} {'/blk':>6s} {'alu':>6s} {'fma':>6s} {'mio':>5s} | {'issue µs':>8s} {'alu µs':>7s} {'fma µs':>7s} {'bound µs':>8s} | {'70% µs':>7s} {'bound/70%':>9s}")
for f in re.split(r'\n\s*Function : ', txt)[1:]:
    name = f.split('\n', 1)[0].strip().replace('strata_mmvq_', '')
    if name not in BPB:
        continue
    ins = [(int(m.group(1), 16), m.group(2).strip()) for m in re.finditer(r'/\*([0-9a-f]{4,})\*/\s+([^;]*);', f)]
    addr = {a: i for i, (a, _) in enumerate(ins)}
    best = None
    for i, (a, t) in enumerate(ins):
        m = re.search(r'BRA\s+.*?0x([0-9a-f]+)', t)
        if 'BRA' in t and m:
            tgt = int(m.group(1), 16)
            if tgt < a and tgt in addr:
                body = ins[addr[tgt]:i + 1]
                tb = ' '.join(x[1] for x in body)
                ok = ('LDS.128' in tb) if xw == 12 else ('LDS' in tb and 'LDG' not in tb)
                if ok and 'STS' not in tb and (best is None or len(body) < len(best)):
                    best = body
    if best is None:
        print(f"{name:7s} no pass loop found")
        continue
    c = collections.Counter(re.sub(r'^@!?U?P\w+\s+', '', x[1]).split()[0].split('.')[0] for x in best)
    n = len(best)
    k = 1.0 / (4 * gr)  # loop iterations per block
    alu = sum(v for op, v in c.items() if op in ALU) * k
    fma = sum(v for op, v in c.items() if op in FMA) * k
    mio = sum(v for op, v in c.items() if op in MIO) * k
    t_issue = n * k * nblocks / slots * 1e6
    t_alu = 2 * alu * nblocks / slots * 1e6
    t_fma = 2 * fma * nblocks / slots * 1e6
    bound = max(t_issue, t_alu, t_fma)
    t70 = (nblocks * BPB[name] + act) / (0.7 * d2d * 1e9) * 1e6
    print(f"{name:7s} {n:5d} {n*k:6.1f} {alu:6.1f} {fma:6.1f} {mio:5.1f} | {t_issue:8.2f} {t_alu:7.2f} {t_fma:7.2f} {bound:8.2f} | {t70:7.2f} {bound/t70:9.2f}   " + ' '.join(f"{op}:{v}" for op, v in c.most_common(10)))
