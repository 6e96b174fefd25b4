"""Looking inside a kernel: a kernel instrumented with Triton's debugging aids, and the
helpers that capture what those aids print, step through a kernel under the interpreter,
compile a kernel without launching it, and run a crashing snippet in its own process.
"""

from __future__ import annotations

import contextlib
import ctypes
import inspect
import io
import json
import os
import resource
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import torch
import triton
import triton.language as tl

from .runtime import interpreting
from .validation import check_block_size, check_contiguous, check_tensor

# The target that compile_kernels compiles for: an H100 (compute capability 9.0, 32 lanes per
# warp), whether or not one is present.
COMPILE_TARGET = ("cuda", 90, 32)
# The launch options a compile job may set, as ``kernel[grid](..., num_warps=8)`` would.
LAUNCH_OPTIONS = ("num_warps", "num_stages", "num_ctas", "maxnreg")


def checked_sqrt_reference(x: torch.Tensor) -> torch.Tensor:
    """What :func:`checked_sqrt` computes, in plain PyTorch."""
    return torch.sqrt(x)


@triton.jit
def checked_sqrt_kernel(
    x_ptr,  # pointer to the input, whose elements must be >= 0
    out_ptr,  # pointer to the output
    num_elements,  # how many elements both hold
    BLOCK_SIZE: tl.constexpr,  # elements per program; a power of two
    VERBOSE: tl.constexpr,  # print the compile-time and run-time values below
):
    # Checked while compiling: a failing static_assert stops the compilation.
    tl.static_assert(BLOCK_SIZE <= 8192, "BLOCK_SIZE must be at most 8192")
    if VERBOSE:  # a constexpr `if`: without VERBOSE the prints are not even compiled
        tl.static_print("compiling checked_sqrt_kernel with BLOCK_SIZE =", BLOCK_SIZE)
    program_id = tl.program_id(axis=0)
    offsets = program_id * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < num_elements
    x = tl.load(x_ptr + offsets, mask=mask, other=0.0)
    if VERBOSE:
        tl.device_print("x", x)
    # Checked while running, only when the kernel is compiled with debug on (TRITON_DEBUG=1).
    tl.device_assert(x >= 0, "checked_sqrt: every x must be >= 0")
    tl.store(out_ptr + offsets, tl.sqrt(x), mask=mask)


def checked_sqrt(x: torch.Tensor, *, block_size: int = 1024, verbose: bool = False) -> torch.Tensor:
    """Return ``sqrt(x)`` computed by :func:`checked_sqrt_kernel`; ``verbose`` prints."""
    x = check_tensor("x", x)
    check_contiguous("x", x)
    block_size = check_block_size("block_size", block_size)
    out = torch.empty_like(x)
    grid = (triton.cdiv(x.numel(), block_size),)
    checked_sqrt_kernel[grid](x, out, x.numel(), BLOCK_SIZE=block_size, VERBOSE=verbose)
    return out


@dataclass
class Captured:
    """What :func:`capture_output` caught; ``text`` is filled when the block ends."""

    text: str = ""


@contextlib.contextmanager
def capture_output() -> Iterator[Captured]:
    """Capture everything printed inside the block, by Python and by C code alike.

    ``tl.device_print`` on a GPU writes through the CUDA driver to the process's C-level
    standard output (file descriptor 1), which ``print`` and ``contextlib.redirect_stdout``
    never see; under the interpreter it is a Python ``print``. Both end up in ``text``.
    """
    captured = Captured()
    python_level = io.StringIO()
    sys.stdout.flush()
    libc = ctypes.CDLL(None)
    saved_fd = os.dup(1)
    with tempfile.TemporaryFile(mode="w+b") as c_level:
        os.dup2(c_level.fileno(), 1)
        try:
            with contextlib.redirect_stdout(python_level):
                yield captured
            if torch.cuda.is_available() and torch.cuda.is_initialized():
                torch.cuda.synchronize()  # the driver prints a kernel's output when it ends
        finally:
            libc.fflush(None)
            os.dup2(saved_fd, 1)
            os.close(saved_fd)
        c_level.seek(0)
        captured.text = python_level.getvalue() + c_level.read().decode(errors="replace")


def _python_function(kernel) -> Callable:
    """The plain Python function behind a ``@triton.jit`` kernel, in either mode."""
    return kernel.fn


def interpreted(kernel):
    """A version of ``kernel`` that runs in the Triton interpreter, even on a GPU machine.

    Its inputs may live on the CPU; the interpreter copies GPU tensors to the host and back.
    """
    if interpreting():
        return kernel
    from triton.runtime.interpreter import InterpretedFunction

    return InterpretedFunction(_python_function(kernel))


@dataclass
class Step:
    """One line of a kernel run by one program, and what the line did to the locals."""

    call: int  # which call of the kernel's function: one per program, in launch order
    line: int  # the line number in the kernel's source file
    source: str  # that line, stripped
    values: dict[str, object] = field(default_factory=dict)  # every local after the line
    assigned: tuple[str, ...] = ()  # the names the line bound or rebound


