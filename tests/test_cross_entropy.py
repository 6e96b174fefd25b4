import pytest
import torch

from conftest import FLOAT_DTYPES
from triton_guide import cross_entropy, cross_entropy_reference, runtime
from triton_guide.testing import tolerance

# (rows, vocabulary, block_size): the block size forces several steps over the vocabulary.
CASES = runtime.pick(
    interpreter=[
        pytest.param(1, 17, 4096, id="rows=1"),
        pytest.param(4, 1, 4096, id="vocab=1"),
        pytest.param(5, 1000, 4096, id="non_power_of_two"),
        pytest.param(7, 1000, 64, id="larger_than_one_block"),
        pytest.param(3, 1025, 256, id="tail_of_1"),
    ],
    gpu=[
        pytest.param(1, 17, 4096, id="rows=1"),
        pytest.param(4, 1, 4096, id="vocab=1"),
        pytest.param(5, 1000, 4096, id="non_power_of_two"),
        pytest.param(7, 1000, 64, id="larger_than_one_block"),
        pytest.param(3, 1025, 256, id="tail_of_1"),
        pytest.param(257, 128256, 4096, id="llama3_vocab"),
    ],
)


def make_inputs(rows, vocab, dtype, device, *, ignored=()):
    logits = (torch.randn(rows, vocab, device=device) * 3).to(dtype)
    target = torch.randint(0, vocab, (rows,), device=device)
    target[list(ignored)] = -100
    return logits, target


def cancellation_scale(logits, target):
    """The size of the two numbers each row's loss subtracts, averaged like the loss.

    A row's loss is ``logsumexp(row) - row[target]``: when the target's logit dominates, both
    terms are large and their difference is small, so float rounding of the terms is what
    bounds the error, not the size of the loss (a row of 17 logits with one at 13.9 loses
    7e-5: float32 torch is 1e-3 away from float64 there).
    """
    rows = logits.double()
    terms = torch.logsumexp(rows, dim=1).abs() + rows.gather(1, target[:, None])[:, 0].abs()
    return terms.mean().item()


def reference_loss_and_grad(logits, target, grad_loss, **options):
    """Loss and d(loss)/d(logits) by torch autograd in float64."""
    leaf = logits.detach().double().requires_grad_()
    loss = cross_entropy_reference(leaf, target, **options)
    (grad,) = torch.autograd.grad(loss, leaf, grad_loss.double())
    return loss.detach(), grad


def ours_loss_and_grad(logits, target, grad_loss, **options):
    leaf = logits.detach().clone().requires_grad_()
    # A non-leaf input, as in a model, so that inplace_grad is allowed.
    loss = cross_entropy(leaf * 1, target, **options)
    (grad,) = torch.autograd.grad(loss, leaf, grad_loss.to(loss.dtype))
    return loss, grad


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("rows,vocab,block_size", CASES)
def test_loss_matches_torch(rows, vocab, block_size, dtype, device, check):
    logits, target = make_inputs(rows, vocab, dtype, device)
    loss = cross_entropy(logits, target, block_size=block_size)
    expected = cross_entropy_reference(logits.double(), target)
    # The kernel computes in float32 whatever the input dtype: allow 16 float32 roundings of
    # the terms the loss subtracts (a loss of 0 where the reference is 7e-5 still fails).
    atol = 16 * torch.finfo(torch.float32).eps * cancellation_scale(logits, target)
    check("cross_entropy", loss, expected, rtol=tolerance(dtype), atol=atol, name="loss")


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("rows,vocab,block_size", CASES)
def test_gradient_matches_float64_autograd(rows, vocab, block_size, dtype, device, check):
    logits, target = make_inputs(rows, vocab, dtype, device)
    grad_loss = torch.tensor(1.5, device=device)  # not 1: the backward must rescale
    _, grad = ours_loss_and_grad(logits, target, grad_loss, block_size=block_size)
    _, expected = reference_loss_and_grad(logits, target, grad_loss)
    # The target's entry is p - 1: where p is near 1 it cancels, and float32's rounding of p
    # is what is left. Allow 16 roundings of 1 at the gradient's scale (grad_loss / rows);
    # float32 torch itself lands 1.9e-5 from float64 on some rows of 17 logits.
    atol = 16 * torch.finfo(torch.float32).eps * grad_loss.item() / rows
    check("cross_entropy(grad)", grad, expected, rtol=tolerance(dtype), atol=atol, name="grad")


