"""The cached launch (triton_guide.launch): keyed at least as finely as Triton specialises,
and launching the same thing as ``kernel[grid]``.

The key and the launcher's bookkeeping are checked everywhere (against Triton's own
specialisation code and a stand-in compiled kernel); real launches are checked on a GPU.
"""

from __future__ import annotations

import itertools

import pytest
import torch
import triton
import triton.language as tl
from triton import knobs
from triton._C.libtriton import native_specialize_impl
from triton.backends.compiler import BaseBackend
from triton.runtime.jit import JITFunction
from triton.tools.tensor_descriptor import TensorDescriptor

import triton_guide as tg
from triton_guide import launch, runtime
from triton_guide.launch import FastLauncher, argument_key

NEEDS_GPU = pytest.mark.skipif(runtime.interpreting(),
                               reason="launches compiled kernels: needs a GPU")


def _backends():
    backends = [BaseBackend]
    try:
        from triton.backends.nvidia.compiler import CUDABackend
    except ImportError:
        pass
    else:
        backends.append(CUDABackend)
    return backends


def _sample_arguments(device):
    ints = [0, 1, 2, 3, 8, 15, 16, 17, 32, 48, 1000, 1024, 4093, 2**31 - 16, 2**31 - 1,
            2**31, 2**31 + 16, -1, -16, -17, -2**31, -2**31 - 1, -2**31 - 16, 2**40, 2**40 + 1,
            2**63 - 16, 2**63 - 1, 2**63, 2**64 - 16]
    tensors = []
    for dtype in (torch.float16, torch.bfloat16, torch.float32):
        base = torch.zeros(64, dtype=dtype, device=device)
        tensors += [base[offset:] for offset in range(9)]
    descriptors = []
    for dtype in (torch.float16, torch.bfloat16, torch.float32):
        base = torch.zeros(2, 3, 64, 32, dtype=dtype, device=device)
        for block, padding in itertools.product(([1, 1, 1, 32], [1, 1, 16, 32], [1, 1, 64, 32]),
                                                ("zero", "nan")):
            descriptors.append(TensorDescriptor(base, list(base.shape), list(base.stride()),
                                                block, padding=padding))
        # the same tiles over other sizes (another base, shape and strides): one key
        rows = torch.zeros(1, 5, 48, 32, dtype=dtype, device=device)
        descriptors.append(TensorDescriptor(rows, list(rows.shape), [16, 48 * 32, 32, 1],
                                            [1, 1, 16, 32]))
    return ints + tensors + descriptors + [0.5, 1.0, 3.0, True, False, None]


@pytest.mark.parametrize("backend", _backends(), ids=lambda b: b.__name__)
def test_argument_key_separates_everything_triton_specialises(backend, device):
    # Two arguments with the same key must get the same compiled kernel from Triton.
    by_key = {}
    for arg in _sample_arguments(device):
        triton_sees = native_specialize_impl(backend, arg, False, True, True)
        by_key.setdefault(argument_key(arg), set()).add(triton_sees)
    mixed = {key: seen for key, seen in by_key.items() if len(seen) > 1}
    assert not mixed, f"one launch key covers several Triton specialisations: {mixed}"
    # and the samples reach every case: dtypes x aligned or not, the integer classes, and
    # descriptors' dtypes x tiles x padding
    assert len(by_key) >= 6 + 8 + 18


def test_argument_key_refuses_what_it_does_not_know():
    import numpy as np

    with pytest.raises(launch._Unkeyed):
        argument_key(np.int64(16))


# A stand-in kernel for checking the bookkeeping without compiling anything.
def _toy(x_ptr, n, stride, BLOCK: tl.constexpr, FLAG: tl.constexpr = False):
    pass


class FakeCompiled:
    """What Triton's launch returns: a compiled kernel; records the launches made through it."""

    function, packed_metadata = "function-handle", "packed-metadata"

    def __init__(self):
        self.launches = []

    def run(self, *args):
        self.launches.append(args)


