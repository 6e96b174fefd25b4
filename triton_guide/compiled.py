"""What the compiler made of a kernel: its registers per thread, spills, shared memory, how
many of its programs fit on one SM at once, and the instructions of its inner loop.

A launch is recorded, not run: :func:`record_launches` calls an op with every kernel launch
intercepted, so that the kernels, grids, arguments and constexprs are the ones the op's
launcher picks for those inputs. :func:`compile_for` then compiles each recorded launch for
a named GPU (sm_90, an H100 or H200, by default) the way Triton's JIT would for those
arguments (the same signature, the same alignment specialisation), in a separate process
that needs no GPU: Triton compiles for an explicit target, and its wheel ships ptxas and
cuobjdump. Registers and local memory come from ``cuobjdump -res-usage`` on the compiled
binary, shared memory from the compiled kernel's metadata. On a GPU,
:func:`gpu_compiled` reads the same numbers from the GPU's own compiled kernel (what
``kernel.n_regs``, ``kernel.n_spills`` and ``kernel.metadata.shared`` say).
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import importlib
import json
import os
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import torch

# --- the SM's limits and the occupancy they allow ----------------------------------------


@dataclasses.dataclass(frozen=True)
class SMLimits:
    """What one streaming multiprocessor holds at once (NVIDIA's CUDA C++ Programming
    Guide, "Features and Technical Specifications", and its occupancy calculator)."""

    name: str
    registers: int  # 32-bit registers per SM
    threads: int  # resident threads per SM
    programs: int  # resident thread blocks (Triton programs) per SM
    shared: int  # bytes of shared memory per SM that programs may use
    shared_per_program: int  # the most bytes one program may ask for
    reserved_shared: int  # bytes the system reserves per resident program
    thread_registers: int = 255  # the most registers one thread may have
    register_unit: int = 256  # registers are given to a warp in multiples of this
    shared_unit: int = 128  # shared memory is given to a program in multiples of this
    warp_size: int = 32


# Compute capability 9.0: 64 K registers, 2048 threads, 32 blocks, 228 KiB of shared memory
# per SM (227 KiB for one block), 1 KiB reserved per block.
HOPPER = SMLimits("sm_90 (H100, H200)", registers=65536, threads=2048, programs=32,
                  shared=228 * 1024, shared_per_program=227 * 1024, reserved_shared=1024)


@dataclasses.dataclass(frozen=True)
class Occupancy:
    """How many programs of a kernel fit on one SM, and what each resource allows."""

    programs: int  # the smallest of ``limits``
    limits: dict  # resource -> programs it allows: "registers", "shared", "threads", "programs"
    warps: int  # resident warps: programs * warps per program

    @property
    def limited_by(self) -> list[str]:
        """The resources that allow no more than :attr:`programs` (several where they tie),
        in the order registers, shared, threads, programs."""
        return [name for name, allowed in self.limits.items() if allowed == self.programs]


def _round_up(value: int, unit: int) -> int:
    return -(-value // unit) * unit


def occupancy(registers: int, shared: int, num_warps: int, sm: SMLimits = HOPPER) -> Occupancy:
    """Programs of ``num_warps`` warps, each thread using ``registers`` registers and each
    program ``shared`` bytes of shared memory, that fit on one SM at once."""
    if registers < 1 or num_warps < 1 or shared < 0:
        raise ValueError(f"registers and num_warps must be positive and shared >= 0, got "
                         f"registers={registers}, num_warps={num_warps}, shared={shared}")
    if shared > sm.shared_per_program:
        return Occupancy(0, {"shared": 0}, 0)
    warp_registers = _round_up(registers * sm.warp_size, sm.register_unit)
    limits = {
        "registers": (sm.registers // warp_registers) // num_warps,
        # the reserved kilobyte counts for programs without shared memory too
        "shared": sm.shared // (_round_up(shared, sm.shared_unit) + sm.reserved_shared),
        "threads": sm.threads // (num_warps * sm.warp_size),
        "programs": sm.programs,
    }
    programs = min(limits.values())
    return Occupancy(programs, limits, programs * num_warps)


# --- reading the compiled kernel ---------------------------------------------------------

_RESOURCE_LINE = re.compile(r"Function\s+(\S+?):?\s*\n\s*(REG:.*)")


def parse_resource_usage(text: str) -> dict[str, dict[str, int]]:
    """``cuobjdump -res-usage`` output -> {function: {"REG": .., "STACK": .., "SHARED": ..,
    "LOCAL": .., ...}} (bytes, except REG: registers per thread)."""
    usage = {}
    for name, fields in _RESOURCE_LINE.findall(text):
        pairs = re.findall(r"([A-Z_]+)(?:\[\d+\])?:(\d+)", fields)  # CONSTANT[0]:576 too
        usage[name] = {key: int(value) for key, value in pairs}
    return usage


# PTX instructions worth naming, matched as prefixes of an instruction's opcode; the longest
# match names it (``ld.global.v4.b32`` is an ld.global.v4, ``ld.global.b32`` an ld.global).
NAMED = ("wgmma.mma_async", "mma.sync", "cp.async.bulk.tensor", "cp.async.cg", "cp.async.ca",
         "ldmatrix", "ld.global.v4", "ld.global.v2", "ld.global", "st.global.v4",
         "st.global.v2", "st.global", "ld.shared", "st.shared", "ex2.approx", "shfl.sync",
         "bar.sync", "mbarrier.try_wait", "ld.local", "st.local")

_LABEL = re.compile(r"^\s*(\$?[\w.$]+):\s*(?://.*)?$")  # a comment may follow
_BRANCH = re.compile(r"\bbra(?:\.uni)?\s+(\$?[\w.$]+);")


def opcode(line: str) -> str | None:
    """The opcode of a PTX instruction line (its predicate dropped), or None for a label,
    directive, brace or comment."""
    text = line.strip()
    if text.startswith("@"):
        text = text.split(None, 1)[1] if " " in text else ""
    if not text or text[0] in "{}./$" or text.endswith(":"):
        return None
    return text.split()[0].rstrip(";")


def named(op: str | None) -> str | None:
    """The entry of :data:`NAMED` that names ``op``, or None."""
    matches = [name for name in NAMED if op and op.startswith(name)]
    return max(matches, key=len) if matches else None


def loops(ptx: str) -> list[tuple[int, int]]:
    """(first, last) line numbers of each loop of ``ptx``: a label and a later branch back
    to it."""
    lines = ptx.splitlines()
    labels = {}
    found = []
    for number, line in enumerate(lines):
        label = _LABEL.match(line)
        if label:
            labels[label.group(1)] = number
        branch = _BRANCH.search(line)
        if branch and branch.group(1) in labels:
            found.append((labels[branch.group(1)], number))
    return found


# A loop of at most this many instructions is a wait (an mbarrier polled until a copy or
# a tensor-core operation completes), not a loop of the kernel's own.
WAIT_LOOP = 6


def inner_loop(ptx: str) -> list[str]:
    """The lines of the kernel's busiest innermost loop (one that holds no loop but waits,
    and has the most instructions), or of the whole kernel when it has no loop."""
    lines = ptx.splitlines()

    def size(span):
        return sum(opcode(line) is not None for line in lines[span[0]:span[1] + 1])
    spans = [span for span in loops(ptx) if size(span) > WAIT_LOOP]
    innermost = [(a, b) for a, b in spans
                 if not any((c, d) != (a, b) and a <= c and d <= b for c, d in spans)]
    if not innermost:
        return lines
    first, last = max(innermost, key=size)
    return lines[first:last + 1]


def instruction_counts(lines: list[str]) -> Counter:
    """How many instructions of each :data:`NAMED` kind ``lines`` hold."""
    return Counter(name for name in map(named, map(opcode, lines)) if name)


def excerpt(lines: list[str], most: int = 8, width: int = 100) -> list[str]:
    """A few lines of ``lines``: the first instruction of each named kind, in order, each
    cut to ``width`` characters (a tensor-core instruction lists a hundred registers)."""
    seen, shown = set(), []
    for line in lines:
        name = named(opcode(line))
        if name and name not in seen:
            seen.add(name)
            text = " ".join(line.split())
            shown.append(text if len(text) <= width else text[:width - 4] + " ...")
    return shown[:most]


_SASS_LINE = re.compile(r"/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P\w+\s+)?([A-Z][\w.]*)")


def sass_opcodes(sass: str) -> list[str]:
    """The opcodes of ``cuobjdump -sass`` output, in order (``LDG.E.128``, ``HGMMA...``)."""
    return _SASS_LINE.findall(sass)


def spill_instructions(sass: str) -> Counter:
    """Stores to and loads from local memory in the machine code (``STL``, ``LDL``): the
    traffic of spilled registers."""
    return Counter(op.split(".")[0] for op in sass_opcodes(sass)
                   if op.startswith(("STL", "LDL")))


@dataclasses.dataclass
class Compiled:
    """The numbers of one compiled kernel (from :func:`compile_for`)."""

    kernel: str  # the kernel's name
    target: str  # what it was compiled for, e.g. "sm_90a"
    num_warps: int
    num_stages: int
    registers: int  # per thread
    local_bytes: int  # local memory per thread: its stack frame, where ptxas puts the
    # registers it spills, and any local arrays (cuobjdump's STACK plus LOCAL)
    shared: int  # bytes per program that Triton asks for at launch (``metadata.shared``)
    constexprs: dict
    ptx: str
    sass: str  # the machine code, as ``cuobjdump -sass`` prints it

    @property
    def spills(self) -> int:
        """Spilled 32-bit values per thread, counted as Triton's ``kernel.n_spills``: the
        local memory a thread has, in 4-byte words."""
        return self.local_bytes // 4

    def occupancy(self, sm: SMLimits = HOPPER) -> Occupancy:
        return occupancy(self.registers, self.shared, self.num_warps, sm)

    def loop(self) -> list[str]:
        return inner_loop(self.ptx)


def summary(results: dict[str, Compiled] | list[Compiled], sm: SMLimits = HOPPER) -> str:
    """One line per compiled kernel (named by its key, for a dict): warps, stages,
    registers per thread, spills, shared memory, and the programs that fit on one of
    ``sm``'s SMs with what limits them."""
    named = results.items() if isinstance(results, dict) else [(r.kernel, r) for r in results]
    width = max(len(name) for name, _ in named) + 2
    rows = [f"{'kernel':<{width}}{'warps':>5}{'stages':>7}{'regs':>5}{'spills':>7}"
            f"{'shared B':>9}  programs/SM (limited by)"]
    for name, r in named:
        fit = r.occupancy(sm)
        rows.append(f"{name:<{width}}{r.num_warps:>5}{r.num_stages:>7}{r.registers:>5}"
                    f"{r.spills:>7}{r.shared:>9}  {fit.programs} ({', '.join(fit.limited_by)})")
    return "\n".join(rows)


