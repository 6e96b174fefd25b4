"""What the kernels that ``solve`` launches do, seen from inside the Triton interpreter.

Under the interpreter every load, store and atomic of a kernel goes through one object,
``triton.runtime.interpreter.interpreter_builder``, with the addresses of all its lanes in
a numpy array, and every launch goes through ``run`` of the jitted function. While one case
runs, :class:`Watch` wraps those methods, so that the checker sees what a GPU would hide:

* every address is checked *before* the access. The interpreter reads and writes raw
  memory, so a store with a wrong stride used to land on the Python heap and kill the
  process ("free(): invalid size", no report); now a lane outside every tensor the kernel
  received is masked off and counted instead. This, not wider margins, is the protection:
  no margin is wide enough for every wrong stride, and a margin wide enough for the
  plausible ones costs hundreds of MB per case;
* a lane inside a buffer the checker allocated but not on an element of its tensor (in a
  margin, or in a gap of a strided view) is counted too, so an unmasked load is caught
  even when its value is thrown away or lost in a maximum (``tl.max`` ignores NaN);
* the masked-off lanes of a load without ``other=`` read NaN, not the interpreter's 0: on a
  GPU they hold whatever was in the registers (the checker runs a case again with
  ``+-3e38`` there when NaN passed, since ``tl.max`` and ``tl.min`` skip a NaN);
* an element that one program stores with a plain ``tl.store`` and another program of the
  same launch also reads, stores or updates atomically is a race: a GPU runs programs in
  no set order, so the result depends on which comes first (a load, an add and a store
  into a shared total, say, loses the other programs' additions). Two limits: a launch
  that calls ``tl.atomic_cas`` is not checked (a lock built with it makes such accesses
  safe, and the watch cannot tell a lock from a misuse), and tensors that ``solve``
  allocates itself are not watched for races. Two programs storing the same values into
  the same elements (an overlapping last block, say) is not a race;
* the programs of a launch run in reverse order: a GPU promises no order, and a kernel that
  relies on program 0 running first (to zero an output, say) then fails;
* ``tl.dot`` on float32 operands, which a GPU's tensor cores read as tf32 (10 of float32's
  23 fraction bits) unless ``input_precision="ieee"`` is asked for, gets its operands
  cut to tf32 here too (the interpreter would multiply them exactly), except where the
  exercise's statement asks for ``tl.dot`` and says the interpreter is exact;
* reads of chosen tensors are counted per element, for exercises that allow one pass, and
  stores likewise, for exercises that store each element of the output once;
* the bits a kernel last stored into each element are kept, so that the checker can tell
  an output that ``solve`` changed with PyTorch after the launch.

Launches are counted, and the arguments that reach a kernel as ``tl.constexpr`` noted, on a
GPU too (through ``JITFunction.run``); the memory checks exist only in the interpreter.
So, in both, are the PyTorch calls that ``solve``'s own file makes on an input
(:class:`TorchCalls`): ``x.amax(dim=1)`` handed to the kernel is PyTorch doing the
exercise's work.
"""

from __future__ import annotations

import inspect
import os
import sys
from collections import Counter
from dataclasses import dataclass, field

import numpy as np
import torch
from torch.overrides import TorchFunctionMode

from ..debugging import LAUNCH_OPTIONS, Compiled

# The NaN that the masked-off lanes of a float32 load without ``other=`` read: a payload of
# its own, so that a result computed from it can sometimes be told apart (numpy keeps the
# payload through + and *, not through exp).
UNDEFINED_BITS = 0x7FC0BAD0


