"""
Raw pointers: ``solve(a_ptr, b_ptr, c_ptr, N)``
===============================================

Online judges such as LeetGPU do not hand your Triton code tensors: they call a function
``solve(a_ptr, b_ptr, c_ptr, N)`` with bare integers, the addresses of buffers they
allocated. The kernel has to turn those integers into typed pointers itself, and nothing
checks that the numbers mean what you think.

You will learn:

* what a launch passes for a tensor and for an integer, and how ``tl.pointer_type``
  turns an integer into a pointer;
* how to write a judge-style ``solve`` and test it locally against torch;
* what the Triton interpreter can and cannot do with a raw address (found out below by
  running it, one case only on a GPU machine);
* which mistakes a tensor interface catches and a raw address lets through.
"""

# %%
import torch

from triton_guide import runtime
from triton_guide.benchmark import Benchmark
from triton_guide.debugging import run_python
from triton_guide.raw_pointers import BLOCK_SIZE, run_solve, solve, solve_reference
from triton_guide.testing import assert_close

print(Benchmark().stamp())
device = runtime.device()
torch.manual_seed(0)

# %%
# A tensor is an address plus promises
# ------------------------------------
# When a kernel is launched with a tensor, Triton passes the address of its first
# element and types the parameter from the tensor's dtype: in the kernel of the
# :ref:`vector-add page <sphx_glr_auto_examples_basics_01_vector_add.py>`, ``x_ptr`` is a
# ``pointer<fp32>``. ``tensor.data_ptr()`` is that same address as a Python integer.
# The shape, the strides, the dtype and the device are *not* passed: they stay behind
# in the tensor object.

a = torch.randn(10, device=device)
address = a.data_ptr()
print(f"a.data_ptr() is a Python {type(address).__name__}; at least 2**31: "
      f"{address >= 2**31}; a multiple of 16: {address % 16 == 0}")
print(f"a[3] lives {a[3].data_ptr() - a.data_ptr()} bytes further: 3 x "
      f"{a.element_size()}-byte float32")

# %%
# The kernel: cast, then use as usual
# -----------------------------------
# An integer argument arrives as an integer scalar whose width Triton picks from its
# value at each launch: int32 from -2\ :sup:`31` to 2\ :sup:`31` - 1, int64 outside
# that range, above or below (uint64 from 2\ :sup:`63`). A device address is far above
# 2\ :sup:`31`, so it arrives as int64, and ``.to(tl.pointer_type(tl.float32))``
# reinterprets it as a pointer to float32; from then on the kernel is the vector
# addition of the :ref:`vector-add page <sphx_glr_auto_examples_basics_01_vector_add.py>`:
#
# .. literalinclude:: /../triton_guide/raw_pointers.py
#    :pyobject: vector_add_raw_kernel
#
# ``solve`` is the entry point a judge calls. It can check that it got integers, and
# that each address is at least 2\ :sup:`31`, so that Triton passes it as the int64
# the cast needs; it cannot check what lies behind an address:
#
# .. literalinclude:: /../triton_guide/raw_pointers.py
#    :pyobject: solve

# %%
# Testing a solution locally
# --------------------------
# A judge allocates the buffers, calls ``solve`` with their addresses and compares the
# output buffer with its own answer. The same harness, with torch: make tensors, check
# them, pass ``data_ptr()``, synchronise, compare with the float64 reference.
#
# .. literalinclude:: /../triton_guide/raw_pointers.py
#    :pyobject: run_solve

for n in (1, 17, BLOCK_SIZE + 1, runtime.pick(interpreter=10_007, gpu=10_000_019)):
    a, b = torch.randn(2, n, device=device).unbind(0)
    c = run_solve(solve, a, b)
    error = assert_close(c, solve_reference(a.double(), b.double()), rtol=1e-6)
    print(f"N = {n:>10,}: solve matches torch, relative error {error:.1e}")

