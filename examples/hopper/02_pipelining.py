"""
Pipelining and warp specialisation
==================================

The tile loop of the :ref:`matrix product lesson <sphx_glr_auto_examples_core_kernels_01_matmul.py>`
and of the attention forward pass, with three launch knobs changed one at a time, each
measured as a fraction of the vendor's kernel (cuBLAS, cuDNN's attention) in the same run.

You will learn:

* what ``num_stages`` does to a loop that loads tiles and multiplies them, and why each
  stage costs shared memory;
* how many stages fit an SM's 228 KiB, and how many programs an SM then holds;
* what ``num_warps`` and ``tl.range(..., warp_specialize=True)`` change, and what the
  compiler made of them on this GPU;
* where a knob buys nothing, and why.

On a GPU build the timings are live; on a CPU build they are the ones recorded on an H100
and an H200, and the first line printed below says which.
"""

# %%
import functools

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from triton_guide import attention_reference, matmul_reference, runtime
from triton_guide.benchmark import (Benchmark, compute_bound_sweep, print_share_and_gain,
                                    random_inputs_by_setting)
from triton_guide.pipelining import (ATTENTION_TILE, MATMUL_TILE, check_variants,
                                     launch_attention, launch_matmul, print_outcomes,
                                     programs_per_sm, runnable, stage_bytes,
                                     warp_specialize_refusal)
from triton_guide.testing import tolerance

torch.manual_seed(0)  # the same inputs, so the same printed numbers, in every build
bench = Benchmark()
print(bench.stamp())
device = runtime.device()

# %%
# One loop, three knobs
# ---------------------
# The kernel is the lesson's: one program per 128 x 128 tile of c, a loop over K that
# multiplies a 128 x 64 tile of a by a 64 x 128 tile of b, here fetched through tensor
# descriptors (:ref:`the previous page <sphx_glr_auto_examples_hopper_01_matmul_full_speed.py>`):
#
# .. literalinclude:: /../triton_guide/pipelining.py
#    :pyobject: matmul_pipelined_kernel
#
# Nothing in it says when the tiles arrive. Three launch knobs decide:
#
# * ``num_stages``: with 1, each iteration asks for its tiles and waits for them, hundreds
#   of cycles in which the tensor cores idle, before multiplying. With ``s`` stages the
#   compiler issues the copies ``s - 1`` iterations ahead, into ``s`` buffers in shared
#   memory (the check below prints what the compiler allocated), so the wait of one
#   iteration overlaps the products of the ones before.
# * ``num_warps``: the warps (32 threads each) that share one program's tile. Four warps,
#   one *warpgroup*, issue Hopper's ``wgmma`` over the whole 128 x 128 tile; eight form two
#   warpgroups of 64 rows each, so each thread holds half as much of the accumulator.
# * ``warp_specialize`` (on ``tl.range``): asks the compiler to hand the copies to warps of
#   their own, which run ahead of the warps that multiply. Triton's documentation of
#   ``tl.range`` says that only Blackwell GPUs support it, and only on simple matmul loops;
#   its compiler also has a pass for it on Hopper. This page tries, and prints what the
#   compiler made of it.
#
# Each stage holds one tile of a and one of b. What that costs, from the tile sizes alone
# (an H100 and an H200 have 228 KiB of shared memory per SM, at most 227 for one program;
# on a GPU build the page asks the GPU):

per_sm, per_program = 228 * 1024, 227 * 1024  # NVIDIA's Hopper tuning guide
if device.type == "cuda":  # this GPU's own
    properties = torch.cuda.get_device_properties(device)
    per_sm = properties.shared_memory_per_multiprocessor
    per_program = properties.shared_memory_per_block_optin
block_m, block_n, block_k = MATMUL_TILE
matmul_stage = stage_bytes([(block_m, block_k), (block_k, block_n)], 2)  # float16
attn_m, attn_n = ATTENTION_TILE
attention_q = stage_bytes([(attn_m, 128)], 2)  # q, loaded once, head_dim 128
attention_stage = stage_bytes([(attn_n, 128), (attn_n, 128)], 2)  # a k and a v tile
print(f"matmul: {matmul_stage // 1024} KiB a stage; attention: {attention_q // 1024} KiB of "
      f"q and {attention_stage // 1024} KiB a stage")