class Region:
    """A buffer the checker allocated: a tensor's elements, and the margins and gaps around them.

    Addresses inside the buffer are counted in words, one per element of the buffer.
    """

    def __init__(self, name: str, tensor: torch.Tensor, buffer: torch.Tensor, *,
                 count_reads: bool = False, count_writes: bool = False):
        self.name = name
        self.tensor = tensor  # what solve receives: a view into buffer
        self.buffer = buffer
        self.start = buffer.data_ptr()
        self.end = self.start + buffer.numel() * buffer.element_size()
        flags = torch.zeros(buffer.numel(), dtype=torch.bool)
        self.first = tensor.storage_offset() - buffer.storage_offset()
        flags.as_strided(tensor.shape, tensor.stride(), self.first).fill_(True)
        self.is_element = flags.numpy()
        self.last = self.first + sum((size - 1) * stride
                                     for size, stride in zip(tensor.shape, tensor.stride()))
        self.read = False  # whether a kernel read one of its elements
        self.written = False  # whether a kernel stored into one of its elements
        self.reads = np.zeros(buffer.numel(), np.int64) if count_reads else None
        # How many times a kernel stored into each word with tl.store, over every launch.
        self.writes = np.zeros(buffer.numel(), np.int64) if count_writes else None
        # "read" / "wrote" -> the words off the elements that kernels touched.
        self.strays = {verb: np.zeros(buffer.numel(), bool) for verb in ("read", "wrote")}
        # Within one launch, per word: the first program that read it or updated it
        # atomically, and whether another did too; the first program that stored into it
        # with tl.store, the bits it stored, and whether another stored other bits.
        size = buffer.numel()
        self.accessor = np.full(size, -1, np.int64)
        self.accessed_by_more = np.zeros(size, bool)
        self.storer = np.full(size, -1, np.int64)
        self.stored_bits = np.zeros(size, np.int64)
        self.stores_differ = np.zeros(size, bool)
        self.races = np.zeros(size, bool)  # over every launch so far
        # Over every launch: the bits last stored into each word with tl.store, and whether
        # that store is the word's last write by a kernel (an atomic update clears it).
        self.final_bits = np.zeros(size, np.int64)
        self.final_by_store = np.zeros(size, bool)

    def new_launch(self) -> None:
        self.accessor.fill(-1)
        self.accessed_by_more.fill(False)
        self.storer.fill(-1)
        self.stores_differ.fill(False)

    def touch(self, words: np.ndarray, program: int, stored: np.ndarray | None) -> None:
        """Program ``program`` read or atomically updated ``words`` (``stored`` None), or
        stored the values ``stored`` into them with tl.store."""
        if stored is None:
            first = self.accessor[words]
            self.accessed_by_more[words] |= (first >= 0) & (first != program)
            self.accessor[words] = np.where(first < 0, program, first)
            return
        bits = _bits(stored)
        if self.writes is not None:
            np.add.at(self.writes, words, 1)
        self.final_bits[words] = bits
        self.final_by_store[words] = True
        first = self.storer[words]
        self.stores_differ[words] |= ((first >= 0) & (first != program)
                                      & (self.stored_bits[words] != bits))
        new = first < 0
        self.storer[words[new]] = program
        self.stored_bits[words[new]] = bits[new]

    def stored_by(self) -> np.ndarray:
        """The program that first stored into each element of the tensor with tl.store in
        the last launch (-1 where none did), shaped as the tensor."""
        return torch.from_numpy(self.storer).as_strided(
            self.tensor.shape, self.tensor.stride(), self.first).numpy()

    def atomic_update(self, words: np.ndarray) -> None:
        """``words`` were updated atomically: their value is no longer one a store chose."""
        self.final_by_store[words] = False

    def changed_since_stored(self) -> np.ndarray:
        """The words whose value differs from what a kernel's last tl.store put there."""
        current = _bits(self.buffer.detach().cpu().reshape(-1).numpy())
        return self.final_by_store & (current != self.final_bits)

    def end_launch(self, locks: bool) -> None:
        """``locks``: the launch called tl.atomic_cas, maybe as a lock; not checked."""
        if locks:
            return
        stored = self.storer >= 0
        read_by_another = self.accessed_by_more | (
            (self.accessor >= 0) & (self.accessor != self.storer))
        self.races |= stored & read_by_another | self.stores_differ

    def where(self, words: np.ndarray) -> Counter:
        """How many of ``words`` (none of them elements) lie before, after and between."""
        before = int((words < self.first).sum())
        after = int((words > self.last).sum())
        return Counter({"before the start of": before, "past the end of": after,
                        "between the elements of": words.size - before - after})


