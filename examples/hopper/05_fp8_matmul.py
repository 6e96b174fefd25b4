"""
FP8 matmul: e4m3 values, their scales, and what goes wrong
==========================================================

Hopper's tensor cores multiply 8-bit floating-point numbers (FP8) faster than 16-bit
ones (step 6 measures how much), and an FP8 matrix takes half the memory. An 8-bit
number holds very little, so an FP8 matrix always travels with a *scale*, and most FP8
bugs are scale bugs. This page builds the product one idea at a time, each cell run on
the CPU too, and prints what each choice costs in accuracy against a float64 product.

You will learn:

* what ``float8_e4m3fn`` can hold: its largest value, its spacing, its smallest numbers;
* why a matrix is stored as FP8 values times a float32 scale, and when one scale for the
  whole matrix is not enough (one per row, one per column);
* the classic mistakes, with their numbers: no scale, a scale taken from another tensor,
  a scale forgotten or applied twice;
* the kernel: FP8 tiles into ``tl.dot``, the scales applied once to the finished tile;
* its error next to bfloat16's, and its speed against ``torch._scaled_mm`` (PyTorch's
  FP8 product: cuBLAS, or CUTLASS for per-row scales) and a bfloat16 cuBLAS product.

The kernel is :func:`triton_guide.fp8_matmul.fp8_matmul`. On a GPU build everything runs
live; on a CPU build the kernel runs in the Triton interpreter on small sizes, and the
timings are those recorded on a GPU, if any (the first line printed below says which).
"""

# %%
import math

import torch

from triton_guide import runtime
from triton_guide.benchmark import (Benchmark, on_cold_copies, print_ratio_range,
                                    print_share_range, tflop_per_s)
from triton_guide.fp8_matmul import (E4M3_MAX, FP8, dequantize_fp8, fp8_matmul,
                                     fp8_matmul_reference, quantize_fp8)
from triton_guide.testing import assert_close, relative_error

torch.manual_seed(0)  # the same inputs, so the same printed numbers, in every build
bench = Benchmark()
print(bench.stamp())
device = runtime.device()
# whether FP8 products run here: the interpreter computes them in numpy; on a GPU, FP8
# tensor cores (and torch._scaled_mm) need compute capability 8.9 or later (sm_89: Ada,
# then Hopper's sm_90)
has_fp8 = device.type == "cpu" or torch.cuda.get_device_capability(device) >= (8, 9)

# %%
# Step 1: what e4m3 can hold
# --------------------------
# ``torch.float8_e4m3fn`` has 1 sign bit, 4 exponent bits and 3 mantissa bits, and no
# infinity (the ``fn``: finite, plus NaN). Three mantissa bits mean 8 values in each
# binade ``[2^e, 2^(e+1))``, a step of ``2^e / 8``: a relative step of ``2^-3``, so a
# value rounds to within ``2^-4`` of itself. All 256 bit patterns, read as e4m3:

values = torch.arange(256, dtype=torch.uint8).view(FP8).float()
finite = values[torch.isfinite(values)]
positive = finite[finite > 0].unique()
print(f"{len(finite)} finite values ({256 - len(finite)} NaN patterns), "
      f"{len(positive)} positive: from {positive.min().item():g} (2^-9) to "
      f"{positive.max().item():g}")
for low in (2.0**-9, 2.0**-6, 1.0, 256.0):
    binade = positive[(positive >= low) & (positive < 2 * low)]
    print(f"  [{low:g}, {2 * low:g}): {len(binade)} value(s), "
          f"{', '.join(f'{v:g}' for v in binade[:4].tolist())}"
          + (f", ... {binade[-1].item():g}" if len(binade) > 4 else ""))
smallest_normal = torch.finfo(FP8).smallest_normal
print(f"smallest normal {smallest_normal:g} (2^-6); below it the subnormals, evenly "
      f"{positive.min().item():g} apart, keep fewer significant bits")
x = torch.exp(torch.empty(100_000).uniform_(-4.0, 6.0))  # magnitudes 0.018 to 403
rounding = ((x.to(FP8).float() - x).abs() / x)
print(f"rounding to e4m3, 100,000 values in the normal range: largest relative "
      f"error {rounding.max().item():.4f} (2^-4 = {2**-4}), mean "
      f"{rounding.mean().item():.4f}")
