import pytest
import torch

from conftest import FLOAT_DTYPES
from triton_guide import hardware, matmul, matmul_reference, runtime
from triton_guide.testing import tolerance

# (M, N, K): ones, primes, powers of two plus one, and more than one tile each way.
SHAPES = runtime.pick(
    interpreter=[(1, 1, 1), (1, 17, 31), (31, 1, 17), (17, 31, 65), (64, 64, 64), (65, 129, 33), (127, 97, 257)],
    gpu=[(1, 1, 1), (1, 17, 31), (31, 1, 17), (17, 31, 65), (64, 64, 64), (65, 129, 33), (127, 97, 257),
         (1000, 1000, 1000), (2049, 1537, 3073), (4096, 4096, 4096)],
)


def expected(a, b):
    return matmul_reference(a.double(), b.double())


def matmul_module():
    import importlib

    return importlib.import_module("triton_guide.matmul")  # the package exports the function


@pytest.fixture(params=["descriptors", "pointers"])
def path(request, device, monkeypatch):
    """The kernel matmul takes: through tensor descriptors (where the GPU has TMA, and under
    the interpreter), with every input copied to 16-byte boundaries however small the
    product, or, with TMA turned off as on older GPUs, through pointers."""
    module = matmul_module()
    if request.param == "pointers":
        monkeypatch.setattr(module, "has_tma", lambda device: False)
    elif not module.has_tma(device):
        pytest.skip("this GPU has no TMA")
    else:
        monkeypatch.setattr(module, "COPY_MIN_FLOPS", 0)
    return request.param


def kernel_of(path):
    module = matmul_module()
    return module.matmul_tma_kernel if path == "descriptors" else module.matmul_kernel


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "M{}-N{}-K{}".format(*s))
def test_matches_torch(shape, dtype, path, launched, device, check):
    m, n, k = shape
    a = torch.randn(m, k, device=device, dtype=dtype)
    b = torch.randn(k, n, device=device, dtype=dtype)
    c = matmul(a, b)
    check("matmul", c, expected(a, b), rtol=tolerance(dtype, tensor_cores=True))
    assert launched == [kernel_of(path)] and c.shape == (m, n) and c.is_contiguous()


@pytest.mark.parametrize(
    "transpose_a,transpose_b",
    [(True, False), (False, True), (True, True)],
    ids=["a_transposed", "b_transposed", "both_transposed"],
)
def test_transposed_inputs(transpose_a, transpose_b, path, launched, device, check):
    m, n, k = 37, 45, 70
    a = torch.randn(k, m, device=device).t() if transpose_a else torch.randn(m, k, device=device)
    b = torch.randn(n, k, device=device).t() if transpose_b else torch.randn(k, n, device=device)
    assert a.is_contiguous() != transpose_a and b.is_contiguous() != transpose_b
    check("matmul", matmul(a, b), expected(a, b), rtol=tolerance(torch.float32, tensor_cores=True))
    assert launched == [kernel_of(path)]


def test_row_and_column_slices(path, launched, device, check):
    a = torch.randn(2 * 37, 70, device=device)[::2]
    b = torch.randn(70, 3 * 45, device=device)[:, ::3]
    check("matmul", matmul(a, b), expected(a, b), rtol=tolerance(torch.float32, tensor_cores=True))
    assert launched == [kernel_of(path)]


def test_output_dtype_follows_inputs(device):
    a = torch.randn(8, 8, device=device, dtype=torch.float16)
    assert matmul(a, a).dtype == torch.float16


def test_rejects_inner_dimension_mismatch(device):
    with pytest.raises(ValueError, match=r"a's columns \(3\) must equal b's rows \(4\)"):
        matmul(torch.ones(2, 3, device=device), torch.ones(4, 5, device=device))


@pytest.mark.parametrize("shape", [(4,), (2, 3, 4)], ids=["1d", "3d"])
def test_rejects_wrong_rank(shape, device):
    with pytest.raises(ValueError, match="a must have 2 dimensions"):
        matmul(torch.ones(shape, device=device), torch.ones(4, 4, device=device))


def test_rejects_mismatched_dtypes(device):
    with pytest.raises(TypeError, match="same dtype"):
        matmul(torch.ones(2, 2, device=device), torch.ones(2, 2, device=device, dtype=torch.float16))