# The float32 fraction bits that tf32 drops (it keeps the top 10 of 23).
TF32_DROPPED_BITS = 13


def to_tf32(values: np.ndarray) -> np.ndarray:
    """float32 ``values`` cut to tf32 as an H100's tensor cores read them in ``tl.dot``:
    the low 13 fraction bits dropped, so rounded toward zero (measured: 1 + 2**-11 comes
    out 1.0, -(1 + 2**-11) -1.0; ``tests/test_exercises.py``). Still float32."""
    bits = np.ascontiguousarray(values, np.float32).view(np.uint32)
    keep = np.uint32(~((1 << TF32_DROPPED_BITS) - 1) & 0xFFFFFFFF)
    cut = (bits & keep).view(np.float32)
    return np.where(np.isnan(values), values, cut).astype(np.float32)


def _bits(values: np.ndarray) -> np.ndarray:
    """The bits of ``values`` as float64, one int64 per value: equal exactly when the
    values are (NaN payloads and the sign of zero included)."""
    return np.asarray(values).astype(np.float64).view(np.int64)


@dataclass
class Launch:
    kernel: str
    constexprs: dict[str, object]  # the arguments the kernel takes as tl.constexpr
    jitted: object = None  # the launched @triton.jit function
    # (signature, constexprs) to compile the kernel as this launch would on a GPU (see
    # triton_guide.debugging.compile_kernels), or None where an argument has no type the
    # checker knows how to name.
    compile_as: tuple[dict[str, str], dict[str, object]] | None = None
    grid: tuple[int, ...] | None = None  # the grid, a callable's evaluated; None if unknown
    # The launch options given (num_warps, num_stages, ...: debugging.LAUNCH_OPTIONS), by
    # the call or by an autotuner's configuration; Triton's defaults for the others.
    options: dict[str, int] = field(default_factory=dict)
    # In a dry run on a GPU: what compiling this launch there gave (Triton's own compiler,
    # without launching), as debugging.compile_kernels reports it. None elsewhere.
    native: Compiled | None = None


# Triton's name for the element type behind a pointer to a tensor of each dtype.
POINTER_TYPES = {torch.float32: "fp32", torch.float16: "fp16", torch.bfloat16: "bf16",
                 torch.float64: "fp64", torch.int8: "i8", torch.int16: "i16",
                 torch.int32: "i32", torch.int64: "i64", torch.uint8: "u8", torch.bool: "i1"}


def _compile_as(fn, arguments: dict, constexpr_names: set[str]):
    """The signature and constexprs a GPU launch with ``arguments`` compiles ``fn`` with
    (integers as i32 or i64 by their value, as Triton does; no alignment assumed), or
    None when an argument is missing or of a kind not named here."""
    signature, constexprs = {}, {}
    for name, parameter in inspect.signature(fn).parameters.items():
        if name in arguments:
            value = arguments[name]
        elif parameter.default is not inspect.Parameter.empty:
            value = parameter.default
        else:
            return None
        if name in constexpr_names or value is None:
            if not isinstance(value, (bool, int, float, str, type(None))):
                return None  # a tl.dtype, say: not passed to the compiler's process
            signature[name], constexprs[name] = "constexpr", value
        elif isinstance(value, torch.Tensor) and value.dtype in POINTER_TYPES:
            signature[name] = "*" + POINTER_TYPES[value.dtype]
        elif isinstance(value, bool):
            signature[name] = "i1"
        elif isinstance(value, int):
            signature[name] = "i32" if -2**31 <= value < 2**31 else "i64"
        elif isinstance(value, float):
            signature[name] = "fp32"
        else:
            return None
    return signature, constexprs


