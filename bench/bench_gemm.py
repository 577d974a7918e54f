"""graph_ir's matrix products (graph_ir/executors/gemm.py: oneMKL when its wheel is installed) against NumPy's
`np.matmul` (the OpenBLAS its wheels bundle), one thread each, on the products of the convolutions in
bench/bench_session.py's models: im2col windows [positions, kh*kw*C] @ filter [kh*kw*C, Cout].

Usage: python -m bench.bench_gemm [--repeats 7]
"""

from __future__ import annotations

import argparse

import numpy as np

from bench.timing import median_ms_interleaved
from graph_ir.executors import blas, gemm

# (rows, inner, columns): VGG16's 3x3 layers at 64x64 in 2 MiB parts (graph_ir/executors/im2col.py), a filter
# gradient's product, a dense layer's gradient at batch 8, and a large square product.
SHAPES = [(910, 576, 64), (455, 1152, 128), (227, 2304, 256), (1152, 455, 128), (8, 4096, 4096), (1024, 1024, 1024)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    print(f"graph_ir's products: {gemm.backend()}; NumPy's: np.matmul; one thread each; median of "
          f"{args.repeats} interleaved rounds")
    print("| rows x inner x columns | graph_ir ms | NumPy ms | graph_ir GFLOP/s | NumPy GFLOP/s | NumPy/graph_ir |")
    print("| --- | --- | --- | --- | --- | --- |")
    with blas.blas_threads(1):
        for m, k, n in SHAPES:
            a = rng.standard_normal((m, k), dtype=np.float32)
            b = rng.standard_normal((k, n), dtype=np.float32)
            out = np.empty((m, n), np.float32)
            np.testing.assert_allclose(gemm.matmul(a, b), a @ b, rtol=1e-4, atol=1e-3 * np.sqrt(k))
            ms = median_ms_interleaved({"graph_ir": lambda a=a, b=b, out=out: gemm.matmul(a, b, out=out),
                                        "numpy": lambda a=a, b=b, out=out: np.matmul(a, b, out=out)}, args.repeats)
            flops = 2.0 * m * k * n
            ours, theirs = ms["graph_ir"], ms["numpy"]
            print(f"| {m} x {k} x {n} | {ours:.3f} | {theirs:.3f} | {flops / ours / 1e6:.0f} | "
                  f"{flops / theirs / 1e6:.0f} | {theirs / ours:.2f}x |")


if __name__ == "__main__":
    main()