print("a few casts:", ", ".join(f"{v:g} -> {torch.tensor(v).to(FP8).item():g}"
                                for v in (0.1, 1.06, 1.07, 300.0, 0.001, 0.0009)))

# %%
# The top binade stops at 448: its eighth value, 480, would be the pattern
# ``0 1111 111``, which e4m3fn spends on NaN. Near 1 the step is 0.125, near 300 it is
# 32, and 0.0009, under half the smallest subnormal, becomes 0.
#
# Step 2: scales, per tensor or per row
# -------------------------------------
# The values of a real matrix rarely all lie between 2^-6 and 448, so a matrix is stored as
# FP8 values and a float32 scale, ``x ≈ x_fp8 * scale``, with ``scale = amax / 448``:
# the largest magnitude lands on 448, the rest keep as many bits as the range allows
# (:func:`~triton_guide.fp8_matmul.quantize_fp8`). One scale per tensor is the
# simplest. But activations often have a few rows (tokens) far larger than the rest;
# with one scale, the ordinary rows are divided by the outliers' amax and slide down
# the exponent range, into the subnormals and then to zero. One scale per row keeps
# each row's largest value at 448. Here one row in 8 is multiplied by a spread of
# 10^2 to 10^6; the errors are those of the other, ordinary rows, against float64,
# with the share of their FP8 values below 2^-6 (subnormal or zero) and at zero. From
# here on an "error" is over a whole tensor: ``|got - want| / |want|``, both norms over
# every element (``relative_error``), not the largest error of one element as above:

M, K = 64, 256
base = torch.randn(M, K, device=device)
ordinary = torch.arange(M, device=device) % 8 != 0
print(f"{'spread':<8}" + f"{'per tensor: error':>19}{'< 2^-6':>8}{'zero':>7}"
      + f"{'per row: error':>19}{'< 2^-6':>8}{'zero':>7}")
row_errors = {}  # power of 10 -> (per-tensor, per-row) error of the ordinary rows
for power in (2, 3, 4, 5, 6):
    a = torch.where(ordinary[:, None], base, base * 10.0**power)
    line = f"{f'10^{power}':<8}"
    for per in ("tensor", "row"):
        a_fp8, scale = quantize_fp8(a, per=per)
        kept = a_fp8.float()[ordinary].abs()
        error = relative_error(dequantize_fp8(a_fp8, scale)[ordinary], a[ordinary])
        row_errors.setdefault(power, []).append(error)
        below = (kept < smallest_normal).float().mean().item()
        line += f"{error:19.3f}{below:8.1%}{(kept == 0).float().mean().item():7.1%}"
    print(line)

# %%
# Four exponent bits span about 2^18 between the smallest subnormal and 448, so one
# scale absorbs a spread of 100 almost for free, and at 1000 the subnormals barely
# show. At 10^4 most ordinary values are subnormal and their error grows by half; at
# 10^5 about half are zero, at 10^6 all. Per-row scaling is the same at every spread.
#
# The right operand b is scaled per *column*: a scale may vary along M (rows of a) and
# along N (columns of b), but not along K, because it has to come out of the sum over
# K (step 4). ``quantize_fp8(b, per="column")`` also returns b stored column by column,
# the order in which Hopper's tensor cores take FP8 operands:

b_fp8, scale_b = quantize_fp8(torch.randn(K, 48, device=device), per="column")
print(f"b: {tuple(b_fp8.shape)} {b_fp8.dtype}, strides {b_fp8.stride()} (by columns); "
      f"scale_b {tuple(scale_b.shape)} {scale_b.dtype}")

# %%
# Step 3: the mistakes
# --------------------
# **No scale, or values past 448.** Casting straight to FP8 puts every value past 448
# out of range, and what a cast does with one depends on the build: PyTorch's own
# conversion routine (c10) has long made anything past 464 NaN, and some builds
# saturate to 448 instead (:func:`~triton_guide.fp8_matmul.quantize_fp8`'s docstring).
# What this build's cast does, on this build's device:


def cast_with(x, scale):  # what quantize_fp8 does, with a scale given: clamp, then cast
    return (x / scale).clamp(-E4M3_MAX, E4M3_MAX).to(FP8)


edge = torch.tensor([448.0, 464.0, 470.0, 480.0, 1000.0, float("inf")], device=device)
for name, cast in ((f"cast, torch {torch.__version__} on {device.type}", edge.to(FP8)),
                   ("clamped first, any build", cast_with(edge, 1.0))):
    print(f"{name:<28}: " + ", ".join(
        f"{v:g} -> {c:g}" for v, c in zip(edge.tolist(), cast.float().tolist())))