print("programs per SM, by stages " + "".join(f"{s:>5}" for s in range(1, 9)))
single_from = {}  # the stage count from which an SM holds a single program
for name, fixed, stage in (("matmul", 0, matmul_stage),
                           ("attention", attention_q, attention_stage)):
    fits = [programs_per_sm(fixed + s * stage, per_sm, per_program) for s in range(1, 9)]
    print(f"{name:<27}" + "".join(f"{n:>5}" for n in fits))
    single_from[name] = fits.index(1) + 1
    print(f"  {name}: one program from {fits.index(1) + 1} stages on, none from "
          f"{fits.index(0) + 1}")

# %%
# Zero programs: the stages do not fit, and the launch fails. Where an SM holds one
# program, every wait of that program must be hidden by its own stages: no other program
# runs in the meantime. More stages can then buy latency hiding only; they cannot
# buy more programs. The compiler may add buffers of its own (the output tile's layout
# change, barriers), which the check below prints from the compiled kernel.
#
# Correct with every knob
# -----------------------
# Each variant at each stage count, against a float64 product, at a size that is not a
# multiple of the tile. On a GPU each cell shows the shared memory the compiler allocated
# (``ws`` where it split the loop into warp partitions) or what the launch raised; under the
# interpreter, which compiles nothing and ignores the knobs, the relative error.

STAGES = [1, 2, 3, 4, 5]
matmul_variants = {"4 warps": dict(num_warps=4), "8 warps": dict(num_warps=8),
                   "4 warps, warp-specialised": dict(num_warps=4, warp_specialize=True)}
# Tried first in a child process with a time limit: a compiler that never finishes with
# warp_specialize, or a first launch that never returns, would otherwise stop this page,
# and a site build with it.
refusal = warp_specialize_refusal()
if refusal:
    print(f"warp_specialize left out on this GPU: {refusal}")
    matmul_variants = {name: knobs for name, knobs in matmul_variants.items()
                       if not knobs.get("warp_specialize")}
m, n, k = runtime.pick(interpreter=(150, 131, 200), gpu=(1031, 517, 2063))
a = torch.randn(m, k, device=device, dtype=torch.float16)
b = torch.randn(k, n, device=device, dtype=torch.float16)
print(f"matmul {m} x {n} x {k}, float16:")
matmul_outcomes = check_variants(launch_matmul, (a, b), matmul_reference(a.double(), b.double()),
                                 tolerance(torch.float16, tensor_cores=True),
                                 matmul_variants, STAGES)
print_outcomes(matmul_outcomes)

# %%
# What each knob buys on the matmul
# ---------------------------------
# Every variant that compiled at every stage count, on a 4096 x 4096 x 4096 float16
# product, beside cuBLAS (``torch.matmul``), which does not depend on the stage count: a
# flat line. ``random_inputs_by_setting`` gives each a call on fresh inputs with x as its
# ``num_stages``; ``compute_bound_sweep`` times it in GPU time on enough copies of the
# inputs to overrun L2 (``cold_bytes``), in TFLOP/s under the GEMM ceiling
# (:doc:`/measuring`).

size = 4096
matmuls = {name: functools.partial(launch_matmul, **matmul_variants[name])
           for name in runnable(matmul_outcomes)}
matmuls["cuBLAS"] = lambda a, b, num_stages: matmul_reference(a, b)  # no stages to set
matmul_runs = compute_bound_sweep(bench, "matmul by stages", STAGES, random_inputs_by_setting(
    matmuls, "num_stages", (size, size), (size, size), dtype=torch.float16),
    lambda _: 2 * size**3, cold_bytes=lambda _: 2 * size * size * 2,  # a and b, float16
    label="num_stages", xlabel="num_stages (4096^3, float16)", logx=False)
matmul_runs.plot()

