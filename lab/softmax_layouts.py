"""Why the first multi-row softmax kernel was slow: four variants of the one-pass kernel that
differ only in how the column offset and the overhanging rows are handled, timed against
torch.softmax, with the vector width of the loads read from the PTX.

    python lab/softmax_layouts.py      (CUDA GPU; the log goes in lab/logs)
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import triton  # noqa: E402
import triton.language as tl  # noqa: E402

from triton_guide.benchmark import gb_per_s, median_ms  # noqa: E402
from triton_guide.hardware import num_warps_for  # noqa: E402
from triton_guide.softmax import one_pass_rows, softmax_kernel  # noqa: E402


@triton.jit
def rows_kernel(input_ptr, output_ptr, input_row_stride, input_col_stride,
                output_row_stride, num_rows, num_cols, BLOCK_ROWS: tl.constexpr,
                BLOCK_SIZE: tl.constexpr, CLAMP: tl.constexpr, COL_STRIDE: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_ROWS + tl.arange(0, BLOCK_ROWS)
    cols = tl.arange(0, BLOCK_SIZE)
    if CLAMP:
        rows_read = tl.minimum(rows, num_rows - 1)
        load_mask = cols[None, :] < num_cols
    else:
        rows_read = rows
        load_mask = (rows[:, None] < num_rows) & (cols[None, :] < num_cols)
    if COL_STRIDE:
        col_offsets = cols[None, :] * input_col_stride
    else:
        col_offsets = cols[None, :]
    x = tl.load(input_ptr + rows_read[:, None] * input_row_stride + col_offsets,
                mask=load_mask, other=-float("inf")).to(tl.float32)
    numerator = tl.exp(x - tl.max(x, axis=1)[:, None])
    result = numerator / tl.sum(numerator, axis=1)[:, None]
    tl.store(output_ptr + rows[:, None] * output_row_stride + cols[None, :], result,
             mask=(rows[:, None] < num_rows) & (cols[None, :] < num_cols))


@triton.jit
def one_row_kernel(input_ptr, output_ptr, input_row_stride, input_col_stride,
                   output_row_stride, num_cols, BLOCK_SIZE: tl.constexpr):
    """The kernel before this change: one row per program, 1D."""
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_SIZE)
    mask = cols < num_cols
    x = tl.load(input_ptr + row * input_row_stride + cols * input_col_stride, mask=mask,
                other=-float("inf")).to(tl.float32)
    numerator = tl.exp(x - tl.max(x, axis=0))
    tl.store(output_ptr + row * output_row_stride + cols,
             numerator / tl.sum(numerator, axis=0), mask=mask)


def vector_width(compiled) -> str:
    widths = sorted(set(re.findall(r"ld\.global(?:\.\w+)*?\.v(\d)", compiled.asm["ptx"])))
    return "v" + "/".join(widths) if widths else "scalar"


def main():
    shapes = [("fp32", 32768, 128), ("fp32", 4096, 1024), ("fp32", 4096, 4096),
              ("fp16", 4096, 512), ("bf16", 16384, 256), ("fp16", 4096, 4096)]
    dtypes = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}
    print(torch.cuda.get_device_name(), "triton", triton.__version__)
    for name, m, n in shapes:
        x = torch.randn(m, n, device="cuda", dtype=dtypes[name])
        y = torch.empty_like(x)
        block = triton.next_power_of_2(n)
        block_rows = one_pass_rows(block)
        grid = (triton.cdiv(m, block_rows),)
        warps = num_warps_for(block * block_rows)
        nbytes = 2 * x.numel() * x.element_size()
        cells = [f"torch {gb_per_s(nbytes, median_ms(lambda: torch.softmax(x, -1))):6.0f}"]

        def package():
            return softmax_kernel[grid](x, y, x.stride(0), x.stride(1), y.stride(0), m, n,
                                        BLOCK_ROWS=block_rows, BLOCK_SIZE=block,
                                        num_warps=warps)
        def one_row():
            return one_row_kernel[(m,)](x, y, x.stride(0), x.stride(1), y.stride(0), n,
                                        BLOCK_SIZE=block, num_warps=num_warps_for(block))
        runs = {"package": package, "1D one row": one_row}
        for clamp in (True, False):
            for col_stride in (True, False):
                def run(clamp=clamp, col_stride=col_stride):
                    return rows_kernel[grid](x, y, x.stride(0), x.stride(1), y.stride(0), m,
                                             n, BLOCK_ROWS=block_rows, BLOCK_SIZE=block,
                                             CLAMP=clamp, COL_STRIDE=col_stride,
                                             num_warps=warps)
                runs[f"clamp={int(clamp)},stride={int(col_stride)}"] = run
        for label, run in runs.items():
            compiled = run()
            ok = torch.allclose(y.float(), torch.softmax(x.float(), -1), atol=1e-2)
            rate = gb_per_s(nbytes, median_ms(run))
            cells.append(f"{label} {rate:6.0f} {vector_width(compiled)}{'' if ok else ' WRONG'}")
        print(f"{name} {m}x{n} rows/prog {block_rows} warps {warps}: " + " | ".join(cells),
              flush=True)


if __name__ == "__main__":
    main()