x = 300 * torch.randn(1024, device=device)  # activations with an amax in the thousands
unscaled = x.to(FP8).double()
number = unscaled.isfinite()
past = (x.abs() > E4M3_MAX).float().mean().item()
print(f"x = 300 * randn cast without a scale: {past:.1%} of it past 448, "
      f"{(~number).sum().item()} NaN, relative error "
      f"{relative_error(unscaled[number], x[number]):.3f} (NaN left out); with its "
      f"scale: {relative_error(dequantize_fp8(*quantize_fp8(x)), x):.3f}")

# %%
# **A scale from another tensor.** A scale calibrated on one tensor and applied to
# another is wrong by their ratio of amax. Weights (``0.02 * randn``) and activations
# (``3 * randn``), each cast with its own scale and with the other's:

weights = 0.02 * torch.randn(4096, device=device)
activations = 3 * torch.randn(4096, device=device)
scale_w, scale_x = quantize_fp8(weights)[1], quantize_fp8(activations)[1]
for name, t, own, other in (("activations", activations, scale_x, scale_w),
                            ("weights", weights, scale_w, scale_x)):
    right = relative_error(dequantize_fp8(cast_with(t, own), own), t)
    wrong = cast_with(t, other)
    clamped = (wrong.float().abs() == E4M3_MAX).float().mean().item()
    error = relative_error(dequantize_fp8(wrong, other), t)
    print(f"{name}: own scale, error {right:.3f}; the other's "
          f"({(other / own).item():.3g}x): error {error:.3f}, {clamped:.0%} at 448")

# %%
# A scale too small (the weights' for the activations) clamps nearly everything; one too
# large only pushes values toward the subnormals, which costs nothing until it pushes
# them there.
#
# **A scale forgotten, or applied twice.** The FP8 values alone stand for ``x / scale``.
# A product that leaves out the scales, or multiplies by them once more, is off by the
# same factor everywhere, ``scale_a * scale_b`` or its inverse:

a, b = torch.randn(96, 160, device=device), torch.randn(160, 80, device=device)
(a_fp8, scale_a), (b_fp8, scale_b) = quantize_fp8(a), quantize_fp8(b)
right = fp8_matmul_reference(a_fp8, b_fp8, scale_a, scale_b)
truth = a.double() @ b.double()
scales = (scale_a * scale_b).item()
print(f"scale_a * scale_b = {scales:.3g}; error against float64, scaled once: "
      f"{relative_error(right, truth):.3f}")
factors = {}
for name, c in (("forgotten", a_fp8.double() @ b_fp8.double()),
                ("applied twice", right * scales)):
    factors[name] = (c / right).median().item()
    print(f"  scales {name}: every value {factors[name]:.3g} times the right one, "
          f"error {relative_error(c, truth):.3g}")

# %%
# Step 4: the kernel
# ------------------
# Each term of row i of ``c = (a_fp8 * scale_a) @ (b_fp8 * scale_b)`` carries
# ``scale_a[i] * scale_b[j]``, the same along K, so the scales come out of the sum:
# ``c[i, j] = scale_a[i] * scale_b[j] * sum_k a_fp8[i, k] * b_fp8[k, j]``. The kernel is
# the lesson's tiled matmul with FP8 tiles: ``tl.dot`` multiplies them into a float32
# accumulator and the scales multiply the finished tile once, after the K loop and before
# the store (the part of a matmul kernel called its *epilogue*). Applied inside the loop
# they would cost a multiply of the whole tile per K step, and the tensor cores would no
# longer see FP8 values. ``FAST_ACCUMULATION`` leaves the whole sum to the tensor cores'
# own FP8 accumulator, which keeps fewer bits than float32 (``torch._scaled_mm``'s
# ``use_fast_accum``); by default each K step's partial sum is added in float32.
# ``GROUP_SIZE_M`` is the grouped tile order of the
# :ref:`matmul page <sphx_glr_auto_examples_core_kernels_01_matmul.py>`, unchanged.
#
# .. literalinclude:: /../triton_guide/fp8_matmul.py
#    :pyobject: fp8_matmul_kernel
#
# Both facts the kernel rests on, checked: every product of two e4m3 values is exact in
# float32 (two 4-bit significands make at most 8 bits), and scaling after the sum gives
# the product of the scaled matrices, per row of a and column of b, up to rounding:

e4m3 = values[torch.isfinite(values)].double()
products = e4m3[:, None] * e4m3[None, :]
print(f"{products.numel():,} products of two e4m3 values, exact in float32: "
      f"{torch.equal(products.float().double(), products)}")
a, b = torch.randn(40, 72, device=device), torch.randn(72, 24, device=device)
(a_fp8, scale_a), (b_fp8, scale_b) = quantize_fp8(a, "row"), quantize_fp8(b, "column")
scaled_first = dequantize_fp8(a_fp8, scale_a) @ dequantize_fp8(b_fp8, scale_b)
scaled_after = (a_fp8.double() @ b_fp8.double()) * scale_a.double() * scale_b.double()
print(f"scales before the sum against after it: relative difference "
      f"{relative_error(scaled_after, scaled_first):.1e} (float64 rounding)")

# %%
# Step 5: checked against float64
# --------------------------------
# At sizes that no tile divides (and on a GPU one large square), per tensor and per
# row/column, three errors: the kernel against float64 of its own FP8 inputs (float32
# output: what the accumulation loses), then, both with bfloat16 outputs, FP8 and a
# bfloat16 product against float64 of the float32 matrices (what the 8-bit inputs
# lose). b is stored by columns, as the kernel and ``torch._scaled_mm`` read it.


def fp8_operands(a, b, per):  # per "tensor", or "row": a per row and b per column
    (a_fp8, scale_a), (b_fp8, scale_b) = quantize_fp8(a, per), quantize_fp8(
        b, "column" if per == "row" else per)
    return a_fp8, b_fp8, scale_a, scale_b


shapes = runtime.pick(interpreter=[(77, 45, 130), (33, 97, 257)],
                      gpu=[(1031, 517, 2063), (4096, 4096, 4096)])
fp8_errors, bf16_errors = [], []
for m, n, k in shapes if has_fp8 else []:
    a, b = torch.randn(m, k, device=device), torch.randn(n, k, device=device).t()
    truth = a.double() @ b.double()
    bf16 = relative_error(a.bfloat16() @ b.bfloat16(), truth)
    for per in ("tensor", "row"):
        operands = fp8_operands(a, b, per)
        own = assert_close(fp8_matmul(*operands, out_dtype=torch.float32),
                           fp8_matmul_reference(*operands),
                           rtol=runtime.pick(interpreter=1e-5, gpu=2e-3))
        fp8_errors.append(relative_error(fp8_matmul(*operands), truth))
        bf16_errors.append(bf16)
        ratio = fp8_errors[-1] / bf16
        print(f"M x N x K {m} x {n} x {k}, per {per:<6}: kernel against its FP8 inputs "
              f"{own:.1e}; against float64 of the float32 inputs: FP8 "
              f"{fp8_errors[-1]:.4f}, bfloat16 {bf16:.4f} ({ratio:.0f}x)")
if not has_fp8:
    print("Not run: this GPU has no FP8 tensor cores (sm_89 or later).")

# %%
# Against its own FP8 inputs the kernel loses only what its sum rounds (in float32; on
# a GPU also in the tensor cores' partial sums). The 8-bit inputs themselves cost an
# order of magnitude more than bfloat16's: 3 stored mantissa bits against 7, whatever
# the scaling, on inputs whose rows are alike.
#
# Step 6: speed
# -------------
# GPU time (each call on copies of the inputs too large together for L2,
# :doc:`/measuring`) of the kernel per tensor and per row/column, ``torch._scaled_mm``
# on the same FP8 operands (default accumulation, bfloat16 output), and a bfloat16
# cuBLAS product (``a @ b``), at one shape no tile divides and two squares. The ceiling
# drawn is cuBLAS's *bfloat16* rate: FP8 rates are stated against a 16-bit roof, which
# an FP8 product can pass.

sizes = {"3000x4000x2000": (3000, 4000, 2000), "4096^3": (4096, 4096, 4096),
         "8192^3": (8192, 8192, 8192)}


def scaled_mm(a_fp8, b_fp8, scale_a, scale_b):
    return torch._scaled_mm(a_fp8, b_fp8, scale_a, scale_b, out_dtype=torch.bfloat16)


calls = {f"{name}, per {per}": (fn, per) for name, fn in
         (("ours", fp8_matmul), ("_scaled_mm", scaled_mm)) for per in ("tensor", "row")}