def _from_autotuner() -> bool:
    """Whether the launch being made comes from ``triton.autotune`` (its timing of the
    configurations, or its launch of the one it picked)."""
    frame = sys._getframe(2)
    while frame is not None:
        if frame.f_code.co_filename.endswith(os.path.join("runtime", "autotuner.py")):
            return True
        frame = frame.f_back
    return False


def _compile_natively(run, function, args, grid, kwargs) -> Compiled:
    """Compile one launch for the GPU here without launching it (Triton's warm-up path),
    as :class:`~triton_guide.debugging.Compiled`."""
    try:
        kernel = run(function, *args, grid=grid, warmup=True, **kwargs)
    except Exception as error:
        return Compiled(type(error).__name__, str(error), "", "")
    return Compiled(None, "", "", kernel.asm.get("ptx", ""), kernel.metadata.shared)


def _grid_shape(grid, arguments: dict) -> tuple[int, ...] | None:
    """The grid of a launch: a tuple as given, or what a callable grid returns for the
    launch's arguments (as Triton calls it); None if that fails."""
    if callable(grid):
        try:
            grid = grid(arguments)
        except Exception:
            return None
    if isinstance(grid, (tuple, list)) and all(isinstance(g, int) for g in grid):
        return tuple(grid)
    return None


def _constexpr_names(fn) -> set[str]:
    names = set()
    for name, parameter in inspect.signature(fn).parameters.items():
        annotation = parameter.annotation
        text = annotation if isinstance(annotation, str) else getattr(annotation, "__name__", "")
        if text.split(".")[-1] == "constexpr":
            names.add(name)
    return names


# What solve may do with an input through PyTorch besides taking views of it (any call
# whose result shares the input's memory, x.float() on float32 included): read its shape,
# strides and other metadata, allocate tensors like it, or copy it (a copy the interpreter
# notices, since no kernel then reads the input itself). Property getters (x.shape, x.T)
# all arrive as __get__.
METADATA_CALLS = frozenset({
    "__get__", "size", "stride", "dim", "ndimension", "numel", "nelement", "data_ptr",
    "element_size", "storage_offset", "is_contiguous", "is_floating_point", "get_device",
    "untyped_storage", "type", "__len__", "__hash__", "__format__", "__repr__", "__str__",
    "contiguous", "clone", "empty_like", "zeros_like", "ones_like", "full_like", "new_empty",
    "new_zeros", "new_ones", "new_full", "is_neg", "is_conj",
})


# Functions that make a tensor from nothing: without ``device=`` it lands on the CPU.
FACTORY_CALLS = frozenset({"empty", "zeros", "ones", "full", "rand", "randn", "randint",
                           "arange", "tensor", "empty_strided", "linspace", "eye"})