@pytest.mark.parametrize("label_smoothing", [0.0, 0.1], ids=lambda v: f"smoothing={v}")
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_reductions_and_label_smoothing(reduction, label_smoothing, device, check):
    logits, target = make_inputs(6, 300, torch.float32, device, ignored=[1, 4])
    options = {"reduction": reduction, "label_smoothing": label_smoothing}
    grad_loss = torch.randn(6 if reduction == "none" else (), device=device)
    loss, grad = ours_loss_and_grad(logits, target, grad_loss, block_size=128, **options)
    expected_loss, expected_grad = reference_loss_and_grad(
        logits, target, grad_loss, **options)
    check("cross_entropy", loss, expected_loss, rtol=1e-5, name="loss")
    check("cross_entropy(grad)", grad, expected_grad, rtol=1e-5, name="grad")


@pytest.mark.parametrize("ignore_index", [-100, 3], ids=["default_-100", "inside_vocab_3"])
def test_ignored_rows_add_no_loss_and_no_gradient(ignore_index, device, check):
    logits, target = make_inputs(8, 500, torch.float32, device)
    target[target == ignore_index] = 0  # only the rows chosen below are ignored
    target[[0, 5, 6]] = ignore_index
    grad_loss = torch.tensor(1.0, device=device)
    loss, grad = ours_loss_and_grad(logits, target, grad_loss, ignore_index=ignore_index)
    expected_loss, expected_grad = reference_loss_and_grad(
        logits, target, grad_loss, ignore_index=ignore_index)
    assert (grad[[0, 5, 6]] == 0).all()
    check("cross_entropy", loss, expected_loss, rtol=1e-5, name="loss")
    check("cross_entropy(grad)", grad, expected_grad, rtol=1e-5, name="grad")


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_all_rows_ignored_matches_torch(reduction, device):
    logits, target = make_inputs(4, 100, torch.float32, device, ignored=range(4))
    loss, grad = ours_loss_and_grad(logits, target, torch.ones(
        4 if reduction == "none" else (), device=device), reduction=reduction)
    expected, expected_grad = reference_loss_and_grad(logits, target, torch.ones(
        4 if reduction == "none" else (), device=device), reduction=reduction)
    # mean: 0 / 0 = nan, like torch; sum: 0; none: a zero per row. No gradient anywhere.
    assert torch.equal(loss.double().isnan(), expected.isnan())
    assert torch.equal(loss.double().nan_to_num(), expected.nan_to_num())
    assert (grad == 0).all() and (expected_grad == 0).all()


def test_inplace_grad_writes_the_gradient_over_the_logits(device, check):
    logits, target = make_inputs(5, 700, torch.float32, device, ignored=[2])
    source = logits.clone().requires_grad_()
    buffer = source * 1  # a non-leaf, as the output of a model's last layer would be
    loss = cross_entropy(buffer, target, inplace_grad=True, block_size=256)
    _, expected_grad = reference_loss_and_grad(logits, target, torch.tensor(1.0))
    check("cross_entropy(grad)", buffer.detach(), expected_grad, rtol=1e-5,
          name="logits after the forward")
    loss.backward()
    check("cross_entropy(grad)", source.grad, expected_grad, rtol=1e-5, name="grad")


def test_inplace_grad_is_caught_if_another_op_saved_the_logits(device):
    logits, target = make_inputs(3, 50, torch.float32, device)
    source = logits.clone().requires_grad_()
    buffer = source * 1
    squared = buffer * buffer  # saves buffer for its backward
    loss = cross_entropy(buffer, target, inplace_grad=True) + squared.sum()
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        loss.backward()


def test_without_grad_the_logits_are_left_alone(device, check):
    logits, target = make_inputs(4, 300, torch.float32, device)
    before = logits.clone()
    with torch.no_grad():
        loss = cross_entropy(logits.requires_grad_(), target, inplace_grad=True)
    assert torch.equal(logits.detach(), before)
    check("cross_entropy", loss, cross_entropy_reference(before.double(), target), rtol=1e-5)