def loop_summary(result: Compiled, kinds: tuple[str, ...] = NAMED) -> str:
    """The instructions of ``kinds`` (entries of :data:`NAMED`) in ``result``'s inner loop,
    most frequent first."""
    counts = instruction_counts(result.loop())
    return ", ".join(f"{name} x{count}" for name, count in counts.most_common()
                     if name in kinds)


# --- recording the launches an op makes --------------------------------------------------


@dataclasses.dataclass
class Launch:
    """One kernel launch as a launcher asked for it, not run."""

    kernel: object  # the launched object: a JIT'd (or interpreted) function or an autotuner
    args: tuple
    kwargs: dict  # constexprs and launch options (num_warps, num_stages)

    @property
    def function(self):
        """The kernel's Python function (beneath any autotuner and JIT wrapper)."""
        inner = getattr(self.kernel, "fn", self.kernel)  # an autotuner's JIT function
        return getattr(inner, "fn", inner)

    @property
    def name(self) -> str:
        return self.function.__name__

    @property
    def configs(self) -> list:
        """The autotuner's configurations, or [] for a kernel that is not autotuned."""
        return list(getattr(self.kernel, "configs", []))

    def replaced(self, **kwargs) -> Launch:
        """The launch with some constexprs or options set otherwise (for a choice that a
        launcher makes differently under the interpreter)."""
        return Launch(self.kernel, self.args, {**self.kwargs, **kwargs})

    def with_config(self, config) -> Launch:
        """The launch with a configuration's constexprs and options (a ``triton.Config``),
        after its pre-hook, or else the pre-hook of the autotuner's own configurations
        (which may set the descriptors' tile shapes), as the autotuner launches it."""
        from triton.tools.tensor_descriptor import TensorDescriptor

        names = self.function.__code__.co_varnames[:self.function.__code__.co_argcount]
        # The hook sets tile shapes on the descriptors: on copies, as launches of other
        # kernels may share them.
        args = tuple(copy.copy(a) if isinstance(a, TensorDescriptor) else a for a in self.args)
        values = {**self.kwargs, **config.all_kwargs()}
        hooks = [config.pre_hook] + [c.pre_hook for c in self.configs]
        hook = next((h for h in hooks if h is not None), None)
        if hook is not None:
            hook({**dict(zip(names, args)), **values})
        return Launch(self.kernel, args, values)


