"""Where copying ragged inputs pays: matmul of rows that cannot be read 16 bytes at a time
(K odd), timed with the copies ``matmul`` makes (``row_aligned`` for its descriptor kernel on
GPUs with TMA, which also writes c in padded rows and copies it out, as N is odd here;
``aligned_copies`` for its pointer kernel elsewhere) and without them (the pointer kernel
on the inputs as they are), against cuBLAS.

    python lab/matmul_copy_threshold.py      (CUDA GPU; the log goes in lab/logs)

``triton_guide.matmul`` copies when a product has at least ``COPY_MIN_FLOPS`` FLOPs; this
script sets that number to 0 (always copy) and to infinity (never) in turn. GPU time, the
copies included, on rotating inputs (cold L2).
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import triton_guide.matmul  # noqa: E402
from triton_guide.benchmark import cold_matmul_inputs, matmul_tflop_per_s  # noqa: E402
from triton_guide.testing import relative_error  # noqa: E402

module = sys.modules["triton_guide.matmul"]  # the package re-exports the function as matmul
SIZES = [127, 255, 383, 511, 767, 1023, 1535, 2047, 4095]


def main() -> None:
    print(torch.cuda.get_device_name(), "; COPY_MIN_FLOPS =", module.COPY_MIN_FLOPS)
    print(f"{'M x N x K':<20} {'GFLOP':>8} {'copy':>8} {'no copy':>8} {'cuBLAS':>8}  TFLOP/s")
    default = module.COPY_MIN_FLOPS
    for dtype in (torch.float16,):
        for n in SIZES:
            m, n_, k = n, n + 2, n + 4  # k odd: a's rows are never 16-byte aligned
            pairs = cold_matmul_inputs(m, n_, k, dtype)
            a, b = pairs[0]
            expected = a.double() @ b.double()
            flops = 2 * m * n_ * k
            rates = {}
            for name, threshold in (("copy", 0), ("no copy", math.inf)):
                module.COPY_MIN_FLOPS = threshold
                error = relative_error(module.matmul(a, b), expected)
                assert error < 1e-2, (name, error)
                rates[name] = matmul_tflop_per_s(module.matmul, pairs)
            module.COPY_MIN_FLOPS = default
            rates["cuBLAS"] = matmul_tflop_per_s(torch.matmul, pairs)
            print(f"{f'{m}x{n_}x{k}':<20} {flops / 1e9:8.2f} " +
                  " ".join(f"{rates[c]:8.1f}" for c in ("copy", "no copy", "cuBLAS")),
                  flush=True)
            del pairs, a, b
            torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
