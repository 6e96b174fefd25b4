import pytest
import torch

from triton_guide import runtime
from triton_guide.debugging import compile_kernels
from triton_guide.raw_pointers import (
    BLOCK_SIZE,
    run_solve,
    solve,
    solve_reference,
    vector_add_raw_kernel,
)

SIZES = runtime.pick(
    interpreter=[1, 17, BLOCK_SIZE, BLOCK_SIZE + 1, 4097],
    gpu=[1, 17, BLOCK_SIZE, BLOCK_SIZE + 1, 4097, 2**20 + 3, 2**24 + 1],
)
SIZE_IDS = {1: "n=1", 17: "n=17", BLOCK_SIZE: "one_full_block", BLOCK_SIZE + 1: "tail_of_1"}


@pytest.mark.parametrize("n", SIZES, ids=lambda n: SIZE_IDS.get(n, f"n={n}"))
def test_matches_torch(n, device, check):
    a, b = torch.randn(2, n, device=device).unbind(0)
    check("raw_pointers", run_solve(solve, a, b), solve_reference(a.double(), b.double()),
          rtol=1e-6)


def test_writes_only_n_elements(device):
    # c is a slice of a longer buffer: the elements after it must stay as they were.
    a, b = torch.randn(2, 1000, device=device).unbind(0)
    buffer = torch.full((1000 + 7,), 123.0, device=device)
    solve(a.data_ptr(), b.data_ptr(), buffer.data_ptr(), 1000)
    assert torch.equal(buffer[1000:].cpu(), torch.full((7,), 123.0))


def test_harness_refuses_float64(device):
    x = torch.ones(4, device=device, dtype=torch.float64)
    with pytest.raises(TypeError, match="a has dtype"):
        run_solve(solve, x, x)


def test_harness_refuses_non_contiguous(device):
    x = torch.ones(4, 4, device=device).t()
    with pytest.raises(ValueError, match="a is not contiguous"):
        run_solve(solve, x, x)


@pytest.mark.parametrize("value", [1.5, None, torch.ones(1)], ids=["float", "None", "tensor"])
def test_solve_refuses_non_int_address(value):
    with pytest.raises(TypeError, match="a_ptr must be an int"):
        solve(value, 2**40, 2**40, 4)


def test_solve_refuses_small_int_as_address():
    with pytest.raises(ValueError, match="b_ptr = 12 is not a device address"):
        solve(2**40, 12, 2**40, 4)


def test_solve_refuses_a_misaligned_address():
    with pytest.raises(ValueError, match="c_ptr = 1099511627777 is not a multiple of 4"):
        solve(2**40, 2**40, 2**40 + 1, 4)


def test_solve_refuses_an_address_int64_cannot_hold():
    with pytest.raises(ValueError, match="a_ptr = 18446744073709551616 is not a device address"):
        solve(2**64, 2**40, 2**40, 4)


def test_solve_takes_numpy_integers(device, check):
    import numpy as np

    a, b = torch.randn(2, 37, device=device).unbind(0)
    c = torch.empty_like(a)
    solve(np.int64(a.data_ptr()), np.int64(b.data_ptr()), np.int64(c.data_ptr()), np.int32(37))
    if c.is_cuda:
        torch.cuda.synchronize()
    check("solve", c, a + b, rtol=0.0)


def test_solve_says_what_n_must_be():
    with pytest.raises(TypeError, match="N must be an int, got float; pass the number of"):
        solve(2**40, 2**40, 2**40, 4.0)


@pytest.mark.parametrize("n", [0, -3, 2**31], ids=["n=0", "negative", "n=2**31"])
def test_solve_refuses_bad_length(n):
    with pytest.raises(ValueError, match="N must be between 1"):
        solve(2**40, 2**40, 2**40, n)


def test_compiler_refuses_an_address_typed_int32():
    # What a launch with an address below 2**31 would compile: solve refuses it first.
    signature = {"a_address": "i32", "b_address": "i64", "c_address": "i64",
                 "num_elements": "i32", "BLOCK_SIZE": "constexpr"}
    (compiled,) = compile_kernels([(vector_add_raw_kernel, signature, {"BLOCK_SIZE": 4})])
    assert "'tt.int_to_ptr' op operand #0 must be 64-bit" in compiled.diagnostics