@contextlib.contextmanager
def _intercepted(record):
    """Within: every launch of a JIT'd or interpreted function or an autotuner calls
    ``record(kernel, args, kwargs)`` and runs nothing; the package's short launch path is
    off, so every launch takes Triton's entry points."""
    from triton.runtime import Autotuner, JITFunction
    from triton.runtime.interpreter import InterpretedFunction

    from . import launch

    def fake(self, *args, grid, warmup, **kwargs):
        record(self, args, kwargs)

    def fake_tuned(self, *args, **kwargs):
        kwargs.pop("grid", None)
        kwargs.pop("warmup", None)
        record(self, args, kwargs)

    saved = [(cls, cls.run) for cls in (JITFunction, InterpretedFunction, Autotuner)]
    enabled = launch.enabled
    try:
        JITFunction.run = InterpretedFunction.run = fake
        Autotuner.run = fake_tuned
        launch.enabled = False
        yield
    finally:
        for cls, run in saved:
            cls.run = run
        launch.enabled = enabled


def record_launches(call, *args, backward: bool = False, **kwargs) -> list[Launch]:
    """The kernel launches ``call(*args, **kwargs)`` makes, recorded and not run (the
    outputs it returns are left unwritten); with ``backward``, also those of the backward
    pass from its output (the first, for several), given a gradient of its shape."""
    launches = []
    with _intercepted(lambda kernel, a, kw: launches.append(Launch(kernel, a, dict(kw)))):
        out = call(*args, **kwargs)
        if backward:
            out = out[0] if isinstance(out, (tuple, list)) else out
            out.backward(torch.empty_like(out))
    return launches