@pytest.mark.parametrize("dtype,magnitude", [(torch.float32, 1e4), (torch.float16, 2e4)],
                         ids=["float32-1e4", "float16-2e4"])
def test_large_logits_do_not_overflow(dtype, magnitude, device, check):
    # float16 losses reach 2 * magnitude, which must stay below its largest value, 65504.
    logits = ((torch.rand(4, 300, device=device) * 2 - 1) * magnitude).to(dtype)
    target = torch.randint(0, 300, (4,), device=device)
    loss = cross_entropy(logits, target, reduction="none", block_size=64)
    assert torch.isfinite(loss).all()
    expected = cross_entropy_reference(logits.double(), target, reduction="none")
    check("cross_entropy", loss, expected, rtol=tolerance(dtype))


def test_strided_rows(device, check):
    wide = torch.randn(6, 400, device=device)
    logits = wide[:, 13:313]  # row stride 400, 300 classes
    target = torch.randint(0, 300, (6,), device=device)
    grad_loss = torch.tensor(1.0, device=device)
    _, grad = ours_loss_and_grad(logits, target, grad_loss, block_size=128)
    _, expected = reference_loss_and_grad(logits, target, grad_loss)
    check("cross_entropy(grad)", grad, expected, rtol=1e-5, name="grad")


# Every integer dtype of class indices, each with an ignore_index it can hold.
TARGET_DTYPES = [
    pytest.param(torch.int64, -100, id="int64"),
    pytest.param(torch.int32, -100, id="int32"),
    pytest.param(torch.int16, -100, id="int16"),
    pytest.param(torch.int8, -100, id="int8"),
    pytest.param(torch.uint8, 255, id="uint8"),
]


@pytest.mark.parametrize("target_dtype,ignore_index", TARGET_DTYPES)
def test_every_integer_target_dtype(target_dtype, ignore_index, device, check):
    logits, target = make_inputs(6, 120, torch.float32, device)  # classes fit in int8
    target[[1, 4]] = ignore_index
    grad_loss = torch.tensor(1.0, device=device)
    loss, grad = ours_loss_and_grad(logits, target.to(target_dtype), grad_loss,
                                    ignore_index=ignore_index)
    expected_loss, expected_grad = reference_loss_and_grad(
        logits, target, grad_loss, ignore_index=ignore_index)
    assert (grad[[1, 4]] == 0).all()
    check("cross_entropy", loss, expected_loss, rtol=1e-5, name="loss")
    check("cross_entropy(grad)", grad, expected_grad, rtol=1e-5, name="grad")


def test_uint8_targets_never_equal_a_negative_ignore_index(device, check):
    # As in torch, which takes uint8 targets itself: -100 is no uint8 value, so no row is
    # ignored (compared in uint8, -100 would wrap round to 156).
    logits, target = make_inputs(5, 200, torch.float32, device)
    target[2] = 156
    target = target.to(torch.uint8)
    loss = cross_entropy(logits, target, ignore_index=-100)
    expected = torch.nn.functional.cross_entropy(logits.double(), target, ignore_index=-100)
    check("cross_entropy", loss, expected, rtol=1e-5)


@pytest.mark.parametrize(
    "change,error,match",
    [
        (lambda l, t: (l, t.float()), TypeError,
         "target has dtype torch.float32; expected one of: int64, int32, int16, int8, uint8"),
        (lambda l, t: (l, t.bool()), TypeError, "target has dtype torch.bool"),
        (lambda l, t: (l.double(), t), TypeError, "logits has dtype"),
        (lambda l, t: (l[0], t), ValueError, "logits must have 2 dimensions"),
        (lambda l, t: (l, t[:3]), ValueError, "one class index per row"),
        (lambda l, t: (l.t().contiguous().t(), t), ValueError, "stride 1 along the classes"),
        (lambda l, t: (l, t.clone().fill_(10)), ValueError, r"target\[0\] = 10"),
        (lambda l, t: (l, t.clone().fill_(-1)), ValueError, r"target\[0\] = -1"),
    ],
    ids=["target_float32", "target_bool", "logits_float64", "logits_1d", "target_short",
         "classes_strided", "target_too_large", "target_negative"],
)
def test_rejects_bad_tensors(change, error, match, device):
    if match.startswith(r"target\[") and not runtime.interpreting():
        pytest.skip("on a GPU a target out of range gives nan, not an error: "
                    "test_a_target_out_of_range_is_never_read")
    logits, target = change(*make_inputs(4, 10, torch.float32, device))
    with pytest.raises(error, match=match):
        cross_entropy(logits, target)