# %%
# Each variant's best and worst stage count as a fraction of cuBLAS; in brackets, what
# its best stage count gained over one stage; last, what the step to the stage count
# where an SM comes down to one program (printed above) changed. Below 1.00x there, the
# rate dropped:

print_share_and_gain(matmul_runs, "cuBLAS", step_to=single_from["matmul"])

# %%
# The attention forward
# ---------------------
# The same knobs on the forward pass of the :ref:`flash attention lesson
# <sphx_glr_auto_examples_core_kernels_03_flash_attention.py>`, without its masks: each
# program keeps 128 query rows and walks the keys 64 at a time, two products and a softmax
# update per iteration, so a stage holds a tile of k and one of v:
#
# .. literalinclude:: /../triton_guide/pipelining.py
#    :pyobject: attention_pipelined_kernel

attention_variants = {"4 warps": dict(num_warps=4), "8 warps": dict(num_warps=8),
                      "8 warps, warp-specialised": dict(num_warps=8, warp_specialize=True)}
if refusal:
    attention_variants.pop("8 warps, warp-specialised")
ATTENTION_STAGES = [1, 2, 3, 4]
shape = runtime.pick(interpreter=(1, 2, 150, 128), gpu=(2, 4, 1031, 128))
q, k, v = (torch.randn(shape, device=device, dtype=torch.float16) for _ in range(3))
print(f"attention {shape} (batch, heads, seq, head_dim), float16:")
attention_outcomes = check_variants(
    launch_attention, (q, k, v), attention_reference(q.double(), k.double(), v.double()),
    tolerance(torch.float16, tensor_cores=True), attention_variants, ATTENTION_STAGES)
print_outcomes(attention_outcomes)

# %%
# What each knob buys on attention
# --------------------------------
# Timed at 4 x 32 heads x 4096 x 128 in float16, the flash attention lesson's size, beside
# ``scaled_dot_product_attention`` on its cuDNN backend, each call as a program makes it.

batch, heads, seq, head_dim = 4, 32, 4096, 128


def cudnn(q, k, v, num_stages):  # the stage count is not cuDNN's to set
    with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
        return F.scaled_dot_product_attention(q, k, v)


attentions = {name: functools.partial(launch_attention, **attention_variants[name])
              for name in runnable(attention_outcomes)} | {"SDPA cuDNN": cudnn}
qkv = (batch, heads, seq, head_dim)
attention_runs = compute_bound_sweep(
    bench, "attention by stages", ATTENTION_STAGES, random_inputs_by_setting(
        attentions, "num_stages", qkv, qkv, qkv, dtype=torch.float16, warm=True),
    lambda _: 4 * batch * heads * seq**2 * head_dim, label="num_stages",
    xlabel="num_stages (4 x 32 x 4096 x 128, float16)", logx=False)
attention_runs.plot()
print_share_and_gain(attention_runs, "SDPA cuDNN", step_to=single_from["attention"])

# %%
# Takeaways
# ---------
# How to read the lines under the plots: where one stage is far below two, the copies'
# latency was exposed and a second buffer hid it; where the line flattens, the copies
# already arrive before they are needed and more buffers add nothing. At the stage count
# where an SM comes down to one program (the last figure of each line), a drop means the
# second program had been hiding waits too; no drop, that the stages hide them alone.
#
# A stage is a buffer: it hides one more copy's wait, until shared memory runs out or
# the SM holds fewer programs. Measure each knob against the vendor's kernel in the same
# run, and read what the compiler made of it before believing a knob did anything.
#
# Used here: :func:`triton_guide.pipelining.launch_matmul`,
# :func:`triton_guide.pipelining.launch_attention`,
# :func:`triton_guide.pipelining.check_variants`,
# :func:`triton_guide.pipelining.stage_bytes`,
# :func:`triton_guide.pipelining.programs_per_sm`,
# :class:`triton_guide.benchmark.Benchmark`,
# :func:`triton_guide.benchmark.compute_bound_sweep`,
# :func:`triton_guide.benchmark.random_inputs_by_setting`,
# :func:`triton_guide.benchmark.print_share_and_gain`.