def _plain(value: object) -> object:
    """A kernel variable under the interpreter as a number or a numpy array."""
    handle = getattr(value, "handle", None)
    data = getattr(handle, "data", None)
    if data is not None:
        return data.copy() if data.size > 1 else data.reshape(()).item()
    return getattr(value, "value", value)  # a constexpr's value, or the value itself


def trace_kernel(kernel, launch: Callable[[], object]) -> list[Step]:
    """Run ``launch()`` and record every line that ``kernel``'s programs execute.

    ``launch`` must run ``kernel`` in the interpreter (see :func:`interpreted`): there
    the kernel is ordinary Python, so ``sys.settrace`` sees each line and its locals.
    Python announces a line *before* running it, so what a line did is read at the
    next announcement, or at the return for the last line.
    """
    code = _python_function(kernel).__code__
    source_lines = Path(code.co_filename).read_text().splitlines()
    steps: list[Step] = []
    calls = 0

    def program_tracer(call: int):
        before: dict[str, object] = {}  # the locals when the pending line started
        pending: Step | None = None  # the line announced last, not yet finished

        def local_tracer(frame, event, arg):
            nonlocal before, pending
            if event in ("line", "return"):
                now = dict(frame.f_locals)
                if pending is not None:  # the pending line has run: `now` is after it
                    pending.values = {name: _plain(v) for name, v in now.items()}
                    pending.assigned = tuple(
                        name for name, v in now.items()
                        if name not in before or before[name] is not v)
                if event == "line":
                    text = source_lines[frame.f_lineno - 1].strip()
                    pending = Step(call, frame.f_lineno, text)
                    steps.append(pending)
                before = now
            return local_tracer

        return local_tracer

    def global_tracer(frame, event, arg):
        nonlocal calls
        called = frame.f_code
        if (called.co_name, called.co_filename) == (code.co_name, code.co_filename):
            calls += 1
            return program_tracer(calls - 1)
        return None

    previous = sys.gettrace()
    sys.settrace(global_tracer)
    try:
        launch()
    finally:
        sys.settrace(previous)
    return steps


@dataclass
class Compiled:
    """What compiling one kernel for an H100 gave (see :func:`compile_kernels`)."""

    error_type: str | None  # the exception's class name, or None when it compiled
    message: str  # the exception's message, or "" when it compiled
    printed: str  # what the compilation printed (tl.static_print)
    ptx: str  # the PTX produced, "" on an error
    shared: int = 0  # bytes of shared memory one program needs, 0 on an error
    # The MLIR errors the compiler wrote to standard error, one per line, without the
    # file and position; they say more than a message such as "error encountered
    # during parsing".
    diagnostics: str = ""

    @property
    def found(self) -> bool:
        """False when the kernel was not there to compile (see ``compile_kernels``'s
        ``whole_file``): ``error_type`` then says nothing about the kernel."""
        return self.error_type != "NotCompiledHere"

    @property
    def ptx_lines(self) -> int:
        """Lines of PTX produced, 0 on an error."""
        return len(self.ptx.splitlines())


# Run in a fresh process by compile_kernels: compile each job, print one JSON line each.
_COMPILE_SCRIPT = """
import contextlib, importlib.util, io, json, os, sys
os.environ.pop("TRITON_INTERPRET", None)
os.environ["TRITON_ALWAYS_COMPILE"] = "1"  # skip the cache: the front end always runs
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
from triton.runtime.jit import JITFunction
class NotCompiledHere(Exception):  # the kernel was not there to compile: no fault of its own
    pass
jobs = json.loads(sys.stdin.read())
modules = {}
for index, (source_path, name, signature, constexprs, multiples_of_16, options) in enumerate(jobs):
    print(f"COMPILING {index}", file=sys.stderr, flush=True)  # splits standard error
    printed = io.StringIO()
    result = {"error_type": None, "message": "", "ptx": "", "shared": 0}
    try:
        if source_path not in modules:
            spec = importlib.util.spec_from_file_location(f"kernels_{index}", source_path)
            modules[source_path] = importlib.util.module_from_spec(spec)
            sys.modules[spec.name] = modules[source_path]
            try:
                with contextlib.redirect_stdout(printed):
                    spec.loader.exec_module(modules[source_path])
            except Exception as error:
                raise NotCompiledHere(f"importing {source_path} again failed: "
                                      f"{type(error).__name__}: {error}") from error
        kernel = getattr(modules[source_path], name, None)
        if not isinstance(kernel, JITFunction):
            raise NotCompiledHere(
                f"{source_path}, imported again, has no @triton.jit function {name} for a "
                "GPU (defined inside another function, or the file turns the interpreter on)")
        # What a launch tells the compiler about an argument that is a multiple of 16 (an
        # aligned pointer, a length): attributes keyed by the argument's position.
        attrs = {(kernel.arg_names.index(arg),): [["tt.divisibility", 16]]
                 for arg in multiples_of_16}
        with contextlib.redirect_stdout(printed):
            compiled = triton.compile(
                ASTSource(kernel, signature, constexprs, attrs),
                target=GPUTarget(*TARGET), options={"enable_fp_fusion": True, **options})
        result["ptx"] = compiled.asm["ptx"]
        result["shared"] = compiled.metadata.shared
    except Exception as error:
        result["error_type"] = type(error).__name__
        result["message"] = str(error)
    result["printed"] = printed.getvalue()
    print("COMPILED " + json.dumps(result), flush=True)
"""