calls["cuBLAS bf16"] = (torch.matmul, "bf16")


def one_call(fn, per, size):  # fn on fresh inputs of the size, b stored by columns
    m, n, k = sizes[size]
    a, b = torch.randn(m, k, device=device), torch.randn(n, k, device=device).t()
    args = (a.bfloat16(), b.bfloat16()) if per == "bf16" else fp8_operands(a, b, per)
    return lambda: fn(*args)


def accepts(fn, per):  # torch._scaled_mm refuses what its build or this GPU lacks
    try:
        return one_call(fn, per, "3000x4000x2000")() is not None
    except RuntimeError as refusal:
        print(f"not timed, refused here: {str(refusal).splitlines()[0][:120]}")
        return False


# %%
# The sweep, on a GPU with FP8 tensor cores (enough copies of the inputs that even the
# bfloat16 ones, the largest, overrun L2):

speed = []
if bench.live and not has_fp8:
    print("This GPU has no FP8 tensor cores (sm_89 or later): nothing is timed.")
else:
    speed = bench.sweep("fp8 matmul, GPU time", list(sizes), {
        name: on_cold_copies(lambda size, fn=fn, per=per: one_call(fn, per, size),
                             lambda size: 2 * sizes[size][2] * sum(sizes[size][:2]))
        for name, (fn, per) in calls.items() if not bench.live or accepts(fn, per)},
        lambda size, ms: tflop_per_s(2 * math.prod(sizes[size]), ms), label="M x N x K",
        unit="TFLOP/s", ceiling="gemm_bf16", logx=False, gpu_time=True)
    speed.plot()

# %%
# Each of ours over ``torch._scaled_mm`` with the same scaling, then every variant's
# best and worst share of the bfloat16 cuBLAS product's rate (FP8 over 16-bit):

vendor = {per: print_ratio_range(speed, f"ours, per {per}", [f"_scaled_mm, per {per}"])
          for per in ("tensor", "row")
          if speed and all(f"_scaled_mm, per {per}" in run.series for run in speed)}
print_share_range(speed, "cuBLAS bf16")

# %%
# Takeaways
# ---------
# From what this page computed and printed above:

print(f"* e4m3: {len(positive)} positive values, {positive.min().item():g} to "
      f"{positive.max().item():g}, 8 to a binade: rounding costs up to "
      f"{rounding.max().item():.1%} of a value (2^-4 = 6.25%).")
print(f"* One scale for rows 10^3 apart: the ordinary rows' error "
      f"{row_errors[3][0]:.3f} (per row {row_errors[3][1]:.3f}); 10^5 apart: "
      f"{row_errors[5][0]:.3f} against {row_errors[5][1]:.3f}.")
print(f"* This build casts 1000 to {edge.to(FP8).float()[edge == 1000].item():g}; "
      "quantize_fp8 clamps first, so values past 448 become 448 on every build.")
print(f"* Scales forgotten: the product {factors['forgotten']:.3g} times too large "
      f"here; applied twice, {factors['applied twice']:.3g} times: a check against a "
      "reference catches either at once.")
if fp8_errors:
    ratios = [fp8 / bf16 for fp8, bf16 in zip(fp8_errors, bf16_errors)]
    print(f"* FP8 inputs: {min(fp8_errors):.3f} to {max(fp8_errors):.3f} relative "
          f"error, {min(ratios):.0f}x to {max(ratios):.0f}x bfloat16's at the same "
          "sizes.")
for per, by_gpu in vendor.items():
    for gpu, found in by_gpu.items():
        low, high, _, _ = found[f"_scaled_mm, per {per}"]
        print(f"* {gpu}: ours per {per} at {low:.2f} to {high:.2f}x torch._scaled_mm's "
              "rate over the three shapes.")

# %%
# Scale per row and per column, never along K; clamp before the cast; apply the scales
# once, after the sum. Then FP8 costs the error printed above, for half the bytes of
# bfloat16; what it buys in speed is the sweep's to say, on a GPU build or once one has
# been recorded.
#
# Used here: :func:`triton_guide.fp8_matmul.quantize_fp8`,
# :func:`triton_guide.fp8_matmul.dequantize_fp8`,
# :func:`triton_guide.fp8_matmul.fp8_matmul_reference`,
# :func:`triton_guide.fp8_matmul.fp8_matmul`, :class:`triton_guide.benchmark.Benchmark`.