class TorchCalls(TorchFunctionMode):
    """Watches the PyTorch calls made from ``source_file`` (solve's file).

    :attr:`found` gets ``(input name, function name, line)`` for each call on a tensor that
    lies in one of ``inputs`` (the checker's buffers around the inputs), other than
    :data:`METADATA_CALLS` and calls that return a view of an input. :attr:`made_on_cpu`
    keeps each tensor made by a :data:`FACTORY_CALLS` function without ``device=`` (so on the CPU, whatever device
    the kernels run on), with the function's name and line: in the interpreter, where
    everything is on the CPU, such a tensor works, and on a GPU a kernel cannot read it.
    """

    def __init__(self, inputs: list[Region], source_file: str | None):
        super().__init__()
        self.inputs = inputs
        self.source_file = source_file
        self.found: list[tuple[str, str, int]] = []
        self.made_on_cpu: list[tuple[torch.Tensor, str, int]] = []
        self._is_solves: dict[str, bool] = {}  # file name -> whether it is solve's file

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = getattr(func, "__name__", "")
        caller = sys._getframe(1)
        from_solve = self._from_solve(caller.f_code.co_filename)
        result = func(*args, **kwargs)
        if not from_solve:
            return result
        if name not in METADATA_CALLS and not self._in_input(result):
            touched = self._input_in(args, kwargs)
            if touched is not None:
                self.found.append((touched, name, caller.f_lineno))
        if (name in FACTORY_CALLS and kwargs.get("device") is None
                and isinstance(result, torch.Tensor) and result.device.type == "cpu"):
            self.made_on_cpu.append((result, name, caller.f_lineno))
        if name in ("to", "cuda") and args and (len(args) > 1 or kwargs):
            # x.to(device): in the interpreter the same tensor comes back, now on purpose.
            self.made_on_cpu = [entry for entry in self.made_on_cpu if entry[0] is not args[0]]
        return result

    def _in_input(self, value) -> bool:
        """Whether ``value`` is a tensor in an input's memory: a view of it, or the input."""
        return isinstance(value, torch.Tensor) and self._region_of(value) is not None

    def _region_of(self, tensor: torch.Tensor) -> str | None:
        if tensor.device.type == "meta":
            return None
        start = tensor.untyped_storage().data_ptr()
        for region in self.inputs:
            if region.start <= start < region.end:
                return region.name
        return None

    def _from_solve(self, filename: str) -> bool:
        if self.source_file is None:
            return False
        if filename not in self._is_solves:
            self._is_solves[filename] = os.path.realpath(filename) == self.source_file
        return self._is_solves[filename]

    def _input_in(self, args, kwargs) -> str | None:
        for value in [*args, *kwargs.values()]:
            values = value if isinstance(value, (list, tuple)) else (value,)
            for tensor in values:
                if isinstance(tensor, torch.Tensor):
                    name = self._region_of(tensor)
                    if name is not None:
                        return name
        return None