class FakeTriton:
    """Stands in for ``kernel[grid](...)`` (Triton's path): counts calls, returns a compiled kernel."""

    def __init__(self, kernel, best_config=None):
        self.calls, self.compiled = [], []
        self.best_config = best_config

        def run(*args, grid, warmup, **kwargs):
            self.calls.append((grid, args, kwargs))
            if best_config is not None:
                kernel.best_config = best_config
            self.compiled.append(FakeCompiled())
            return self.compiled[-1]

        kernel.run = run


class FakeDriver:
    class active:  # noqa: N801  (mirrors triton.runtime.driver.active)
        @staticmethod
        def get_current_device():
            return 0

        @staticmethod
        def get_current_stream(device):
            return 1234


@pytest.fixture
def toy(monkeypatch):
    monkeypatch.setattr(launch, "driver", FakeDriver)
    kernel = JITFunction(_toy)
    return kernel, FakeTriton(kernel)


def test_repeat_launch_skips_triton_and_passes_every_parameter(toy):
    kernel, triton_path = toy
    launcher = FastLauncher(kernel)
    x = torch.zeros(64)
    launcher[(3,)](x, 100, 1, BLOCK=64)
    assert len(triton_path.calls) == 1 and not triton_path.compiled[0].launches
    launcher[(5, 2)](x, 200, 1, BLOCK=64)  # same key: 100 and 200 are both i32, not 16-divisible
    assert len(triton_path.calls) == 1
    (launched,) = triton_path.compiled[0].launches
    # grid, stream, handle, metadata, no launch metadata or hooks, then every parameter in
    # the kernel's order with the default filled in
    assert launched == (5, 2, 1, 1234, "function-handle", "packed-metadata", None, None, None,
                        x, 200, 1, 64, False)


@pytest.mark.parametrize("change", ["misaligned pointer", "dtype", "int 16-divisible",
                                    "int equal to 1", "int past int32", "constexpr",
                                    "constexpr string", "float for int", "num_warps"])
def test_a_new_specialisation_goes_through_triton(toy, change):
    kernel, triton_path = toy
    launcher = FastLauncher(kernel)
    x = torch.zeros(64)
    first = dict(args=(x, 100, 3), kwargs=dict(BLOCK=64))
    second = {
        "misaligned pointer": dict(args=(x[1:], 100, 3), kwargs=dict(BLOCK=64)),
        "dtype": dict(args=(x.half(), 100, 3), kwargs=dict(BLOCK=64)),
        "int 16-divisible": dict(args=(x, 96, 3), kwargs=dict(BLOCK=64)),
        "int equal to 1": dict(args=(x, 100, 1), kwargs=dict(BLOCK=64)),
        "int past int32": dict(args=(x, 2**31 + 3, 3), kwargs=dict(BLOCK=64)),
        "constexpr": dict(args=(x, 100, 3), kwargs=dict(BLOCK=64, FLAG=True)),
        # as matmul's INPUT_PRECISION, one value per float32 matmul setting
        "constexpr string": dict(args=(x, 100, 3), kwargs=dict(BLOCK=64, FLAG="tf32x3")),
        "float for int": dict(args=(x, 100.0, 3), kwargs=dict(BLOCK=64)),
        "num_warps": dict(args=(x, 100, 3), kwargs=dict(BLOCK=64, num_warps=8)),
    }[change]
    for call in (first, second, first, second):
        launcher[(1,)](*call["args"], **call["kwargs"])
    # Triton saw each specialisation once; each then launched once through the short path
    assert len(triton_path.calls) == 2
    assert [len(c.launches) for c in triton_path.compiled] == [1, 1]


def test_grid_function_sees_every_parameter(toy):
    kernel, triton_path = toy
    launcher = FastLauncher(kernel)
    seen = []

    def grid(meta):
        seen.append(meta)
        return (triton.cdiv(meta["n"], meta["BLOCK"]),)

    x = torch.zeros(64)
    for n in (100, 300):
        launcher[grid](x, n, 3, BLOCK=64)
    assert seen == [dict(x_ptr=x, n=300, stride=3, BLOCK=64, FLAG=False)]
    assert triton_path.compiled[0].launches[0][:3] == (5, 1, 1)


