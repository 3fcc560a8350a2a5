# The vendor int8 GEMM ceiling for the prefill benchmarks: torch._int_mm (cuBLASLt int8,
# int32 out) on the mmq benchmark's shape and on the dense equivalents of one MoE layer's
# expert GEMMs, timed like TestBenchPrefill: CUDA events between consecutive launches,
# 10 warm-up launches, the median of 50 timed, the weight operand rotated through >= 128 MiB
# of copies so that L2 does not serve it from the previous launch.
#
#   python3 bench/device/intmm.py [OUT_FILE]
#
# mmq's benchmark is y[t][r] = sum_k W[r][k] x[t][k] with W 4096 x 14336 (rows x K) and
# T tokens: as a GEMM, A = x (M = T, K = 14336) times B = W^T (K x N, N = 4096). B is
# passed both as W.t() (W row-major, i.e. B column-major: the weight layout) and as a
# row-major K x N copy; the faster is the ceiling. TOPS counts 2 ops per product.
import statistics
import sys

import torch


def timed(f, n_warm=10, n=50):
    for i in range(n_warm):
        f(i)
    ev = [torch.cuda.Event(enable_timing=True) for _ in range(n + 1)]
    ev[0].record()
    for i in range(n):
        f(i)
        ev[i + 1].record()
    torch.cuda.synchronize()
    return statistics.median(ev[i].elapsed_time(ev[i + 1]) for i in range(n)) * 1e-3


def gemm(m, k, n, layout):
    a = torch.randint(-128, 128, (m, k), dtype=torch.int8, device="cuda")
    copies = max(1, -(-(128 << 20) // (k * n)))
    if layout == "W.t()":
        bs = [torch.randint(-128, 128, (n, k), dtype=torch.int8, device="cuda").t() for _ in range(copies)]
    else:
        bs = [torch.randint(-128, 128, (k, n), dtype=torch.int8, device="cuda") for _ in range(copies)]
    # Exactness spot check on the first launch: int32 sums of one output.
    c = torch._int_mm(a, bs[0])
    ref = int((a[0].to(torch.int64) * bs[0][:, 0].to(torch.int64)).sum())
    assert int(c[0, 0]) == ref, (int(c[0, 0]), ref)
    sec = timed(lambda i: torch._int_mm(a, bs[i % copies]))
    return sec, 2.0 * m * k * n / sec / 1e12


def main():
    out = open(sys.argv[1], "w") if len(sys.argv) > 1 else sys.stdout

    def log(s):
        print(s)
        if out is not sys.stdout:
            out.write(s + "\n")
            out.flush()

    log(f"torch {torch.__version__}, CUDA {torch.version.cuda}, {torch.cuda.get_device_name(0)}")
    log(f"{'shape':44s} {'B layout':10s} {'median us':>10s} {'TOPS':>8s}")
    for m in (512, 2048):
        for layout in ("W.t()", "row-major"):
            sec, tops = gemm(m, 14336, 4096, layout)
            log(f"{'mmq M=%d K=14336 N=4096' % m:44s} {layout:10s} {sec * 1e6:10.1f} {tops:8.1f}")
    # One MoE layer's expert GEMMs as dense GEMMs over all T*k pairs (no routing, no gather:
    # an upper bound for what a grouped vendor GEMM could do): gate+up (K = 2048, N = 2*768)
    # and down (K = 768, N = 2048).
    for t in (512, 2048):
        pairs = t * 8
        s1, _ = gemm(pairs, 2048, 1536, "W.t()")
        s2, _ = gemm(pairs, 768, 2048, "W.t()")
        ops = 6.0 * pairs * 768 * 2048
        log(f"{'moe dense-equivalent T=%d (gate+up, down)' % t:44s} {'W.t()':10s} {(s1 + s2) * 1e6:10.1f} {ops / (s1 + s2) / 1e12:8.1f}")


main()