@pytest.mark.parametrize("dtype", [torch.int8, torch.float64], ids=str)
def test_rejects_unsupported_dtype(dtype, device):
    with pytest.raises(TypeError, match="b has dtype"):
        matmul(torch.ones(2, 2, device=device), torch.ones(2, 2, device=device, dtype=dtype))


def test_rejects_wrong_device(wrong_device, device):
    with pytest.raises(ValueError, match="a is on"):
        matmul(torch.ones(2, 2, device=wrong_device), torch.ones(2, 2, device=device))


def test_rejects_empty(device):
    with pytest.raises(ValueError, match="a is empty"):
        matmul(torch.ones(0, 2, device=device), torch.ones(2, 2, device=device))


# Row lengths that are multiples of 8, 4, 2 and 1 but not 16: the launcher tells the kernel
# each one's alignment (A_ALIGN, B_ALIGN), and a wrong claim would read the wrong elements.
# The same for matrices stored column by column (transposed views), where the columns'
# starts and lengths are what the launcher checks.
ALIGNMENT_SHAPES = runtime.pick(
    interpreter=[(24, 40, 72), (20, 36, 100), (18, 34, 66)],
    gpu=[(1000, 1000, 1000), (2000, 3000, 1000), (200, 300, 1004), (129, 258, 130),
         (24, 40, 72), (64, 4104, 4100)],
)


@pytest.mark.parametrize("shape", ALIGNMENT_SHAPES, ids=lambda s: "M{}-N{}-K{}".format(*s))
@pytest.mark.parametrize("offset", [0, 1], ids=["aligned_base", "base_off_by_one"])
@pytest.mark.parametrize("copies", [False, True], ids=["as_they_are", "copies"])
@pytest.mark.parametrize("layout", ["rr", "rc", "cr", "cc"])  # a, b: by rows or columns
def test_rows_aligned_to_less_than_16(shape, offset, copies, layout, path, launched, device,
                                      check, monkeypatch):
    module = matmul_module()
    # copies only pay off for large products: force them (or rule them out) here
    monkeypatch.setattr(module, "COPY_MIN_FLOPS", 0 if copies else float("inf"))
    real_copies, copied = module.aligned_copies, []

    def counted_copies(a, b):
        copied.append(True)
        return real_copies(a, b)

    monkeypatch.setattr(module, "aligned_copies", counted_copies)
    m, n, k = shape
    dtype = torch.float16
    a = stored(m, k, offset, layout[0] == "c", device, dtype)
    b = stored(k, n, offset, layout[1] == "c", device, dtype)
    c = matmul(a, b)
    check("matmul", c, expected(a, b), rtol=tolerance(dtype, tensor_cores=True))
    assert c.is_contiguous()  # also where the kernel wrote it in padded rows
    # copied when forced and a row (column) of a or b is not a multiple of 16 bytes long
    # or the data starts off a 16-byte boundary: a's rows are K long, its columns M; b's
    # rows N, its columns K
    run_lengths = (m if layout[0] == "c" else k, k if layout[1] == "c" else n)
    unaligned = offset != 0 or any(length * 2 % 16 for length in run_lengths)
    if path == "pointers":
        assert bool(copied) == (copies and unaligned)
        assert launched == [module.matmul_kernel]
    else:  # descriptors read rows on 16-byte boundaries as they are, copies of the others
        assert not copied
        descriptors = copies or not unaligned
        assert launched == [module.matmul_tma_kernel if descriptors else module.matmul_kernel]


def stored(rows, cols, offset, columns, device, dtype):
    """A rows x cols matrix whose elements start ``offset`` elements into their buffer,
    stored row by row or (``columns``) column by column."""
    shape = (cols, rows) if columns else (rows, cols)
    x = torch.randn(rows * cols + offset, device=device, dtype=dtype)[offset:].view(shape)
    return x.t() if columns else x