@pytest.mark.parametrize(
    "options,error,match",
    [
        ({"ignore_index": 1.5}, TypeError, "ignore_index must be an int"),
        ({"label_smoothing": 1.5}, ValueError, "label_smoothing must be between 0 and 1"),
        ({"reduction": "avg"}, ValueError, "reduction must be"),
        ({"block_size": 100}, ValueError, "block_size must be a power of two, got 100; try 128"),
        ({"block_size": 2**21}, ValueError, "block_size is 2097152, but a Triton block holds"),
        ({"block_size": 4096.0}, TypeError, "block_size must be an int"),
        ({"inplace_grad": 1}, TypeError, "inplace_grad must be a bool"),
    ],
    ids=["ignore_index_float", "smoothing_above_1", "reduction_unknown", "block_not_pow2",
         "block_too_large", "block_float", "inplace_not_bool"],
)
def test_rejects_bad_options(options, error, match, device):
    logits, target = make_inputs(4, 10, torch.float32, device)
    with pytest.raises(error, match=match):
        cross_entropy(logits, target, **options)


@pytest.mark.parametrize("make_leaf", [
    pytest.param(lambda logits: logits.requires_grad_(), id="leaf"),
    pytest.param(lambda logits: logits.view(2, 2, 10).view(4, 10).requires_grad_(),
                 id="leaf_that_is_a_view"),
])
def test_rejects_inplace_grad_on_a_leaf(make_leaf, device):
    logits, target = make_inputs(4, 10, torch.float32, device)
    with pytest.raises(ValueError, match="would overwrite a leaf tensor"):
        cross_entropy(make_leaf(logits), target, inplace_grad=True)


@pytest.mark.parametrize("shape,make_view", [
    pytest.param((40,), lambda w: w.view(4, 10), id="view"),
    pytest.param((4, 12), lambda w: w[:, :10], id="slice"),
])
def test_rejects_inplace_grad_on_a_view_of_a_leaf(shape, make_view, device):
    # The kernel writes through a raw pointer: a view would let it overwrite a parameter.
    weight = torch.randn(shape, device=device).requires_grad_()
    target = torch.randint(0, 10, (4,), device=device)
    with pytest.raises(ValueError, match="would overwrite a view of a leaf tensor"):
        cross_entropy(make_view(weight), target, inplace_grad=True)
    assert weight.grad is None


def test_rejects_inplace_grad_on_rows_sharing_memory(device):
    row = torch.randn(1, 50, device=device).requires_grad_()
    target = torch.randint(0, 50, (4,), device=device)
    with pytest.raises(ValueError, match="rows of logits that do not overlap"):
        cross_entropy((row * 1).expand(4, 50), target, inplace_grad=True)


@pytest.mark.parametrize("label_smoothing", [0.0, 0.1])
@pytest.mark.parametrize("masked", [
    pytest.param("tail", id="padded_vocabulary"),
    pytest.param("first_block", id="whole_first_block"),
    pytest.param("scattered", id="scattered"),
])
def test_minus_infinity_logits_are_masked_classes(masked, label_smoothing, device, check):
    # A vocabulary padded to a round size, its extra classes set to -inf: they get
    # probability 0, as in torch, and a first block of only -inf must not give nan.
    rows, vocab, block = 6, 300, 64
    logits, _ = make_inputs(rows, vocab, torch.float32, device)
    hidden = torch.zeros(vocab, dtype=torch.bool, device=device)
    if masked == "tail":
        hidden[-20:] = True
    elif masked == "first_block":
        hidden[:block + 5] = True
    else:
        hidden[torch.randperm(vocab, device=device)[:100]] = True
    logits[:, hidden] = float("-inf")
    visible = (~hidden).nonzero().flatten()
    target = visible[torch.randint(0, visible.numel(), (rows,), device=device)]
    options = dict(label_smoothing=label_smoothing, block_size=block)
    loss, grad = ours_loss_and_grad(logits, target, torch.tensor(1.0, device=device),
                                    **options)
    expected, expected_grad = reference_loss_and_grad(
        logits, target, torch.tensor(1.0, device=device), label_smoothing=label_smoothing)
    check("cross_entropy(grad)", grad, expected_grad, rtol=1e-5, name="grad")
    if label_smoothing:  # -(eps / V) * sum(log p) over classes of log p = -inf: inf, as torch
        assert torch.isinf(expected) and torch.isinf(loss)
        return
    check("cross_entropy", loss, expected, rtol=1e-5, name="loss")
    assert (grad[:, hidden] == 0).all()


