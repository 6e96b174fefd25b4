"""triton_guide.fp8_matmul: quantization, the FP8 kernel against float64, its refusals, and
the two classic mistakes (values past e4m3's range, a scale used the wrong way) shown to
give large errors."""

import pytest
import torch

from triton_guide import runtime
from triton_guide.fp8_matmul import (E4M3_MAX, FP8, INTERPRETER_TILE, dequantize_fp8,
                                     fp8_matmul, fp8_matmul_reference, quantize_fp8)
from triton_guide.testing import relative_error

TILE_PLUS_ONE = tuple(size + 1 for size in INTERPRETER_TILE)
# (M, N, K): ones, odd sizes, and a tile plus one in each direction.
SHAPES = runtime.pick(
    interpreter=[(1, 1, 1), (77, 45, 130), TILE_PLUS_ONE],
    gpu=[(1, 1, 1), (77, 45, 130), TILE_PLUS_ONE, (65, 129, 129), (129, 257, 1000)],
)
# Scales per (a, b): one each, one per row of a and column of b, and the two mixed.
SCALINGS = [("tensor", "tensor"), ("row", "column"), ("row", "tensor"), ("tensor", "column")]
# The kernel sums exact FP8 products in float32, so a float32 output differs from float64
# by float32 rounding (on a GPU, also the tensor cores' order of summation); a bfloat16
# output by one bfloat16 rounding (8 significant bits: 2**-8 relative at most, to nearest).
# The interpreter's cast to bfloat16 truncates instead (test_interpreter_bfloat16_truncates):
# up to a whole step, 2**-7.
RTOL = {torch.float32: runtime.pick(interpreter=1e-5, gpu=2e-3),
        torch.bfloat16: runtime.pick(interpreter=2**-7, gpu=2**-8)}
# e4m3 keeps 3 mantissa bits: a normal value rounds to within half a step, 2**-4 relative.
E4M3_RELATIVE = 2.0 ** -4
E4M3_SMALLEST_NORMAL = 2.0 ** -6


def operands(M, N, K, scaling, device):
    a = torch.randn(M, K, device=device)
    b = torch.randn(K, N, device=device)
    a_fp8, scale_a = quantize_fp8(a, per=scaling[0])
    b_fp8, scale_b = quantize_fp8(b, per=scaling[1])
    return a, b, a_fp8, b_fp8, scale_a, scale_b