class Watch:
    """Watches the kernels launched while it is entered (a ``with`` block around ``solve``).

    ``regions`` are the checker's buffers. A tensor that ``solve`` allocates and passes to a
    kernel is allowed as a whole, and not watched further.
    """

    def __init__(self, regions: list[Region], *, memory: bool, undefined: float | None = None,
                 tf32: bool = True, dry: bool = False, compile_dry: bool = False):
        self.regions = regions
        self.memory = memory
        self.dry = dry  # record launches without running them (meta tensors, any size)
        # In a dry run, compile each launch with Triton's own compiler for the GPU here
        # (a warm-up call: compiled, not launched), into Launch.native.
        self.compile_dry = compile_dry
        self.autotuned = False  # whether a launch came through triton.autotune's timing
        self.tf32 = tf32  # cut float32 tl.dot operands to tf32 (interpreter only)
        self.tf32_dots = 0  # how many tl.dot calls had their operands cut so
        # What the masked-off lanes of a float load without other= read: None for the NaN
        # of UNDEFINED_BITS, else this value.
        self.undefined = undefined
        self.undefined_read = False  # whether a load had such lanes
        self.program = 0  # the program now running: its program ids, flattened (x first)
        self.compare_and_swap = False  # whether the launch now running called tl.atomic_cas
        self.launches: list[Launch] = []
        self.outside: dict[str, set[int]] = {"read": set(), "wrote": set()}
        self._own: list[tuple[int, int]] = []  # byte ranges of solve's own tensors
        self.launched_tensors: list[torch.Tensor] = []  # every tensor passed to a kernel
        self._restore: list[tuple[object, str, object]] = []

    # -- what the checker asks afterwards -------------------------------------------------

    def strays(self) -> list[tuple[str, str, str | None, int]]:
        """``(verb, where, name, count)`` for every access off the elements of a tensor.

        ``name`` is ``None`` for addresses outside every tensor the kernel received.
        """
        found = [(verb, "outside every tensor", None, len(addresses))
                 for verb, addresses in self.outside.items() if addresses]
        for region in self.regions:
            for verb, touched in region.strays.items():
                for where, count in region.where(np.flatnonzero(touched)).items():
                    if count:
                        found.append((verb, where, region.name, count))
        return found

    def races(self) -> list[tuple[str, int]]:
        """``(name, count)`` for every tensor with elements that programs raced on."""
        return [(region.name, int(region.races.sum())) for region in self.regions
                if region.races.any()]

    # -- patching -------------------------------------------------------------------------

    def __enter__(self):
        from triton.runtime.interpreter import InterpretedFunction, interpreter_builder
        from triton.runtime.jit import JITFunction

        for kind in (JITFunction, InterpretedFunction):
            self._wrap(kind, "run", self._run, bind_self=True)
        if self.memory:
            builder = interpreter_builder
            self._wrap(builder, "create_masked_load", self._load)
            self._wrap(builder, "create_masked_store", self._store)
            self._wrap(builder, "create_atomic_rmw", self._atomic_rmw)
            self._wrap(builder, "create_atomic_cas", self._atomic_cas)
            self._wrap(builder, "set_grid_idx", self._reversed_grid_idx)
            if self.tf32:
                self._wrap(builder, "create_dot", self._dot)
        return self

    def __exit__(self, *exc_info):
        for owner, name, original in reversed(self._restore):
            if original is None:
                delattr(owner, name)
            else:
                setattr(owner, name, original)
        self._restore.clear()
        return False

    def _wrap(self, owner, name, wrapper, *, bind_self=False):
        # An instance attribute shadows the class's method; a class attribute is replaced.
        original = getattr(owner, name)
        self._restore.append((owner, name, owner.__dict__.get(name)))
        if bind_self:
            def method(function_self, *args, **kwargs):
                return wrapper(original, function_self, *args, **kwargs)
            setattr(owner, name, method)
        else:
            setattr(owner, name, lambda *args, **kwargs: wrapper(original, *args, **kwargs))

    # -- launches -------------------------------------------------------------------------

    def _run(self, original, function, *args, grid, warmup, **kwargs):
        if not warmup:
            fn = function.fn
            signature = inspect.signature(fn)
            try:
                arguments = signature.bind_partial(*args, **{
                    k: v for k, v in kwargs.items() if k in signature.parameters}).arguments
            except TypeError:
                arguments = {}  # wrong arguments: Triton's own error says which
            names = _constexpr_names(fn)
            self.launches.append(Launch(
                fn.__name__, {name: value for name, value in arguments.items() if name in names},
                jitted=function, compile_as=_compile_as(fn, arguments, names),
                grid=_grid_shape(grid, {**arguments, **kwargs}),
                options={name: kwargs[name] for name in LAUNCH_OPTIONS
                         if kwargs.get(name) is not None}))
            if self.dry:
                self.autotuned |= _from_autotuner()
                if self.compile_dry and not self.autotuned:
                    self.launches[-1].native = _compile_natively(
                        original, function, args, grid, kwargs)
                return None
            for value in [*args, *kwargs.values()]:
                if isinstance(value, torch.Tensor):
                    self._allow(value)
                    self.launched_tensors.append(value)
            for region in self.regions:
                region.new_launch()
            self.compare_and_swap = False
        result = original(function, *args, grid=grid, warmup=warmup, **kwargs)
        if not warmup:
            for region in self.regions:
                region.end_launch(locks=self.compare_and_swap)
        return result

    def _allow(self, tensor: torch.Tensor):
        storage = tensor.untyped_storage()
        start = storage.data_ptr()
        if any(region.start <= start < region.end for region in self.regions):
            return  # a view of one of the checker's tensors: watched as such
        self._own.append((start, start + storage.nbytes()))

    def _reversed_grid_idx(self, original, x, y, z):
        from triton.runtime.interpreter import interpreter_builder

        nx, ny, nz = interpreter_builder.grid_dim
        x, y, z = nx - 1 - x, ny - 1 - y, nz - 1 - z
        self.program = x + nx * (y + ny * z)  # as the kernel numbers itself
        return original(x, y, z)

    # -- memory ---------------------------------------------------------------------------

    def _check(self, addresses: np.ndarray, mask: np.ndarray | None, verb: str,
               stored: np.ndarray | None = None) -> np.ndarray:
        """The lanes of ``mask`` whose addresses are safe to access; strays are recorded, and
        which program touched which element (``stored``: the values of a tl.store, one per
        address; None for a load or an atomic)."""
        lanes = np.ones(addresses.shape, bool) if mask is None else \
            np.broadcast_to(mask, addresses.shape).copy()
        wanted = addresses[lanes].astype(np.uint64)
        values = None if stored is None else np.broadcast_to(stored, addresses.shape)[lanes]
        safe = np.zeros(wanted.shape, bool)
        for start, end in self._own:
            safe |= (wanted >= start) & (wanted < end)
        for region in self.regions:
            inside = (wanted >= region.start) & (wanted < region.end)
            if not inside.any():
                continue
            safe |= inside
            words = (wanted[inside] - np.uint64(region.start)) // np.uint64(
                region.buffer.element_size())
            words = words.astype(np.int64)
            element = region.is_element[words]
            region.strays[verb][words[~element]] = True
            region.touch(words[element], self.program,
                         None if values is None else values[inside][element])
            if verb == "wrote" and element.any():
                region.written = True
                if values is None:  # an atomic update
                    region.atomic_update(words[element])
            if verb == "read" and element.any():
                region.read = True
                if region.reads is not None:
                    region.reads += np.bincount(words[element], minlength=region.reads.size)
        if not safe.all():
            self.outside[verb].update(np.unique(wanted[~safe]).tolist())
            lanes[lanes] = safe
        return lanes

    # The builder's methods take cache and volatility arguments that differ between Triton
    # versions (3.6: cache_modifier, eviction_policy; 3.9: cache_policy): passed on as they are.
    def _load(self, original, ptrs, mask, other, *options):
        from triton.runtime.interpreter import TensorHandle, _get_np_dtype

        lanes = self._check(ptrs.data, mask.data, "read")
        element_type = ptrs.get_element_ty()
        dtype = _get_np_dtype(element_type)
        if other is None and np.issubdtype(dtype, np.floating):
            if self.undefined is not None:
                fill = np.array([self.undefined])
            elif dtype == np.float32:
                fill = np.array([UNDEFINED_BITS], np.uint32).view(np.float32)
            else:
                fill = np.array([np.nan])
            self.undefined_read |= not lanes.all()
            other = TensorHandle(np.full(ptrs.data.shape, fill[0], dtype), element_type)
        return original(ptrs, TensorHandle(lanes, mask.dtype), other, *options)

    def _store(self, original, ptrs, value, mask, *options):
        from triton.runtime.interpreter import TensorHandle

        lanes = self._check(ptrs.data, mask.data, "wrote", stored=value.data)
        return original(ptrs, value, TensorHandle(lanes, mask.dtype), *options)

    def _atomic_rmw(self, original, op, ptr, val, mask, sem, scope):
        from triton.runtime.interpreter import TensorHandle

        lanes = self._check(ptr.data, mask.data, "wrote")
        return original(op, ptr, val, TensorHandle(lanes, mask.dtype), sem, scope)

    def _dot(self, original, a, b, accumulator, input_precision, *options):
        from triton.runtime.interpreter import TensorHandle

        if (getattr(input_precision, "name", "") == "TF32" and a.data.dtype == np.float32
                and b.data.dtype == np.float32):
            self.tf32_dots += 1
            a = TensorHandle(to_tf32(a.data), a.dtype)
            b = TensorHandle(to_tf32(b.data), b.dtype)
        return original(a, b, accumulator, input_precision, *options)

    def _atomic_cas(self, original, ptr, cmp, val, sem, scope):
        self.compare_and_swap = True
        if not self._check(ptr.data, None, "wrote").all():
            # A compare-and-swap has no mask to switch the stray lanes off with.
            raise MemoryError("tl.atomic_cas on an address outside every tensor")
        return original(ptr, cmp, val, sem, scope)