def test_rejects_wrong_device(wrong_device, device):
    logits, target = make_inputs(4, 10, torch.float32, device)
    with pytest.raises(ValueError, match="logits is on"):
        cross_entropy(logits.to(wrong_device), target)


# The backward's rescale: a kernel that tests the incoming gradient on the device, so the
# host never waits for it; a non-contiguous buffer falls back to a plain torch multiply.
@pytest.mark.parametrize("scale", [1.0, 2.5, 0.0], ids=["one_leaves_it_alone", "two_and_a_half", "zero"])
@pytest.mark.parametrize("layout", ["contiguous", "transposed"])
@pytest.mark.parametrize("size", [(3, 5), (37, 4100)], ids=["one_block", "several_blocks_and_a_tail"])
def test_scale_if_not_one(scale, layout, size, device):
    from triton_guide.cross_entropy import scale_if_not_one

    x = torch.randn(size, device=device)
    if layout == "transposed":
        x = torch.randn(size[::-1], device=device).t()
    expected = x * scale
    scale_if_not_one(x, torch.tensor(scale, device=device))
    assert torch.equal(x, expected)


@pytest.mark.skipif(runtime.interpreting(), reason="counts host syncs of CUDA: needs a GPU")
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_forward_and_backward_do_not_wait_for_the_gpu(reduction, device):
    logits = torch.randn(64, 5000, device=device).requires_grad_()
    target = torch.randint(0, 5000, (64,), device=device)
    target[::7] = -100
    cross_entropy(logits * 1, target, reduction=reduction)  # compiles the kernels
    previous = torch.cuda.get_sync_debug_mode()
    torch.cuda.set_sync_debug_mode("error")  # any synchronising call raises
    try:
        loss = cross_entropy(logits * 1, target, reduction=reduction)
        loss.backward(torch.ones_like(loss))
    finally:
        torch.cuda.set_sync_debug_mode(previous)
    assert logits.grad is not None


@pytest.mark.parametrize("grad_scale", [1.0, 3.0], ids=["loss", "scaled_loss"])
def test_a_second_backward_fails_rather_than_scale_twice(grad_scale, device):
    logits = torch.randn(4, 50, device=device).requires_grad_()
    target = torch.randint(0, 50, (4,), device=device)
    loss = cross_entropy(logits * 1, target) * grad_scale
    loss.backward(retain_graph=True)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        loss.backward()


def test_a_target_out_of_range_is_never_read(device):
    # Under the interpreter it is refused by name; on a GPU, where checking would make the
    # host wait, the loss and that row's gradient come out nan instead of reading memory
    # past the row.
    logits = torch.randn(5, 11, device=device, requires_grad=True)
    target = torch.tensor([1, 11, 3, -100, 0], device=device)
    if runtime.interpreting():
        with pytest.raises(ValueError, match=r"target\[1\] = 11 is not a class index"):
            cross_entropy(logits, target)
        return
    for reduction in ("mean", "sum"):
        loss = cross_entropy(logits, target, reduction=reduction)
        assert torch.isnan(loss).item()
    losses = cross_entropy(logits, target, reduction="none")
    assert torch.isnan(losses).all().item()
    (grad,) = torch.autograd.grad(losses.sum(), logits)
    assert torch.isnan(grad[1]).all().item()