@pytest.mark.parametrize("scaling", SCALINGS, ids="-".join)
@pytest.mark.parametrize("out_dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("M,N,K", SHAPES)
def test_against_float64(M, N, K, scaling, out_dtype, device, check):
    _, _, a_fp8, b_fp8, scale_a, scale_b = operands(M, N, K, scaling, device)
    c = fp8_matmul(a_fp8, b_fp8, scale_a, scale_b, out_dtype=out_dtype)
    assert c.dtype == out_dtype and c.shape == (M, N)
    reference = fp8_matmul_reference(a_fp8, b_fp8, scale_a, scale_b)
    check("fp8_matmul", c, reference, rtol=RTOL[out_dtype])


def fast_accumulation_rtol(K):
    """With fast_accumulation on sm_90 the tensor cores keep the whole sum. Their FP8
    accumulation is not documented; this assumes it loses at most 2**-13 of the sum per
    32-deep step (not yet checked on a GPU). The interpreter sums in float32."""
    return runtime.pick(interpreter=1e-5, gpu=2e-3 + 2.0 ** -13 * -(-K // 32))


@pytest.mark.parametrize("M,N,K", SHAPES)
def test_fast_accumulation(M, N, K, device, check):
    _, _, a_fp8, b_fp8, scale_a, scale_b = operands(M, N, K, ("row", "column"), device)
    c = fp8_matmul(a_fp8, b_fp8, scale_a, scale_b, torch.float32, fast_accumulation=True)
    reference = fp8_matmul_reference(a_fp8, b_fp8, scale_a, scale_b)
    check("fp8_matmul fast accumulation", c, reference, rtol=fast_accumulation_rtol(K))


@pytest.mark.skipif(not runtime.interpreting(), reason="about the Triton interpreter")
def test_interpreter_bfloat16_truncates(device):
    """Under the interpreter, a bfloat16 output is the float32 one with its low 16 bits
    cut off (rounded toward zero), not rounded to nearest as on a GPU."""
    a_fp8, scale_a = quantize_fp8(torch.randn(77, 130, device=device))
    b_fp8, scale_b = quantize_fp8(torch.randn(130, 45, device=device))
    c32 = fp8_matmul(a_fp8, b_fp8, scale_a, scale_b, torch.float32)
    c16 = fp8_matmul(a_fp8, b_fp8, scale_a, scale_b, torch.bfloat16)
    truncated = (c32.view(torch.int32) & ~0xFFFF).view(torch.float32).to(torch.bfloat16)
    assert torch.equal(c16, truncated)
    assert not torch.equal(c16, c32.to(torch.bfloat16))


@pytest.mark.parametrize("layout", ["a rows, b rows", "a rows, b columns", "a columns, b rows",
                                    "b a slice"])
def test_layouts_agree(layout, device):
    """b stored by rows is copied to columns, a by columns to rows: the same result bit for
    bit as the layout the kernel reads."""
    M, N, K = 77, 45, 130
    a_fp8, scale_a = quantize_fp8(torch.randn(M, K, device=device), per="row")
    b_fp8, scale_b = quantize_fp8(torch.randn(K, N, device=device))
    expected = fp8_matmul(a_fp8, b_fp8.t().contiguous().t(), scale_a, scale_b, torch.float32)
    if layout == "a rows, b rows":
        a, b = a_fp8, b_fp8.contiguous()
    elif layout == "a rows, b columns":
        a, b = a_fp8, b_fp8.t().contiguous().t()
    elif layout == "a columns, b rows":
        a, b = a_fp8.t().contiguous().t(), b_fp8
    else:  # every other column of a wider matrix
        wide = torch.zeros(K, 2 * N, device=device, dtype=FP8)
        wide[:, ::2] = b_fp8
        a, b = a_fp8, wide[:, ::2]
    assert torch.equal(fp8_matmul(a, b, scale_a, scale_b, torch.float32), expected)


def test_column_quantization_is_stored_by_columns(device):
    b_fp8, scale_b = quantize_fp8(torch.randn(40, 24, device=device), per="column")
    assert scale_b.shape == (1, 24) and b_fp8.stride() == (1, 40)


@pytest.mark.parametrize("per", ["tensor", "row", "column"])
def test_quantization_round_trip(per, device):
    """Each value comes back within 2**-4 of itself where its scaled value is a normal e4m3
    number, and within half the subnormal step (2**-10 times the scale) below that; each
    group's largest magnitude lands on 448."""
    x = torch.randn(64, 200, device=device) * torch.logspace(-2, 2, 200, device=device)
    x[::7, ::3] *= 1e-6  # values that land among e4m3's subnormals in every group
    x_fp8, scale = quantize_fp8(x, per=per)
    assert x_fp8.dtype == FP8 and scale.dtype == torch.float32
    assert scale.shape == {"tensor": (), "row": (64, 1), "column": (1, 200)}[per]
    back = dequantize_fp8(x_fp8, scale)
    error = (back - x.double()).abs()
    scaled = x.double().abs() / scale.double()
    normal = scaled >= E4M3_SMALLEST_NORMAL
    assert normal.any() and (~normal).any()
    assert (error[normal] <= E4M3_RELATIVE * x.double().abs()[normal]).all()
    subnormal_step = 2.0 ** -9 * scale.double().expand_as(x)
    assert (error <= subnormal_step / 2 + E4M3_RELATIVE * x.double().abs()).all()
    # the bound is nearly reached: 3 mantissa bits, not more
    assert (error[normal] / x.double().abs()[normal]).max() > E4M3_RELATIVE / 2
    dims = {"tensor": None, "row": 1, "column": 0}[per]
    largest = x_fp8.float().abs().amax() if dims is None else x_fp8.float().abs().amax(dim=dims)
    assert (largest == E4M3_MAX).all()


def test_zeros_quantize_to_zeros(device):
    x = torch.zeros(3, 5, device=device)
    x[1] = torch.arange(5, device=device)
    x_fp8, scale = quantize_fp8(x, per="row")
    assert scale[0].item() == 1.0  # a row of zeros: any scale would do, 1 stays finite
    assert scale[1].item() == torch.tensor(4 / E4M3_MAX).item()
    back = dequantize_fp8(x_fp8, scale)
    assert torch.equal(back[0], torch.zeros(5, dtype=torch.float64, device=device))
    assert ((back[1] - x[1].double()).abs() <= E4M3_RELATIVE * x[1].double()).all()


def test_saturation_mistake(device):
    """A scale too small for the data (here: none, scale 1, for values up to 1000) sends
    values past 448. Cast without the clamp, such a value becomes NaN (c10's conversion, above
    464) or 448 (a saturating cast, as torch 2.13's CPU cast does): either way the
    product is far off, where the right scale keeps it within a few percent."""
    a = torch.randn(32, 64, device=device)
    a[:, 0] = 1000.0  # an outlier column
    b = torch.randn(64, 16, device=device)
    b_fp8, scale_b = quantize_fp8(b)
    one = torch.ones((), device=device)

    unclamped = a.to(FP8)  # what quantize_fp8 would do with scale 1 and no clamp
    outlier = unclamped[0, 0].float().item()
    assert outlier != outlier or outlier == E4M3_MAX  # NaN, or saturated at 448
    reference = a.double() @ dequantize_fp8(b_fp8, scale_b)
    wrong = fp8_matmul(unclamped, b_fp8, one, scale_b, torch.float32)
    right = fp8_matmul(*quantize_fp8(a)[:1], b_fp8, quantize_fp8(a)[1], scale_b, torch.float32)
    assert relative_error(right, reference) < 0.05
    wrong_error = relative_error(wrong, reference)
    assert wrong_error != wrong_error or wrong_error > 0.3  # NaN, or 1000 read as 448


@pytest.mark.parametrize("mistake", ["multiplied", "forgotten"])
def test_scale_mistake(mistake, device):
    """Quantizing by multiplying by the scale instead of dividing pushes randn-sized values
    (scale about 0.01) down into e4m3's subnormals and zero, so the product comes out near
    zero (wrong by about 100%); forgetting the scales in the product leaves it too large by
    1 / (scale_a * scale_b), about 10**4 here. Quantizing right costs a few percent (e4m3's
    rounding, up to 2**-4 per value)."""
    a, b = torch.randn(48, 96, device=device), torch.randn(96, 40, device=device)
    reference = a.double() @ b.double()
    a_fp8, scale_a = quantize_fp8(a)
    b_fp8, scale_b = quantize_fp8(b)
    right = fp8_matmul(a_fp8, b_fp8, scale_a, scale_b, torch.float32)
    assert relative_error(right, reference) < 0.08  # what quantization itself costs
    if mistake == "multiplied":
        a_fp8 = (a * scale_a).clamp(-E4M3_MAX, E4M3_MAX).to(FP8)
        b_fp8 = (b * scale_b).clamp(-E4M3_MAX, E4M3_MAX).to(FP8)
    else:
        scale_a = scale_b = torch.ones((), device=device)
    wrong = fp8_matmul(a_fp8, b_fp8, scale_a, scale_b, torch.float32)
    assert relative_error(wrong, reference) > 0.9


def good_inputs(device, M=5, N=6, K=7):
    a_fp8, scale_a = quantize_fp8(torch.randn(M, K, device=device), per="row")
    b_fp8, scale_b = quantize_fp8(torch.randn(K, N, device=device), per="column")
    return {"a_fp8": a_fp8, "b_fp8": b_fp8, "scale_a": scale_a, "scale_b": scale_b}


def refusals(device, wrong_device):
    good = good_inputs(device)
    f32 = torch.float32
    return [
        ("a_fp8", TypeError, {"a_fp8": good["a_fp8"].float()}),
        ("a_fp8", TypeError, {"a_fp8": good["a_fp8"].to(torch.float8_e5m2)}),
        ("b_fp8", TypeError, {"b_fp8": good["b_fp8"].half()}),
        ("b_fp8", TypeError, {"b_fp8": [[1.0]]}),
        ("a_fp8", ValueError, {"a_fp8": good["a_fp8"][0]}),  # 1D
        ("a_fp8", ValueError, {"a_fp8": good["a_fp8"][:0], "scale_a": good["scale_b"][0, 0]}),
        ("a_fp8", ValueError, {"a_fp8": good["a_fp8"].to(wrong_device)}),
        ("b_fp8's rows", ValueError, {"b_fp8": good["b_fp8"][1:]}),
        ("scale_a", TypeError, {"scale_a": good["scale_a"].double()}),
        ("scale_a", ValueError, {"scale_a": good["scale_a"].flatten()}),  # (M,): ambiguous
        ("scale_a", ValueError, {"scale_a": torch.ones(1, 7, device=device)}),
        ("scale_b", ValueError, {"scale_b": torch.ones(6, 1, device=device)}),
        ("scale_b", ValueError, {"scale_b": torch.ones(2, device=device)}),
        ("scale_b", ValueError, {"scale_b": torch.empty(0, device=device)}),
        ("scale_b", ValueError, {"scale_b": good["scale_b"].to(wrong_device)}),
    ] + ([  # scale values: checked where reading them does not wait for a GPU
        ("scale_a", ValueError, {"scale_a": torch.zeros((), device=device)}),
        ("scale_a", ValueError, {"scale_a": -torch.ones(5, 1, device=device)}),
        ("scale_b", ValueError, {"scale_b": torch.tensor(float("inf"), device=device, dtype=f32)}),
        ("scale_b", ValueError, {"scale_b": torch.full((1, 6), float("nan"), device=device)}),
    ] if torch.device(device).type == "cpu" else [])


def test_refusals_name_the_argument(device, wrong_device):
    for name, error, change in refusals(device, wrong_device):
        arguments = {**good_inputs(device), **change}
        with pytest.raises(error, match=name):
            fp8_matmul(**arguments)
    with pytest.raises(TypeError, match="out_dtype"):
        fp8_matmul(**good_inputs(device), out_dtype=torch.float64)
    with pytest.raises(TypeError, match="fast_accumulation"):
        fp8_matmul(**good_inputs(device), fast_accumulation="yes")


def test_quantize_refusals(device):
    x = torch.randn(4, 4, device=device)
    for value, per, error, words in [
        (x.int(), "tensor", TypeError, "x has dtype"),
        ([1.0], "tensor", TypeError, "x must be"),
        (x, "col", ValueError, "per must be"),
        (x[0], "row", ValueError, "2D x"),
        (x[:0], "tensor", ValueError, "x is empty"),
        (torch.tensor([1.0, float("inf")], device=device), "tensor", ValueError, "inf or NaN"),
    ]:
        with pytest.raises(error, match=words):
            quantize_fp8(value, per=per)


def test_compiles_for_sm90_with_fp8_wgmma():
    """On any machine: the kernel compiled for sm_90 (an H100) multiplies e4m3 operands with
    wgmma, in both accumulation modes, without spilling at the small tile."""
    from triton_guide.compiled import Launch, compile_for
    from triton_guide.fp8_matmul import SMALL_TILE, fp8_matmul_kernel

    a = torch.empty(64, dtype=FP8)
    c = torch.empty(64, dtype=torch.bfloat16)
    scale = torch.empty(4, dtype=torch.float32)
    M = N = K = 4096
    block_m, block_n, block_k, stages, warps = SMALL_TILE
    launches = [Launch(fp8_matmul_kernel, (a, a, c, scale, scale, M, N, K, K, 1, 1, K, N, 1, 1, 1),
                       dict(BLOCK_SIZE_M=block_m, BLOCK_SIZE_N=block_n, BLOCK_SIZE_K=block_k,
                            GROUP_SIZE_M=8, SCALE_A_ROWS=True, SCALE_B_COLUMNS=True,
                            FAST_ACCUMULATION=fast, num_warps=warps, num_stages=stages))
                for fast in (False, True)]
    for kernel in compile_for(launches):
        assert ".target sm_90a" in kernel.ptx
        assert "wgmma.mma_async" in kernel.ptx and ".e4m3.e4m3" in kernel.ptx
        assert kernel.spills == 0
