"""Launching a kernel that is already compiled, without Triton's per-call bookkeeping.

``kernel[grid](*args)`` runs a fair amount of Python on every call before the GPU sees
anything: it binds the arguments to the kernel's signature, works out how each one
specialises the compiled code (its dtype, whether a pointer or an integer is a multiple of
16, whether an integer equals 1), turns that into a cache key, looks the compiled kernel
up, builds launch metadata for profiling hooks and, under ``triton.autotune``, looks up the
chosen configuration first. On an H100 host that came to 40-150 us per call
(``benchmarks/launch_overhead.py``), while a small softmax or a 512^3 matmul runs for a
few microseconds: the GPU waits for Python.

``fast_launch(kernel)[grid](*args)`` launches exactly what ``kernel[grid](*args)`` would.
The first call for each *specialisation* goes through Triton (which compiles, or autotunes,
as usual) and keeps the compiled kernel it returns. The key it is kept under is built from
cheap checks that separate at least every case Triton's own specialisation separates
(:func:`argument_key`; ``tests/test_launch.py`` checks that against Triton's code), plus
the values of the constexpr keywords and of the autotuner's key. Later calls with the same
key hand the arguments straight to the compiled kernel's launcher, after running the chosen
configuration's pre-hook, if it has one, as the autotuner would.

It steps aside, so that every call takes Triton's own path, under the interpreter, when
launch hooks are installed (a profiler), for argument types it does not key (numpy
scalars), and for autotuners given a ``pre_hook`` of their own.
"""

from __future__ import annotations

import dataclasses
import os

import torch
from triton import knobs
from triton.runtime import Autotuner, JITFunction, driver
from triton.tools.tensor_descriptor import TensorDescriptor

from .runtime import interpreting

# TRITON_GUIDE_FAST_LAUNCH=0 makes every launch take Triton's own path (to compare, or to
# rule this module out when something looks wrong).
enabled = os.environ.get("TRITON_GUIDE_FAST_LAUNCH", "1") != "0"


class _Unkeyed(Exception):
    """An argument whose specialisation :func:`argument_key` does not know."""


def argument_key(arg: object) -> object:
    """What a runtime (non-constexpr) argument contributes to the launch key.

    Triton compiles a separate kernel for: each pointer dtype, pointers that are or are not
    16-byte aligned, integers that fit int32 / int64 / only uint64, integers that are or are
    not multiples of 16, and integers equal to 1 (folded in as constants). Floats, bools and
    ``None`` are specialised by type only; a tensor descriptor by its dtype and tile shape
    (its base, shape and strides are filled into the TMA descriptor at every launch).
    """
    kind = type(arg)
    if kind is int:
        return _int_key(arg)
    if isinstance(arg, torch.Tensor):
        return (arg.dtype, arg.data_ptr() & 15 == 0)
    if kind is float or kind is bool or arg is None:
        return kind
    if kind is TensorDescriptor:
        return (arg.base.dtype, tuple(arg.block_shape), arg.padding)
    raise _Unkeyed(kind)


def _int_key(value: int) -> int:
    """An integer's specialisation as one small int: equal to 1, else a multiple of 16 or
    not; plus its range (int32, int64, uint64 only)."""
    key = 1 if value == 1 else 2 if value % 16 == 0 else 3
    if -2**31 <= value < 2**31:
        return key
    return key + 4 if -2**63 <= value < 2**63 else key + 8


_Tensor = torch.Tensor


def launch_key(args: tuple) -> tuple:
    """``tuple(map(argument_key, args))``, inlined for the common kinds: this runs on every
    launch, and a function call per argument costs about as much as the rest of the key."""
    key = []
    append = key.append
    for arg in args:
        kind = type(arg)
        if kind is int:
            if -2**31 <= arg < 2**31 and arg != 1:
                append(2 if arg % 16 == 0 else 3)
            else:
                append(_int_key(arg))
        elif kind is _Tensor or isinstance(arg, _Tensor):
            append(arg.dtype)
            append(arg.data_ptr() & 15 == 0)
        else:
            append(argument_key(arg))
    return tuple(key)


def _hooks_idle() -> bool:
    """True when no launch hook (a profiler's) is installed, so none needs calling."""
    runtime = knobs.runtime
    enter, exit_ = runtime.launch_enter_hook, runtime.launch_exit_hook
    if enter is None and exit_ is None:
        return True
    return all(hook is None or not getattr(hook, "calls", True) for hook in (enter, exit_))


_DESCRIPTOR_DEFAULTS = {field.name: field.default for field in dataclasses.fields(TensorDescriptor)
                        if field.default is not dataclasses.MISSING}


