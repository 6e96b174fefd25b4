import pytest
import torch

from triton_guide import softmax_naive
from triton_guide.traffic import (
    READ_BLOCK,
    count_bytes,
    matmul_cost,
    read_working_set,
    softmax_cost,
    vector_add_cost,
)


def test_vector_add_moves_twelve_bytes_per_flop():
    assert vector_add_cost(1000).intensity == pytest.approx(1 / 12)


def test_matmul_intensity_grows_with_size():
    assert matmul_cost(4096, 4096, 4096).intensity == pytest.approx(4096 / 3)


@pytest.mark.parametrize("shape", [(3, 5), (64, 1000)], ids=["tiny", "64x1000"])
def test_count_bytes_of_naive_softmax(shape):
    # float32: 5MN + 2M read, 3MN + 2M written, plus max's M int64 indices; against
    # MN read + MN written for the fused kernel.
    rows, cols = shape
    x = torch.randn(rows, cols)
    ops = count_bytes(lambda: softmax_naive(x))
    moved = sum(read + written for _, read, written in ops)
    expected = 4 * (8 * rows * cols + 4 * rows) + 8 * rows
    assert (moved, softmax_cost(rows, cols).bytes) == (expected, 8 * rows * cols)


@pytest.mark.parametrize("passes", [1, 3], ids=["one_pass", "three_passes"])
def test_read_working_set_sums_each_block(passes, device):
    x = torch.randn(3 * READ_BLOCK, device=device)
    expected = x.double().view(3, READ_BLOCK).sum(dim=1).repeat(passes)
    partial = read_working_set(x, passes)
    torch.testing.assert_close(partial.double().cpu(), expected.cpu(), rtol=1e-5,
                               atol=1e-3)


def test_read_working_set_reads_negative_bit_views(device):
    x = torch.randn(2 * READ_BLOCK, device=device)._neg_view()
    expected = x.resolve_neg().double().view(2, READ_BLOCK).sum(dim=1)
    torch.testing.assert_close(read_working_set(x, 1).double().cpu(), expected.cpu(),
                               rtol=1e-5, atol=1e-3)


def test_read_working_set_refuses_partial_block(device):
    with pytest.raises(ValueError, match="multiple of 4096"):
        read_working_set(torch.ones(READ_BLOCK + 1, device=device), 1)