def test_launch_hooks_send_every_call_through_triton(toy, monkeypatch):
    kernel, triton_path = toy
    launcher = FastLauncher(kernel)
    x = torch.zeros(64)
    launcher[(1,)](x, 100, 3, BLOCK=64)
    hooks = knobs.runtime.launch_enter_hook

    def profiler(metadata):
        pass

    if hasattr(hooks, "add"):  # Triton 3.5 on: a chain of hooks
        monkeypatch.setattr(hooks, "calls", [profiler])  # the chain as hooks.add leaves it
    else:
        monkeypatch.setattr(knobs.runtime, "launch_enter_hook", profiler)
    launcher[(1,)](x, 100, 3, BLOCK=64)
    assert len(triton_path.calls) == 2 and not triton_path.compiled[0].launches


def test_autotuned_kernel_keys_on_tuning_values_and_passes_the_config(monkeypatch):
    monkeypatch.setattr(launch, "driver", FakeDriver)
    config = triton.Config({"BLOCK": 128}, num_warps=4)
    kernel = triton.autotune(configs=[config], key=["n"])(JITFunction(_toy))
    triton_path = FakeTriton(kernel, best_config=config)
    launcher = FastLauncher(kernel)
    x = torch.zeros(64)
    for n, _ in itertools.product((100, 200), range(2)):  # two tuning keys, each twice
        launcher[(1,)](x, n, 3)
    assert len(triton_path.calls) == 2  # once per value of n: the tuner may pick differently
    assert [len(c.launches) for c in triton_path.compiled] == [1, 1]
    assert triton_path.compiled[1].launches[0][9:] == (x, 200, 3, 128, False)


def test_a_configuration_pre_hook_runs_before_every_short_launch(monkeypatch):
    # Triton's autotuner calls the chosen configuration's pre-hook before each launch (the
    # attention kernels' hook sets their descriptors' tiles): the short path must do the same.
    monkeypatch.setattr(launch, "driver", FakeDriver)
    seen = []
    config = triton.Config({"BLOCK": 128}, num_warps=4, pre_hook=seen.append)
    kernel = triton.autotune(configs=[config], key=["n"])(JITFunction(_toy))
    triton_path = FakeTriton(kernel, best_config=config)  # stands in for Triton's own path
    launcher = FastLauncher(kernel)
    x = torch.zeros(64)
    for stride in (3, 5, 7):
        launcher[(1,)](x, 100, stride)
    assert len(triton_path.calls) == 1 and len(triton_path.compiled[0].launches) == 2
    # FakeTriton does not call hooks, so these are the short path's two calls, in order
    assert [(hook_args["x_ptr"], hook_args["stride"], hook_args["BLOCK"], hook_args["num_warps"])
            for hook_args in seen] == [(x, 5, 128, 4), (x, 7, 128, 4)]


def test_an_autotuner_pre_hook_always_goes_through_triton(monkeypatch):
    monkeypatch.setattr(launch, "driver", FakeDriver)
    config = triton.Config({"BLOCK": 128}, num_warps=4)
    kernel = triton.autotune(configs=[config], key=["n"],
                             pre_hook=lambda args, reset_only=False: None)(JITFunction(_toy))
    triton_path = FakeTriton(kernel, best_config=config)
    launcher = FastLauncher(kernel)
    for _ in range(3):
        launcher[(1,)](torch.zeros(64), 100, 3)
    assert len(triton_path.calls) == 3


@pytest.mark.skipif(not runtime.interpreting(), reason="the interpreter's case")
def test_interpreter_launches_the_kernel_itself():
    from triton_guide.softmax import softmax_kernel

    assert launch.fast_launch(softmax_kernel) is softmax_kernel


@NEEDS_GPU
def test_on_the_gpu_repeat_launches_skip_triton_and_stay_right(monkeypatch, check):
    import importlib

    module = importlib.import_module("triton_guide.softmax")
    runs = []
    original = type(module.softmax_kernel).run

    def counting_run(self, *args, **kwargs):
        runs.append(self)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(type(module.softmax_kernel), "run", counting_run)
    base = torch.randn(4096 + 8, device="cuda")
    # aligned, then 4 bytes off, then aligned again, then rows of other lengths
    views = [base[:4096].view(32, 128), base[1:4097].view(32, 128), base[:4096].view(32, 128),
             base[8:4104].view(64, 64), base[:4095].view(35, 117)]
    for view in views * 2:
        check("softmax (cached launch)", tg.softmax(view), torch.softmax(view.double(), -1),
              rtol=1e-5)
    keys = {(v.data_ptr() % 16 == 0, v.shape) for v in views}
    assert len(runs) <= len(keys)  # Triton's path once per key at most, never per call