def unchecked_descriptor(base: torch.Tensor, shape: list[int], strides: list[int],
                         block_shape: list[int]) -> TensorDescriptor:
    """``TensorDescriptor(base, shape, strides, block_shape)`` without its constructor's
    checks (alignment of the base and strides, rank, block shape), for a caller that has
    made them already: they cost several microseconds per descriptor on every call."""
    descriptor = object.__new__(TensorDescriptor)
    descriptor.__dict__.update(_DESCRIPTOR_DEFAULTS)
    descriptor.base, descriptor.shape, descriptor.strides = base, shape, strides
    descriptor.block_shape = block_shape
    return descriptor


# Host-side integer arithmetic for grids and block sizes. ``triton.cdiv`` and
# ``triton.next_power_of_2`` do the same, but they are constexpr functions that also accept
# Triton values, and that wrapper cost several microseconds per call on an H100's host.
def cdiv(a: int, b: int) -> int:
    """``ceil(a / b)`` for positive ints."""
    return -(-a // b)


def next_power_of_2(n: int) -> int:
    """The smallest power of two at least ``n`` (0 for 0, as Triton's)."""
    return 1 << (n - 1).bit_length() if n > 0 else 0


class FastLauncher:
    """``kernel[grid](...)``, remembering the compiled kernel per launch key."""

    def __init__(self, kernel):
        self.kernel = kernel
        self.tuned = isinstance(kernel, Autotuner)
        jit_function = kernel.fn if self.tuned else kernel
        self.arg_names = jit_function.arg_names
        active = driver.active
        # torch.cuda.current_device() checks CUDA's initialisation on every call; the
        # driver's query is that function, so call the query beneath it directly.
        self.current_device = (torch._C._cuda_getDevice
                               if active.get_current_device is torch.cuda.current_device
                               else active.get_current_device)
        self.current_stream = active.get_current_stream
        self.defaults = {p.name: p.default for p in jit_function.params if p.has_default}
        # The autotuner picks a configuration per value of its key arguments.
        self.tuning_positions = ([self.arg_names.index(name) for name in kernel.keys]
                                 if self.tuned else [])
        # launch key -> (compiled kernel, the values of the parameters after the positional
        # ones, the chosen configuration's pre-hook and its keyword values, or None)
        self.compiled: dict[tuple, tuple] = {}

    def __getitem__(self, grid):
        return lambda *args, **kwargs: self.launch(grid, args, kwargs)

    def launch(self, grid, args: tuple, kwargs: dict):
        device = self.current_device()
        try:
            key = (device, knobs.runtime.debug, launch_key(args), tuple(kwargs.items()),
                   tuple([args[i] for i in self.tuning_positions if i < len(args)])
                   if self.tuned else ())
        except _Unkeyed:
            return self.kernel[grid](*args, **kwargs)
        entry = self.compiled.get(key)
        if entry is None or not _hooks_idle():
            self._launch_through_triton(key, grid, args, kwargs)
            return
        compiled, tail, hook = entry
        if hook is not None or callable(grid):
            named = dict(zip(self.arg_names, (*args, *tail)))
            if hook is not None:
                pre_hook, config = hook
                pre_hook({**named, **config})
            if callable(grid):
                grid = grid(named)
        size = len(grid)
        compiled.run(grid[0], grid[1] if size > 1 else 1, grid[2] if size > 2 else 1,
                     self.current_stream(device), compiled.function,
                     compiled.packed_metadata, None, None, None, *args, *tail)

    def _launch_through_triton(self, key, grid, args, kwargs) -> None:
        compiled = self.kernel[grid](*args, **kwargs)
        if hasattr(compiled, "result"):  # a compilation still running in the background
            compiled = compiled.result()
        config, hook = {}, None
        if self.tuned:
            best = self.kernel.best_config
            if getattr(self.kernel, "user_defined_pre_hook", True):
                return  # a hook the short path does not know how to call: never take it
            config = best.all_kwargs()
            if best.pre_hook is not None:  # Triton runs it before every launch: so do we
                hook = (best.pre_hook, config)
        values = {**self.defaults, **{n: v for n, v in config.items() if n in self.arg_names},
                  **kwargs}
        tail = tuple(values[name] for name in self.arg_names[len(args):])
        self.compiled[key] = (compiled, tail, hook)


def fast_launch(kernel):
    """``fast_launch(kernel)[grid](*args, **constexprs)``: launch like ``kernel[grid]``, with
    the compiled kernel remembered per specialisation (see the module docstring).

    Under the interpreter, when disabled, or for anything that is not a ``triton.jit``
    function or autotuner (a test's stand-in), returns ``kernel`` itself.

    Pass runtime arguments positionally and only constexprs and launch options
    (``num_warps``) by keyword: keyword values go into the key as they are.
    """
    if interpreting() or not enabled:
        return kernel
    launcher = getattr(kernel, "_triton_guide_launcher", None)
    if launcher is None:
        if not isinstance(kernel, (JITFunction, Autotuner)):
            return kernel
        launcher = kernel._triton_guide_launcher = FastLauncher(kernel)
    return launcher