def record_kernels(call, *args, backward: bool = False, **kwargs) -> dict[str, Launch]:
    """:func:`record_launches`, as {kernel name: its first launch}."""
    launches = {}
    for launch in record_launches(call, *args, backward=backward, **kwargs):
        launches.setdefault(launch.name, launch)
    return launches


# --- compiling recorded launches for a named GPU -----------------------------------------


def _value_spec(value):
    from triton.tools.tensor_descriptor import TensorDescriptor

    if isinstance(value, torch.Tensor):
        return {"tensor": str(value.dtype).removeprefix("torch."),
                "aligned": value.data_ptr() % 16 == 0}
    if isinstance(value, TensorDescriptor):
        return {"descriptor": str(value.base.dtype).removeprefix("torch."),
                "shape": list(value.shape), "strides": list(value.strides),
                "block_shape": list(value.block_shape),
                "padding": getattr(value, "padding", "zero")}
    if value is None or isinstance(value, (bool, int, float, str)):
        return {"value": value}
    raise TypeError(f"a launch argument of type {type(value).__name__} cannot be recorded")


def launch_spec(launch: Launch) -> dict:
    """What the compiling process needs to rebuild ``launch``: the kernel's module and name,
    and each argument's kind (a tensor's dtype and 16-byte alignment; a descriptor's dtype
    and shapes; other values as they are)."""
    return {"module": launch.function.__module__, "name": launch.name,
            "args": [_value_spec(a) for a in launch.args],
            "kwargs": {k: _value_spec(v) for k, v in launch.kwargs.items()}}


def run_compiling_process(module: str, request: dict, *, python_path: str | None = None,
                          timeout: float = 600) -> list[dict]:
    """Run ``python -m module`` with ``request`` (JSON) on its standard input, in a process
    whose kernels are Triton's compiled functions even without a GPU
    (``TRITON_GUIDE_COMPILE_ONLY``), and return the JSON list it prints last.
    ``python_path``: folders put first on that process's path, e.g. another Triton's
    site-packages, to compile with that version."""
    env = {key: value for key, value in os.environ.items() if key != "TRITON_INTERPRET"}
    paths = [python_path, str(Path(__file__).resolve().parent.parent), env.get("PYTHONPATH")]
    env.update(TRITON_GUIDE_COMPILE_ONLY="1", PYTHONPATH=os.pathsep.join(filter(None, paths)))
    env.setdefault("TRITON_DEFAULT_FP_FUSION", "1")  # Triton's default, said aloud (3.9 warns)
    done = subprocess.run([sys.executable, "-m", module], input=json.dumps(request),
                          capture_output=True, text=True, env=env, timeout=timeout)
    if done.returncode != 0:
        raise RuntimeError(f"compiling in {module} failed:\n{done.stderr[-4000:]}")
    return json.loads(done.stdout.splitlines()[-1])


def compile_for(launches: list[Launch], capability: int = 90,
                timeout: float = 600) -> list[Compiled]:
    """Compile each launch for a GPU of compute ``capability`` (90: sm_90, an H100 or H200),
    in a new Python process (:func:`run_compiling_process`); nothing is launched."""
    request = {"capability": capability, "launches": [launch_spec(l) for l in launches]}
    return [Compiled(**fields) for fields in
            run_compiling_process("triton_guide.compiled", request, timeout=timeout)]