# %%
# What the interpreter does with a raw address
# --------------------------------------------
# Under the interpreter every program runs on the CPU through numpy, and a pointer is a
# number that the interpreter dereferences in its own process memory. So an address
# works exactly when it is an address in *this process's host memory*: the
# ``data_ptr()`` of a CPU tensor, as in the harness above, which ran in this mode when
# there was no GPU.
#
# Three things it cannot do, each tried below (the second only on a GPU machine):
#
# * **Check the address.** A pointer to memory that is not mapped does not raise a
#   Python exception: it kills the process. Run in a separate process, with
#   ``TRITON_INTERPRET=1`` (so on a GPU machine too), so that this page survives. On a
#   GPU machine the same call also runs natively, for comparison: there the GPU
#   faults, and CUDA reports it as an error at the next synchronisation, after which
#   the process can run nothing more on that GPU.

UNMAPPED = (
    "import torch\n"
    "from triton_guide.raw_pointers import solve\n"
    "solve(2**46, 2**46, 2**46, 1024)\n"
    "torch.cuda.synchronize() if torch.cuda.is_available() else None\n"
    "print('solve returned')\n"
)


def how_it_ended(finished):
    segfault = " (signal 11, segmentation fault)" if finished.returncode == -11 else ""
    # Leave out the notices triton_guide prints when imported (on a GPU machine whose
    # numpy its Triton's interpreter dislikes, one says so): they do not say how it ended.
    lines = [line for line in finished.output.splitlines()
             if line.strip() and not line.startswith("triton_guide:")][-2:]
    return (f"return code {finished.returncode}{segfault}; its last output lines: "
            f"{lines if lines else 'none'}")


print("TRITON_INTERPRET=1, solve on an unmapped address:",
      how_it_ended(run_python(UNMAPPED, env={"TRITON_INTERPRET": "1"})))
if not runtime.interpreting():
    print("natively on the GPU, the same call:", how_it_ended(run_python(UNMAPPED)))

# %%
# * **Follow a GPU address.** Given tensors, the interpreter copies GPU tensors to the
#   host before the launch and back afterwards; given an integer, it has nothing to copy
#   (it does not know how many bytes lie behind the number), so it can only treat a GPU
#   address as one in its own host memory, which it is not. What happens then needs a
#   GPU machine to show: there, this cell runs a separate process with
#   ``TRITON_INTERPRET=1`` that calls ``solve`` with the addresses of GPU tensors, and
#   prints how it ended. A build without a GPU skips the cell and says so below.
#   (``run_solve``, the tensor harness above, refuses such tensors before the launch and
#   names their device; ``solve`` sees only integers.)

if runtime.interpreting():
    print("(skipped: no GPU here, so there are no GPU addresses to try)")
else:
    gpu_in_interpreter = run_python(
        "import torch\n"
        "from triton_guide.raw_pointers import solve\n"
        "a = torch.ones(4096, device='cuda')\n"
        "c = torch.zeros_like(a)\n"
        "solve(a.data_ptr(), a.data_ptr(), c.data_ptr(), a.numel())\n"
        "print('solve returned; c[:4] =', c[:4].tolist(), flush=True)\n",
        env={"TRITON_INTERPRET": "1"},
    )
    print("TRITON_INTERPRET=1, solve(a.data_ptr(), ...) on GPU tensors:",
          how_it_ended(gpu_in_interpreter))

# %%
# * **Cast a small integer.** Neither the interpreter nor the compiler gets as far as
#   reading memory. An integer below 2\ :sup:`31` arrives as int32, and the cast to a
#   pointer needs int64; ``solve`` refuses such a number itself, so here the kernel is
#   launched directly with 12 as each address. The interpreter implements the cast as
#   a reinterpretation of the integer's bytes, and numpy will not read 4 bytes as an
#   8-byte address. Compiled (here for an H100, which needs no GPU; a launch on a GPU
#   compiles the same way), Triton emits the cast and MLIR's verifier rejects its
#   32-bit operand, so the kernel never compiles and nothing runs:

from triton_guide.debugging import compile_kernels, interpreted  # noqa: E402
from triton_guide.raw_pointers import vector_add_raw_kernel  # noqa: E402

try:
    interpreted(vector_add_raw_kernel)[(1,)](12, 12, 12, 4, BLOCK_SIZE=4)
except Exception as error:  # the interpreter wraps what numpy raised
    print(f"interpreter: {type(error).__name__}: {error}")
small_addresses = {"a_address": "i32", "b_address": "i32", "c_address": "i32",
                   "num_elements": "i32", "BLOCK_SIZE": "constexpr"}
(compiled,) = compile_kernels([(vector_add_raw_kernel, small_addresses,
                                {"BLOCK_SIZE": 4})])
print(f"compiler, addresses typed i32: {compiled.error_type}: {compiled.message}")
print(f"    the MLIR verifier wrote: {compiled.diagnostics}")

# %%
# Why tensors are the safer interface
# -----------------------------------
# Every promise a tensor keeps for you becomes your job with an address. Two mistakes
# that raise nothing, run side by side with the tensor interface that refuses them:
#
# * **The wrong dtype.** float64 buffers read as float32: each 8-byte number is read as
#   two unrelated 4-byte halves.

n = 8
a64, b64 = torch.randn(2, n, device=device, dtype=torch.float64).unbind(0)
c = torch.empty(n, device=device, dtype=torch.float32)
solve(a64.data_ptr(), b64.data_ptr(), c.data_ptr(), n)
expected = (a64 + b64).float()
print("expected:", [round(v, 3) for v in expected.tolist()[:4]])
print("got:     ", [f"{v:.3g}" for v in c.tolist()[:4]])
try:
    run_solve(solve, a64, b64)
except TypeError as error:
    print("the tensor harness says:", error)

# %%
# * **A transposed view.** ``data_ptr()`` of ``m.t()`` is the same address as ``m``'s;
#   the kernel walks memory in storage order and never sees the strides.

m = torch.randn(4, 6, device=device)
mt = m.t()  # shape (6, 4), strides (1, 6)
c = torch.empty(mt.shape, device=device)
solve(mt.data_ptr(), mt.data_ptr(), c.data_ptr(), mt.numel())
wrong = (c != 2 * mt).sum().item()
print(f"m.t(): same address as m: {mt.data_ptr() == m.data_ptr()}; "
      f"{wrong} of {mt.numel()} outputs are not 2 * m.t()")
try:
    run_solve(solve, mt, mt)
except ValueError as error:
    print("the tensor harness says:", error)

# %%
# The other promises are lengths (``N`` larger than a buffer reads or writes past its
# end, the crash above at best) and lifetimes (the address of a tensor that has been
# freed). A tensor launcher checks dtype, shape, layout and device before it launches;
# the judge format trades that for a language-neutral calling convention.

# %%
# Takeaways
# ---------
# * A tensor argument is passed as a typed pointer to its first element; an integer
#   argument is a number until ``.to(tl.pointer_type(dtype))`` makes it a pointer.
# * Test a judge-style ``solve`` with tensors you made: pass ``data_ptr()``,
#   synchronise, compare with a float64 torch reference, odd sizes included.
# * The interpreter dereferences raw addresses in its own host memory: the addresses
#   of CPU tensors work, and an unmapped one kills the process. A GPU address is not
#   host memory, so do not expect it to work; the cell that tries it runs only on a GPU
#   machine.
# * Outside a judge, take tensors: the launcher can check what an address cannot tell.
#
# Used here: :func:`triton_guide.raw_pointers.solve`,
# :func:`triton_guide.raw_pointers.run_solve`,
# :func:`triton_guide.raw_pointers.solve_reference`,
# :func:`triton_guide.debugging.run_python`,
# :func:`triton_guide.debugging.interpreted`,
# :func:`triton_guide.debugging.compile_kernels`, :func:`triton_guide.testing.assert_close`.