# Where the GPU has TMA (and under the interpreter), matmul reads a and b through tensor
# descriptors whenever the start and the row (column) stride of both are multiples of 16
# bytes (every row starts on a 16-byte boundary), whatever the layout and the number of
# rows; other inputs of small products go through pointers (larger ones are copied first:
# test_rows_aligned_to_less_than_16).
# a is 272 x K, its rows row_bytes apart (its columns 272 elements apart); b is K x 48, its
# rows 48 elements apart (its columns row_bytes apart). readable: the layouts (a, b by rows
# or columns) in which both can be read through descriptors.
@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("layout", ["rr", "rc", "cr", "cc"])
@pytest.mark.parametrize("row_bytes,a_offset,b_offset,readable", [
    (160, 0, 0, "rr rc cr cc"), (160, 4, 0, ""), (160, 0, 4, ""), (160, 16, 0, "rr rc cr cc"),
    (144, 0, 0, "rr rc cr cc"), (168, 0, 0, "cr"),
], ids=["rows_160_bytes", "a_base_off_by_4_bytes", "b_base_off_by_4_bytes",
        "a_base_off_by_16_bytes", "rows_144_bytes", "rows_168_bytes"])
def test_descriptor_kernel_wherever_rows_start_on_16_byte_boundaries(
        row_bytes, a_offset, b_offset, readable, layout, dtype, device, check, launched,
        monkeypatch):
    module = matmul_module()
    if not module.has_tma(device):
        pytest.skip("this GPU has no TMA")
    monkeypatch.setattr(module, "COPY_MIN_FLOPS", float("inf"))  # no copies
    m, n, k = 272, 48, row_bytes // dtype.itemsize
    a = stored(m, k, a_offset // dtype.itemsize, layout[0] == "c", device, dtype)
    b = stored(k, n, b_offset // dtype.itemsize, layout[1] == "c", device, dtype)
    check("matmul", matmul(a, b), expected(a, b), rtol=tolerance(dtype, tensor_cores=True))
    descriptors = layout in readable.split()
    assert module.kernel_inputs(a, b)[2] == descriptors
    assert launched == [module.matmul_tma_kernel if descriptors else module.matmul_kernel]


@pytest.mark.parametrize("rows", [1, 16, 300])
def test_any_number_of_rows_reads_through_descriptors(rows, device, check, launched):
    module = matmul_module()
    if not module.has_tma(device):
        pytest.skip("this GPU has no TMA")
    a = torch.randn(rows, 80, device=device, dtype=torch.float16)
    b = torch.randn(48, 80, device=device, dtype=torch.float16).t()  # as x @ w.t()
    check("matmul", matmul(a, b), expected(a, b), rtol=tolerance(torch.float16, tensor_cores=True))
    assert launched == [module.matmul_tma_kernel]


def test_descriptor_ready():
    from triton_guide.matmul import descriptor, descriptor_ready

    x = torch.zeros(4, 16, dtype=torch.float16)
    assert descriptor_ready(x) and descriptor_ready(x.t())
    assert descriptor_ready(x[:, :12])  # rows 32 bytes apart, whatever their length
    assert not descriptor_ready(x[:, 1:])  # starts 2 bytes past a 16-byte boundary
    assert not descriptor_ready(torch.zeros(4, 12, dtype=torch.float16))  # rows 24 bytes apart
    assert not descriptor_ready(x[:, ::2])  # no stride of 1
    assert not descriptor_ready(torch.zeros(1, 16, dtype=torch.float16).expand(4, 16))
    assert descriptor_ready(torch.zeros(4, 24, dtype=torch.float16))  # rows 48 bytes apart
    assert descriptor_ready(torch.zeros(4, 40, dtype=torch.float16)[:, 8:])  # start 16 bytes in
    # a matrix stored column by column is described through its transpose
    desc = descriptor(x.t())
    assert desc.shape == [4, 16] and desc.strides == [16, 1]


@pytest.mark.parametrize("capability,descriptors", [((8, 0), False), ((9, 0), True)],
                         ids=["ampere", "hopper"])
def test_descriptors_only_where_the_gpu_has_tma(capability, descriptors, monkeypatch):
    module = matmul_module()
    monkeypatch.setattr(hardware, "interpreting", lambda: False)
    monkeypatch.setattr(hardware, "compute_capability", lambda device: capability)
    a, b = torch.zeros(272, 80), torch.zeros(48, 80).t()
    assert module.kernel_inputs(a, b)[2] == descriptors


@pytest.mark.parametrize("layout", ["rr", "rc", "cr", "cc"])
@pytest.mark.parametrize("k", [512, 515])
def test_float32_operands_go_to_the_kernel_k_major(layout, k, device, check, launched):
    # TF32 wgmma reads a by rows and b by columns only; float32 products large enough to
    # repay a copy get their operands in that order (kernel_inputs, k_major), odd K included.
    module = matmul_module()
    if not module.has_tma(device):
        pytest.skip("this GPU has no TMA")
    m, n = 300, 260
    a = stored(m, k, 0, layout[0] == "c", device, torch.float32)
    b = stored(k, n, 0, layout[1] == "c", device, torch.float32)
    assert module.repays_copies(m, n, k)
    a_in, b_in, descriptors = module.kernel_inputs(a, b)
    assert descriptors and not module.stored_by_columns(a_in) and module.stored_by_columns(b_in)
    assert module.descriptor_ready(a_in) and module.descriptor_ready(b_in)
    assert torch.equal(a_in, a) and torch.equal(b_in, b)
    if k == 515 and layout in ("rr", "cc"):  # the product itself, for the two copies
        for _ in range(2):  # the first call plans, the second replays the plan
            check("matmul", matmul(a, b), expected(a, b),
                  rtol=tolerance(torch.float32, tensor_cores=True))
        assert launched == [module.matmul_tma_kernel] * 2
    small = torch.randn(8, 8, device=device), torch.randn(8, 8, device=device)
    assert module.kernel_inputs(*small)[1] is small[1]  # too small to repay a copy


# The last wave: on 132 SMs (an H100's, an H200's), 128 x 256 x 64 tiles.
@pytest.mark.parametrize("m,n,k,sms,split", [
    (3072, 3072, 3072, 132, 2816),  # 288 tiles: 2 full waves, then 24 (22 rows of 12)
    (4096, 3328, 4096, 132, 3840),  # 416 tiles: 3 full waves, then 20 (30 rows of 13)
    (4096, 4352, 1024, 132, 3968),  # 544 tiles: 4 full waves, then 16 (31 rows of 17)
    (2304, 2304, 2304, 132, 0),  # 162 tiles: 1 full wave, then 30
    (4096, 4096, 4096, 132, 0),  # 512 tiles: the last wave 88% full
    (2000, 3072, 1024, 132, 0),  # 192 tiles: 45% full
    (2048, 2048, 2048, 132, 0),  # 128 tiles: not one full wave
    (8192, 8192, 8192, 132, 0),  # 15 full waves: the last one's idle SMs cost little
    (3072, 3072, 3072, 108, 0),  # an A100's 108 SMs: 2 full waves, then 72 tiles (67%)
    (3072, 3000, 3072, 132, 0),  # N not a multiple of 256: not measured, not split
    (3072, 3072, 3000, 132, 0),  # K not a multiple of 64: the same
])
def test_last_wave_split(m, n, k, sms, split):
    assert matmul_module().last_wave_split(m, n, k, sms) == split


def test_last_wave_split_leaves_whole_waves_above_it():
    module = matmul_module()
    tile_m, tile_n, tile_k = module.WAVE_TILE[:3]
    generator = torch.Generator().manual_seed(0)
    splits = 0
    for m, columns, sms in torch.randint(1, 12000, (3000, 3), generator=generator).tolist():
        n, sms = (columns % 48 + 1) * tile_n, sms % 200 + 8
        split = module.last_wave_split(m, n, 4 * tile_k, sms)
        if not split:
            continue
        splits += 1
        per_row = n // tile_n
        tiles_above = split // tile_m * per_row
        full_waves = (-(-m // tile_m) * per_row) // sms
        assert split % tile_m == 0 and 0 < split < m and full_waves in module.FULL_WAVES
        # as many rows of tiles as full waves hold, short of one row at most
        assert full_waves * sms - per_row < tiles_above <= full_waves * sms
        # and what is left for the last wave fills at most MAX_TAIL_SHARE of the SMs
        tail = -(-m // tile_m) * per_row - full_waves * sms
        assert 0 < tail <= module.MAX_TAIL_SHARE * sms
    assert splits > 20  # the rule was exercised


@pytest.mark.parametrize("capability,dtype,n,split", [
    ((9, 0), torch.float16, 3072, 2816),  # an H100: split, as last_wave_split says
    ((9, 0), torch.bfloat16, 3072, 2816),
    ((9, 0), torch.float32, 3072, 0),  # float32's stages of WAVE_TILE overflow shared memory
    ((9, 0), torch.float16, 3071, 0),  # ragged N: c is padded to 3072, b is not split
    ((12, 0), torch.float16, 3072, 0),  # TMA but ~99 KiB per program (RTX 50-series)
    ((10, 0), torch.float16, 3072, 0),  # not measured off Hopper
], ids=["hopper_fp16", "hopper_bf16", "hopper_fp32", "ragged_n", "sm_120", "sm_100"])
def test_the_split_is_chosen_only_where_it_was_measured(monkeypatch, capability, dtype, n,
                                                        split):
    module = matmul_module()
    monkeypatch.setattr(module, "interpreting", lambda: False)
    monkeypatch.setattr(module, "compute_capability", lambda device: capability)
    monkeypatch.setattr(module, "multiprocessors", lambda device: 132)
    a = torch.empty(3072, 3072, dtype=dtype)  # never read: only its shape and dtype count
    assert module.default_split(a, n, 3072) == split


@pytest.mark.parametrize("split,dtype,descriptors,why", [
    (128, torch.float16, False, r"^split=128 cannot be launched: it needs the descriptor "
                                r"kernel \(descriptors=True\)$"),
    (128, torch.float32, True, r"float32 stages of WAVE_TILE overflow shared memory: it "
                               r"needs 16-bit inputs$"),
    (100, torch.float16, True, r"launched: it must be a multiple of 128 rows$"),
    (256, torch.float16, True, r"launched: it must lie inside the product's 256 rows$"),
    (-128, torch.float16, True, r"launched: it must lie inside the product's 256 rows$"),
], ids=["pointer_kernel", "float32", "not_a_tile_row", "past_the_last_row", "negative"])
def test_product_refuses_a_split_it_cannot_launch(device, split, dtype, descriptors, why):
    module = matmul_module()
    a = torch.randn(256, 64, device=device, dtype=dtype)
    b = torch.randn(64, 64, device=device, dtype=dtype)
    with pytest.raises(ValueError, match=why):
        module.product(a, b, descriptors=descriptors, split=split)


@pytest.mark.parametrize("layout", ["rr", "cr", "rc"])
def test_last_wave_split_computes_the_same_product(layout, device, check, launched):
    module = matmul_module()
    if not module.has_tma(device):
        pytest.skip("this GPU has no TMA")
    m, n, k = 304, 200, 80  # rows and columns 16-byte multiples: descriptors read all
    a = stored(m, k, 0, layout[0] == "c", device, torch.float16)
    b = stored(k, n, 0, layout[1] == "c", device, torch.float16)
    c = module.product(a, b, descriptors=True, split=128)  # rows 128-303 in TAIL_TILE tiles
    check("matmul", c, expected(a, b), rtol=tolerance(torch.float16, tensor_cores=True))
    assert launched == [module.matmul_tma_kernel.fn] * 2 and c.shape == (m, n)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_matmul_splits_the_last_wave_on_the_gpu(dtype, device, check, launched):
    module = matmul_module()
    if device.type != "cuda" or not module.has_tma(device):
        pytest.skip("needs a GPU with TMA: the rule counts its SMs")
    a = torch.randn(3072, 512, device=device, dtype=dtype)
    b = torch.randn(512, 3072, device=device, dtype=dtype)
    split = module.default_split(a, 3072, 512)
    check("matmul", matmul(a, b), expected(a, b), rtol=tolerance(dtype, tensor_cores=True))
    assert launched == ([module.matmul_tma_kernel.fn] * 2 if split
                        else [module.matmul_tma_kernel])


def test_tile_shapes_follow_the_configuration_and_the_layout():
    from triton_guide.matmul import _set_tile_shapes, descriptor

    a, b = torch.zeros(64, 32), torch.zeros(32, 48)
    nargs = {"a_desc": descriptor(a), "b_desc": descriptor(b),
             "BLOCK_SIZE_M": 64, "BLOCK_SIZE_N": 16, "BLOCK_SIZE_K": 32}
    _set_tile_shapes(nargs)
    assert nargs["a_desc"].block_shape == [64, 32] and nargs["b_desc"].block_shape == [32, 16]
    nargs.update(a_desc=descriptor(a.t().contiguous().t()), A_COLUMNS=True,
                 b_desc=descriptor(b.t().contiguous().t()), B_COLUMNS=True)
    _set_tile_shapes(nargs)  # descriptors over a.t() and b.t(): K x M and N x K tiles
    assert nargs["a_desc"].block_shape == [32, 64] and nargs["b_desc"].block_shape == [16, 32]


def test_alignment_hint_covers_k_not_only_the_row_stride(device, check):
    # rows 1024 elements apart (16-aligned) but K = 1000: A_ALIGN must be 8, not 16
    a = torch.randn(40, 1024, device=device, dtype=torch.float16)[:, :1000]
    b = torch.randn(1000, 24, device=device, dtype=torch.float16)
    check("matmul", matmul(a, b), expected(a, b), rtol=tolerance(torch.float16, tensor_cores=True))


@pytest.mark.parametrize("shape,offset,unaligned", [
    ((4, 8), 0, False), ((4, 6), 0, True), ((4, 8), 1, True), ((1, 3), 0, True),
], ids=["16_bytes", "12_bytes", "base_off_by_one", "one_row_of_6_bytes"])
def test_unaligned_runs(shape, offset, unaligned):
    from triton_guide.matmul import layout, unaligned_runs

    rows, width = shape
    x = torch.zeros(rows * width + offset, dtype=torch.float16)[offset:].view(rows, width)
    assert unaligned_runs(x) == unaligned
    assert unaligned_runs(x.t()) == unaligned  # the same storage, read column by column
    assert layout(x)[0] is False and layout(x.t())[0] is True


def test_no_stride_of_1_means_no_runs_to_align():
    from triton_guide.matmul import layout, unaligned_runs

    every_other = torch.zeros(4, 8, dtype=torch.float16)[:, ::2]
    assert layout(every_other) == (False, 1) and not unaligned_runs(every_other)


def test_aligned_copies_pad_k_with_zeros():
    from triton_guide.matmul import aligned_copies

    a, b = torch.randn(5, 13), torch.randn(13, 7)
    padded_a, padded_b = aligned_copies(a, b)
    assert padded_a.shape == (5, 16) and padded_b.shape == (16, 7)
    assert padded_a.stride() == (16, 1) and padded_b.stride() == (1, 16)  # b column by column
    assert torch.equal(padded_a[:, :13], a) and torch.equal(padded_b[:13], b)
    assert not padded_a[:, 13:].any() and not padded_b[13:].any()


@pytest.mark.parametrize("shape,offset,columns", [
    ((5, 13), 0, False), ((5, 13), 0, True), ((3, 16), 1, False), ((6, 9), 0, True),
], ids=["rows_26_bytes", "columns_26_bytes", "base_off_by_one", "columns_18_bytes"])
def test_row_aligned_copies_what_a_descriptor_cannot_read(shape, offset, columns):
    from triton_guide.matmul import descriptor_ready, layout, row_aligned

    x = stored(*shape, offset, columns, "cpu", torch.float16)
    assert not descriptor_ready(x)
    copy = row_aligned(x)
    assert descriptor_ready(copy) and torch.equal(copy, x)
    assert copy.data_ptr() != x.data_ptr()
    assert layout(copy)[0] == columns  # stored in x's own order: the copy reads long runs
    assert row_aligned(copy) is copy  # nothing to do for a matrix a descriptor can read


@pytest.mark.parametrize("layout", ["rr", "rc", "cr", "cc"])
def test_descriptor_kernel_never_reads_the_padding(layout, device):
    # Rows padded with NaN past their end, as row_aligned's buffers may hold anything there:
    # the descriptors have the matrices' own shapes, so a NaN in c means padding was read.
    from triton_guide.matmul import descriptor_ready, product

    def nan_padded(rows, cols, columns):
        shape = (cols, rows + 5) if columns else (rows, cols + 5)
        buffer = torch.full(shape, float("nan"), device=device, dtype=torch.float16)
        buffer[:, :shape[1] - 5] = torch.randn(shape[0], shape[1] - 5, device=device,
                                               dtype=torch.float16)
        x = buffer[:, :shape[1] - 5]
        return x.t() if columns else x

    m, n, k = 35, 19, 43  # padded by 5 to 40, 24 and 48: 80, 48 and 96 bytes
    a, b = nan_padded(m, k, layout[0] == "c"), nan_padded(k, n, layout[1] == "c")
    assert descriptor_ready(a) and descriptor_ready(b)
    c = product(a, b, descriptors=True)
    assert not c.isnan().any()
    torch.testing.assert_close(c.double(), expected(a, b), rtol=1e-2, atol=1e-2)


def test_row_aligned_lays_out_a_matrix_without_a_stride_of_1_by_rows():
    from triton_guide.matmul import descriptor_ready, layout, row_aligned

    every_other = torch.randn(4, 16, dtype=torch.float16)[:, ::2]
    copy = row_aligned(every_other)
    assert descriptor_ready(copy) and torch.equal(copy, every_other)
    assert layout(copy)[0] is False


@pytest.mark.parametrize("n,item_size,flops_needed,width", [
    (4097, 2, 0, 4104), (4096, 2, 0, 4096), (1000, 2, 0, 1000), (1001, 4, 0, 1004),
    (4097, 2, float("inf"), 4097),
], ids=["float16_odd", "float16_even", "float16_2000_bytes", "float32_odd", "small_product"])
def test_output_rows_padded_to_16_bytes_for_large_products(n, item_size, flops_needed, width,
                                                           monkeypatch):
    module = matmul_module()
    monkeypatch.setattr(module, "COPY_MIN_FLOPS", flops_needed)
    assert module.output_width(64, n, 64, item_size) == width


def test_alignment_is_the_largest_power_of_two_dividing_all():
    from triton_guide.matmul import alignment

    assert [alignment(v) for v in (1000, 4096, 4093, 6, 12, 0)] == [8, 16, 1, 2, 4, 16]
    assert alignment(1000, 36) == 4 and alignment(64, 96, 80) == 16


def test_pruning_keeps_tiles_that_fit_the_shape(monkeypatch):
    import importlib

    import triton

    module = importlib.import_module("triton_guide.matmul")
    monkeypatch.setattr(module, "multiprocessors", lambda device: 132)  # an H100's
    monkeypatch.setattr(module, "shared_memory_per_block", lambda device: 232448)
    configs = [triton.Config({"BLOCK_SIZE_M": m, "BLOCK_SIZE_N": n, "BLOCK_SIZE_K": 64,
                              "GROUP_SIZE_M": 8}, num_stages=3) for m, n in
               [(128, 256), (128, 128), (64, 64), (16, 64)]]

    def kept(m, n, dtype=torch.float16):
        a = torch.empty(0, dtype=dtype)
        pruned = module.prune_configs(configs, {"M": m, "N": n, "K": 4096, "a_ptr": a})
        return [(c.kwargs["BLOCK_SIZE_M"], c.kwargs["BLOCK_SIZE_N"]) for c in pruned]

    assert kept(1, 4096) == [(16, 64)]  # decode: only 16-row tiles
    assert kept(1024, 1024) == [(128, 256), (128, 128), (64, 64), (16, 64)]  # 64 large tiles
    assert kept(8192, 8192) == [(128, 256), (128, 128)]  # 4096 large tiles: large only
    assert kept(64, 64) == [(64, 64)]  # few rows: tiles 64 rows tall
    assert kept(128, 4096) == [(128, 256), (128, 128)]  # 65-128 rows: one row of tiles
    assert kept(200, 4096) == [(64, 64)]
    assert kept(32, 4096) == [(16, 64)]  # 32 rows and fewer: every tile that fits
    assert kept(300, 4096) == [(128, 256), (128, 128), (64, 64), (16, 64)]
    # float32: 3 stages of 128 x 64 and 64 x 256 tiles need 288 KiB, more than the 227 KiB
    assert kept(8192, 8192, torch.float32) == [(128, 128)]


def test_the_float32_only_tile_is_tried_for_float32_alone(monkeypatch):
    # Three stages of 128 x 128 x 32 leave room for tf32x3's split operands; 16-bit inputs
    # keep the candidates they were tuned with.
    import importlib

    module = importlib.import_module("triton_guide.matmul")
    monkeypatch.setattr(module.torch.cuda, "current_device", lambda: 0)
    h100 = type("Props", (), {"multi_processor_count": 132,
                              "shared_memory_per_block_optin": 232448})
    monkeypatch.setattr(module.torch.cuda, "get_device_properties", lambda device: h100)
    configs = [module._config(*tile) for tile in
               [(128, 128, 32, 8, 4, 4), module.FLOAT32_ONLY_TILE]]

    def kept(dtype):
        named = {"M": 4096, "N": 4096, "K": 4096, "a_ptr": torch.empty(0, dtype=dtype)}
        return [module._tile_of(c) for c in module.prune_configs(configs, named)]

    assert kept(torch.float32) == [(128, 128, 32, 8, 4, 4), module.FLOAT32_ONLY_TILE]
    assert kept(torch.float16) == kept(torch.bfloat16) == [(128, 128, 32, 8, 4, 4)]