def _rebuild(spec):
    if "tensor" in spec:
        dtype = getattr(torch, spec["tensor"])
        storage = torch.empty(64, dtype=dtype)  # 64-byte aligned
        return storage if spec["aligned"] else storage[1:]
    if "descriptor" in spec:
        from .launch import unchecked_descriptor
        base = torch.empty(64, dtype=getattr(torch, spec["descriptor"]))
        descriptor = unchecked_descriptor(base, spec["shape"], spec["strides"], spec["block_shape"])
        descriptor.padding = spec["padding"]
        return descriptor
    return spec["value"]


def _tool(name: str) -> str:
    import triton.backends.nvidia as nvidia
    path = Path(nvidia.__file__).parent / "bin" / name
    if not path.exists():
        raise FileNotFoundError(f"{name} is not in this triton's wheel ({path})")
    return str(path)


def compile_kernel(kernel, args: list, kwargs: dict, capability: int = 90,
                   source=None) -> dict:
    """Compile one kernel (a ``JITFunction``) for ``args`` and ``kwargs`` as a launch would,
    for a GPU of compute ``capability``, and read back what the compiler made: the fields
    of :class:`Compiled` but ``kernel`` and ``constexprs``. ``source``: the class that
    wraps the kernel for :func:`triton.compile` (default ``ASTSource``; Gluon kernels take
    ``GluonASTSource``)."""
    import tempfile

    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource, make_backend
    from triton.runtime.jit import create_function_from_signature

    target = GPUTarget("cuda", capability, 32)
    backend = make_backend(target)
    # What JITFunction.run does before compiling: bind the arguments, specialise them
    # (dtypes, 16-byte alignment, integers that are multiples of 16 or equal to 1).
    binder = create_function_from_signature(kernel.signature, kernel.params, backend)
    bound, specialization, options = binder(*args, **kwargs)
    options, signature, constexprs, attrs = kernel._pack_args(backend, kwargs, bound,
                                                              specialization, options)
    compiled = triton.compile((source or ASTSource)(kernel, signature, constexprs, attrs),
                              target=target, options=options.__dict__)
    with tempfile.TemporaryDirectory() as folder:
        cubin = Path(folder) / "kernel.cubin"
        cubin.write_bytes(compiled.asm["cubin"])
        text, sass = (subprocess.run([_tool("cuobjdump"), option, str(cubin)],
                                     capture_output=True, text=True, check=True).stdout
                      for option in ("-res-usage", "-sass"))
    (usage,) = parse_resource_usage(text).values()
    metadata = compiled.metadata
    ptx = compiled.asm["ptx"]
    # the PTX's own .target line: sm_90a (the architecture-specific set, wgmma and TMA) for 9.0
    target = re.search(r"^\s*\.target\s+(\w+)", ptx, re.MULTILINE).group(1)
    return {"target": target, "num_warps": metadata.num_warps,
            "num_stages": metadata.num_stages, "registers": usage["REG"],
            "local_bytes": usage.get("STACK", 0) + usage.get("LOCAL", 0),
            # cuobjdump's SHARED is the kilobyte sm_90 reserves per program (a section the
            # binary holds once it uses shared memory), which occupancy() adds itself
            "shared": metadata.shared, "ptx": ptx, "sass": sass}


def _compile_one(spec: dict, capability: int) -> dict:
    from triton.runtime.jit import JITFunction

    kernel = getattr(importlib.import_module(spec["module"]), spec["name"])
    while not isinstance(kernel, JITFunction):  # beneath an autotuner or heuristics
        kernel = kernel.fn
    args = [_rebuild(a) for a in spec["args"]]
    kwargs = {k: _rebuild(v) for k, v in spec["kwargs"].items()}
    return {"kernel": spec["name"], **compile_kernel(kernel, args, kwargs, capability),
            "constexprs": {k: v["value"] for k, v in spec["kwargs"].items() if "value" in v}}


def gpu_compiled(launch: Launch) -> dict:
    """On a GPU: the numbers of the kernel the GPU's own JIT compiles for ``launch``
    (``n_regs``, ``n_spills``, ``metadata.shared``), compiled now or taken from its cache."""
    from triton.runtime import Autotuner

    kernel = launch.kernel.fn if isinstance(launch.kernel, Autotuner) else launch.kernel
    compiled = kernel.warmup(*launch.args, grid=(1,), **launch.kwargs)
    compiled._init_handles()
    return {"kernel": launch.name, "registers": compiled.n_regs, "spills": compiled.n_spills,
            "shared": compiled.metadata.shared}


def _main() -> None:
    request = json.loads(sys.stdin.read())
    results = [_compile_one(spec, request["capability"]) for spec in request["launches"]]
    print(json.dumps(results))


if __name__ == "__main__":
    _main()
