#!/usr/bin/env python3
"""Counts for moe_prefill's token tile at the Qwen3-30B-A3B shape under TestBenchPrefill's
routing (each token: 8 distinct experts of 128 uniformly at random, so an expert's pair count
is Binomial(T, 1/16)). Per layer: tiles (each decodes its expert's whole gate, up and down:
the decoded weight bytes), activation staging jobs (BN tokens per tile, 4 groups a K step)
and mma columns (tokens the mma runs, per tile: BN without skip, ceil(n/16)*16 with the
16-token skip, ceil(n/8)*8 with an n8 skip)."""
from math import ceil, exp, lgamma, log

E, K, H, F = 128, 8, 2048, 768
BITS = {"q80": 8.5, "q20": 2.5625, "q4k": 4.5, "q6k": 6.5625, "iq2xs": 2.3125, "iq3xxs": 3.0625, "iq3s": 3.4375, "iq1m": 1.75}


def pmf(T):
    p = K / E
    return [exp(lgamma(T + 1) - lgamma(n + 1) - lgamma(T - n + 1) + n * log(p) + (T - n) * log(1 - p)) for n in range(T + 1)]


def per_layer(T, bn, gran):
    """Expected tiles, activation jobs (tokens staged), mma columns per layer."""
    P = pmf(T)
    tiles = cols = 0.0
    for n, pn in enumerate(P):
        if pn < 1e-15:
            continue
        nt = ceil(n / bn)
        c = 0
        for i in range(nt):
            m = min(bn, n - i * bn)
            c += bn if gran == 0 else ceil(m / gran) * gran
        tiles += pn * nt
        cols += pn * c
    return E * tiles, E * tiles * bn, E * cols


def main():
    for T in (512, 2048):
        P = pmf(T)
        mean = T * K / E
        print(f"T={T}: pairs/expert mean {mean:.1f} sd {(T*K/E*(1-K/E))**0.5:.2f}; "
              f"P(n>32) {sum(P[33:]):.3f} P(n>48) {sum(P[49:]):.4f} P(n>64) {sum(P[65:]):.5f}")
        rows = [("t32 (r64t32, no skip)", 32, 0), ("t32 + 16-skip", 32, 16), ("t32 + n8 skip", 32, 8),
                ("t48 + n8 skip", 48, 8), ("t64 + 16-skip", 64, 16), ("t64 (no skip)", 64, 0)]
        base = per_layer(T, 32, 0)
        print(f"  {'tile':24s} {'tiles':>7s} {'dec. w':>7s} {'act jobs':>8s} {'mma cols':>8s}  Q6_K decoded MB")
        for name, bn, gr in rows:
            t, a, c = per_layer(T, bn, gr)
            mb = t * 3 * F * H * BITS["q6k"] / 8 / 1e6
            print(f"  {name:24s} {t:7.1f} {t/base[0]:7.3f} {a/base[1]:8.3f} {c/base[2]:8.3f}  {mb:8.0f}")
        print(f"  pairs {T*K}; t32 mma columns {base[2]:.0f} = {base[2]/(T*K):.3f} x pairs")


main()