def compile_kernels(
    jobs: list[tuple], *, whole_file: bool = False,
) -> list[Compiled]:
    """Compile each ``(kernel, signature, constexprs)`` for an H100, without launching.

    ``signature`` maps each argument to its Triton type (``"*fp32"``, ``"i32"``, or
    ``"constexpr"`` for the names given values in ``constexprs``). A job may add a fourth
    item, the names of the arguments to compile as multiples of 16, as a launch does for a
    pointer aligned to 16 bytes or an integer that divides by 16 (by default, none: the
    compiler then assumes nothing about alignment), and a fifth, the launch options
    (:data:`LAUNCH_OPTIONS`, such as ``{"num_warps": 8, "num_stages": 3}``; by default
    Triton's). No GPU is needed:
    Triton's wheel ships the CUDA assembler, so a correct kernel compiles down to a cubin
    anywhere. The compiler runs in a fresh process, without the cache (so every
    ``tl.static_print`` shows), and away from the interpreter, whose patches of
    ``triton.language`` can outlive an interpreted launch in this one.

    By default the compiler gets each kernel's own source, and nothing else from its file
    (a page's kernels are compiled without running the page again). With ``whole_file``, it
    imports the file that defines the kernel, so the ``@triton.jit`` helpers and constants
    the kernel uses come along: for kernels in a file whose top level only defines things,
    such as an exercise's solution.
    """
    with tempfile.TemporaryDirectory() as folder:
        specs = []
        for index, (kernel, signature, constexprs, *extra) in enumerate(jobs):
            function = _python_function(kernel)
            multiples_of_16 = extra[0] if extra else []
            options = dict(extra[1]) if len(extra) > 1 else {}
            unknown_options = set(options) - set(LAUNCH_OPTIONS)
            if unknown_options:
                raise ValueError(f"launch options {sorted(unknown_options)} are not among "
                                 f"{', '.join(LAUNCH_OPTIONS)}")
            if isinstance(multiples_of_16, str):
                raise TypeError(f"multiples of 16: a list of argument names, not the "
                                f"string {multiples_of_16!r}")
            multiples_of_16 = list(multiples_of_16)
            unknown = set(multiples_of_16) - set(signature)
            if unknown:
                raise ValueError(f"multiples of 16 {sorted(unknown)} are not in the signature")
            if whole_file:
                path = Path(inspect.getsourcefile(function))
            else:
                path = Path(folder) / f"kernel_{index}.py"
                path.write_text("import triton\nimport triton.language as tl\n\n\n"
                                + textwrap.dedent(inspect.getsource(function)))
            specs.append((str(path), function.__name__, signature, constexprs, multiples_of_16,
                          options))
        script = f"TARGET = {COMPILE_TARGET!r}\n" + _COMPILE_SCRIPT
        finished = subprocess.run(
            [sys.executable, "-c", script], input=json.dumps(specs), text=True,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=600,
        )
    results = [json.loads(line.removeprefix("COMPILED "))
               for line in finished.stdout.splitlines() if line.startswith("COMPILED ")]
    if len(results) != len(jobs):
        raise RuntimeError(f"the compiler process failed:\n{finished.stderr[-2000:]}")
    errors: list[list[str]] = []
    for line in finished.stderr.splitlines():
        if line.startswith("COMPILING "):
            errors.append([])
        elif ": error: " in line and errors:
            errors[-1].append(line.split(": error: ", 1)[1])
    return [Compiled(**result, diagnostics="\n".join(job_errors))
            for result, job_errors in zip(results, errors)]


@dataclass
class Finished:
    """How a separate Python process ended."""

    returncode: int  # negative: killed by that signal (-11 is a segmentation fault)
    output: str  # its standard output and standard error, interleaved


def run_python(code: str, *, env: dict[str, str] | None = None, timeout: float = 120) -> Finished:
    """Run ``code`` in a fresh Python process that can import this package.

    For what would take the current process down with it: a segmentation fault, a
    device-side assert that leaves the CUDA context unusable. Core dumps are switched off.
    """
    package_root = str(Path(__file__).resolve().parent.parent)
    full_env = dict(os.environ, **(env or {}))
    full_env["PYTHONPATH"] = os.pathsep.join(
        p for p in (package_root, full_env.get("PYTHONPATH", "")) if p
    )

    def no_core_dump():
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))

    finished = subprocess.run(
        [sys.executable, "-c", code], env=full_env, stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True, timeout=timeout, preexec_fn=no_core_dump,
    )
    return Finished(finished.returncode, finished.stdout)