@NEEDS_GPU
def test_on_the_gpu_attention_repeats_skip_triton_and_stay_right(monkeypatch, check):
    # The attention kernels take tensor descriptors and autotuned configurations with
    # pre-hooks: after the first call per key, both passes take the short path.
    from test_attention import run_and_compare

    runs = []
    original = JITFunction.run

    def counting_run(self, *args, **kwargs):
        runs.append(self)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(JITFunction, "run", counting_run)
    shapes = [(1, 2, 128, 64, torch.float16), (1, 2, 77, 64, torch.float16),
              (2, 1, 128, 128, torch.bfloat16)]
    rounds = []
    for _ in range(3):
        for causal in (False, True):
            for *shape, dtype in shapes:
                q, k, v = (torch.randn(shape, device="cuda", dtype=dtype) for _ in range(3))
                run_and_compare(q, k, v, causal, check, name="attention (cached launch)")
        rounds.append(len(runs))
    # The first round tunes and compiles through Triton (every candidate configuration goes
    # through JITFunction.run); the later rounds must not touch it.
    assert rounds[0] > 0 and rounds[1:] == [rounds[0], rounds[0]]


@NEEDS_GPU
@pytest.mark.parametrize("m", [1, 16, 17])
def test_on_the_gpu_matmul_after_other_shapes(m, check):
    # M = 1 makes Triton fold M in as a constant, and 17 breaks 16-divisibility: each must
    # get its own compiled kernel, not the one from the previous shape.
    b = torch.randn(64, 48, device="cuda", dtype=torch.float16)
    for rows in (16, m, 16, m):
        a = torch.randn(rows, 64, device="cuda", dtype=torch.float16)
        check("matmul (cached launch)", tg.matmul(a, b), a.double() @ b.double(), rtol=1e-2,
              atol=1e-2)


def test_host_integer_helpers_match_triton():
    values = list(range(0, 70)) + [2**20 - 1, 2**20, 2**20 + 1, 2**31 + 5]
    assert [launch.next_power_of_2(n) for n in values] == [triton.next_power_of_2(n) for n in values]
    assert all(launch.cdiv(a, b) == triton.cdiv(a, b) for a in values for b in (1, 3, 16, 128))


def test_launch_key_separates_exactly_what_argument_key_separates():
    # launch_key inlines argument_key for speed: two argument lists must get equal keys
    # from one exactly when they get equal keys from the other.
    import itertools

    from triton_guide.launch import launch_key

    base = torch.zeros(64)
    pool = [1, 0, 16, 17, -1, 2**31, 2**40 + 1, 2**63, base, base[1:], base.half(),
            torch.nn.Parameter(base), 0.5, True, None]
    pairs = list(itertools.product(pool, repeat=2))
    for a in pairs:
        for b in pairs:
            same_inline = launch_key(a) == launch_key(b)
            same_plain = tuple(map(argument_key, a)) == tuple(map(argument_key, b))
            assert same_inline == same_plain, (a, b)



def test_unchecked_descriptor_equals_the_checked_one():
    import dataclasses

    from triton.tools.tensor_descriptor import TensorDescriptor

    from triton_guide.launch import unchecked_descriptor

    base = torch.zeros(8, 32)
    checked = TensorDescriptor(base, [8, 32], [32, 1], [4, 16])
    fast = unchecked_descriptor(base, [8, 32], [32, 1], [4, 16])
    assert type(fast) is TensorDescriptor
    for field in dataclasses.fields(TensorDescriptor):
        assert getattr(fast, field.name) is getattr(checked, field.name) or \
            getattr(fast, field.name) == getattr(checked, field.name), field.name
    assert argument_key(fast) == argument_key(checked)
