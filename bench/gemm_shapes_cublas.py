#!/usr/bin/env python3
"""cuBLAS BF16 on the GEMM shapes of a Tetra step bundle (the peer of
tetra-bench-gpu-gemm at the same shapes, run in the same device call).

  python3 bench/gemm_shapes_cublas.py KERNEL_BUNDLE [--filter TEXT]

For each GEMM of the bundle's manifest (`tetra compile --kernels`): M x N x K
and role, cuBLAS's time for BF16 operands with an fp32 result (Tetra's GEMMs
write fp32; `torch.mm(..., out_dtype=torch.float32)` where this PyTorch has
it, else a BF16 result, said in the table) and with a BF16 result, medians of
triton.testing.do_bench on random normal operands, TFLOP/s = 2·M·N·K / time.
Operand layouts follow the roles as Tetra stores them: Fprop X[M,K]·W[N,K]^T,
Dgrad dY[M,K]·W[K,N], Wgrad dY[K,M]^T·X[K,N].
"""
import json
import os
import sys

import torch
import triton


def main():
    args = sys.argv[1:]
    if not args:
        sys.exit(__doc__)
    bundle = args[0]
    filt = args[args.index("--filter") + 1] if "--filter" in args else ""
    manifest = json.load(open(os.path.join(bundle, "manifest.json")))
    seen = set()
    print(f"{'gemm':30s} {'M x N x K':>22s} {'fp32 out ms':>11s} {'TFLOP/s':>8s}"
          f" {'bf16 out ms':>11s} {'TFLOP/s':>8s}")
    for kernel in manifest["kernels"]:
        c = kernel["computes"]
        if filt and filt not in kernel["name"]:
            continue
        m, n, k, role = c["m"], c["n"], c["k"], c["role"]
        if (m, n, k, role) in seen:
            continue
        seen.add((m, n, k, role))
        g = torch.Generator(device="cuda").manual_seed(len(seen))
        def rand(*shape):
            return torch.randn(*shape, device="cuda", dtype=torch.bfloat16,
                               generator=g)
        if role == "fprop":
            a, b = rand(m, k), rand(n, k).t()
        elif role == "dgrad":
            a, b = rand(m, k), rand(k, n)
        else:
            a, b = rand(k, m).t(), rand(k, n)
        flops = 2.0 * m * n * k
        try:
            torch.mm(a, b, out_dtype=torch.float32)
            f32 = lambda: torch.mm(a, b, out_dtype=torch.float32)
            label = ""
        except (TypeError, RuntimeError):
            f32, label = None, " (no out_dtype)"
        t16 = triton.testing.do_bench(lambda: torch.mm(a, b), warmup=25, rep=100,
                                      return_mode="median")
        t32 = (triton.testing.do_bench(f32, warmup=25, rep=100, return_mode="median")
               if f32 else float("nan"))
        print(f"{kernel['name']:30s} {f'{m} x {n} x {k}':>22s} {t32:11.4f} "
              f"{flops / t32 / 1e9:8.1f} {t16:11.4f} {flops / t16 / 1e9:8.1f}{label}",
              flush=True)


if __name__ == "__main__":
    main()
