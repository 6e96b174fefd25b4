"""Counting work and memory traffic: the FLOPs and bytes of this package's ops, a counter of
the bytes a chain of PyTorch operations moves, and a kernel that reads a working set of
chosen size over and over (to measure each level of the memory hierarchy).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
import triton
import triton.language as tl
from torch.utils._python_dispatch import TorchDispatchMode

from .validation import check_contiguous, check_tensor


@dataclass(frozen=True)
class Cost:
    """The arithmetic an op does and the bytes it must move at least (each input read
    once, each output written once)."""

    flops: float
    bytes: float

    @property
    def intensity(self) -> float:
        """Arithmetic intensity: FLOPs per byte moved."""
        return self.flops / self.bytes


def vector_add_cost(n: int, element_size: int = 4) -> Cost:
    return Cost(flops=n, bytes=3 * n * element_size)


def softmax_cost(rows: int, cols: int, element_size: int = 4) -> Cost:
    # Per element: compare for the max, subtract, exp, add to the sum, divide.
    return Cost(flops=5 * rows * cols, bytes=2 * rows * cols * element_size)


def matmul_cost(m: int, n: int, k: int, element_size: int = 2) -> Cost:
    return Cost(flops=2 * m * n * k, bytes=(m * k + k * n + m * n) * element_size)


def attention_cost(batch: int, heads: int, seq: int, head_dim: int,
                   element_size: int = 2, causal: bool = False) -> Cost:
    """Forward pass: two products of (seq x seq x head_dim) per head; q, k, v, out moved."""
    flops = 4 * batch * heads * seq * seq * head_dim * (0.5 if causal else 1.0)
    return Cost(flops=flops, bytes=4 * batch * heads * seq * head_dim * element_size)


class _ByteCounter(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.ops: list[tuple[str, int, int]] = []  # (op name, bytes read, bytes written)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        result = func(*args, **(kwargs or {}))

        def tensors(value):
            if isinstance(value, torch.Tensor):
                return [value]
            if isinstance(value, (list, tuple)):
                return [t for item in value for t in tensors(item)]
            return []

        read = sum(t.numel() * t.element_size() for t in tensors(list(args)))
        written = sum(t.numel() * t.element_size() for t in tensors(result))
        self.ops.append((func.__name__, read, written))
        return result


def count_bytes(fn: Callable[[], object]) -> list[tuple[str, int, int]]:
    """Run ``fn()`` and list, for every PyTorch operation it makes, ``(name, bytes read,
    bytes written)``: the traffic of each operation when its tensors live in memory.

    Counts tensor arguments and results as whole tensors; a view costs nothing to make, but
    its later reads are counted by the operation that reads it.
    """
    with _ByteCounter() as counter:
        fn()
    views = {"view", "_unsafe_view", "t", "transpose", "expand", "unsqueeze", "squeeze",
             "detach", "alias", "slice", "select"}
    return [op for op in counter.ops if op[0].split(".")[0] not in views]


@triton.jit
def read_working_set_kernel(
    x_ptr,  # the working set: num_blocks * BLOCK_SIZE float32
    partial_ptr,  # one float32 per program: the sum of what it read
    num_blocks,  # blocks in the working set; program p reads block p % num_blocks
    BLOCK_SIZE: tl.constexpr,
):
    program_id = tl.program_id(axis=0)
    block = program_id % num_blocks
    offsets = block.to(tl.int64) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    tl.store(partial_ptr + program_id, tl.sum(tl.load(x_ptr + offsets), axis=0))


READ_BLOCK = 4096


def read_working_set(x: torch.Tensor, passes: int) -> torch.Tensor:
    """Read all of ``x`` ``passes`` times in one launch; return each program's sum.

    ``x``: contiguous float32 whose length is a multiple of ``READ_BLOCK``. Programs run
    roughly in order, so pass ``i + 1`` finds in the L2 cache what pass ``i`` left there
    when ``x`` fits in it, and must fetch from HBM again when it does not.
    """
    x = check_tensor("x", x, dtypes=(torch.float32,), ndim=1)
    check_contiguous("x", x)
    if x.numel() % READ_BLOCK:
        raise ValueError(f"x has {x.numel()} elements; use a multiple of {READ_BLOCK}")
    if passes < 1:
        raise ValueError(f"passes must be at least 1, got {passes}")
    num_blocks = x.numel() // READ_BLOCK
    partial = torch.empty(num_blocks * passes, device=x.device, dtype=torch.float32)
    read_working_set_kernel[(num_blocks * passes,)](x, partial, num_blocks,
                                                    BLOCK_SIZE=READ_BLOCK)
    return partial

