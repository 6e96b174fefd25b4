import importlib.util
import os
import re

import pytest
import torch
import triton
import triton.language as tl

from triton_guide import runtime
from triton_guide.debugging import (
    capture_output,
    checked_sqrt,
    checked_sqrt_kernel,
    checked_sqrt_reference,
    compile_kernels,
    interpreted,
    run_python,
    trace_kernel,
)
from triton_guide.vector_add import vector_add_kernel

VECTOR_ADD_SIGNATURE = {"x_ptr": "*fp32", "y_ptr": "*fp32", "out_ptr": "*fp32",
                        "num_elements": "i32", "BLOCK_SIZE": "constexpr",
                        "INT64_OFFSETS": "constexpr"}


@triton.jit
def arange_of_100_kernel(out_ptr):  # deliberately wrong: tl.arange needs a power of two
    offsets = tl.arange(0, 100)
    tl.store(out_ptr + offsets, offsets.to(tl.float32))


@triton.jit
def last_line_assigns_kernel(x_ptr):  # its last line's result shows only at the return
    offsets = tl.arange(0, 4)
    doubled = tl.load(x_ptr + offsets) * 2  # noqa: F841


@pytest.mark.parametrize("n", [1, 17, 1024, 1025], ids=["n=1", "n=17", "one_block", "tail_of_1"])
def test_checked_sqrt_matches_torch(n, device, check):
    x = torch.rand(n, device=device) * 100
    check("checked_sqrt", checked_sqrt(x), checked_sqrt_reference(x.double()), rtol=1e-6)


def test_checked_sqrt_refuses_block_size_not_power_of_two(device):
    with pytest.raises(ValueError, match="block_size must be a power of two"):
        checked_sqrt(torch.ones(4, device=device), block_size=12)


def test_capture_output_catches_file_descriptor_1():
    with capture_output() as captured:
        print("from python")
        os.write(1, b"from C\n")
    assert captured.text == "from python\nfrom C\n"


def test_capture_output_catches_device_print(device):
    x = torch.tensor([4.0, 9.0, 16.0], device=device)
    with capture_output() as captured:
        checked_sqrt(x, block_size=4, verbose=True)
    assert "x:" in captured.text


def trace_vector_add(n=6, programs=2):
    x, y, out = torch.arange(float(n)), torch.ones(n), torch.empty(n)
    kernel = interpreted(vector_add_kernel)
    return trace_kernel(vector_add_kernel,
                        lambda: kernel[(programs,)](x, y, out, n, BLOCK_SIZE=4))


def test_trace_kernel_records_each_program():
    assert sorted({step.call for step in trace_vector_add(programs=2)}) == [0, 1]


def test_trace_kernel_shows_each_value_under_the_line_that_assigned_it():
    steps = [step for step in trace_vector_add() if step.call == 1]
    assigned = [(step.source.split(" = ")[0], step.assigned) for step in steps]
    mask_step = next(step for step in steps if step.assigned == ("mask",))
    assert (assigned, mask_step.values["mask"].tolist()) == (
        [("program_id", ("program_id",)), ("if INT64_OFFSETS:", ()),
         ("offsets", ("offsets",)), ("mask", ("mask",)), ("x", ("x",)), ("y", ("y",)),
         ("tl.store(out_ptr + offsets, x + y, mask=mask)", ())],
        [True, True, False, False])


def test_trace_kernel_shows_what_the_last_line_assigned():
    x = torch.arange(4.0)
    kernel = interpreted(last_line_assigns_kernel)
    steps = trace_kernel(last_line_assigns_kernel, lambda: kernel[(1,)](x))
    assert steps[-1].values["doubled"].tolist() == [0.0, 2.0, 4.0, 6.0]


SQRT_SIGNATURE = {"x_ptr": "*fp32", "out_ptr": "*fp32", "num_elements": "i32",
                  "BLOCK_SIZE": "constexpr", "VERBOSE": "constexpr"}


def test_compile_kernels_reports_errors_and_compiles_correct_kernels():
    # One fresh compiler process for all three, unaffected by what this process ran.
    results = compile_kernels([
        (arange_of_100_kernel, {"out_ptr": "*fp32"}, {}),
        (vector_add_kernel, VECTOR_ADD_SIGNATURE, {"BLOCK_SIZE": 256, "INT64_OFFSETS": False}),
        (checked_sqrt_kernel, SQRT_SIGNATURE, {"BLOCK_SIZE": 8, "VERBOSE": True}),
    ])
    summary = [(r.error_type, "power of 2" in r.message, r.ptx_lines > 0,
                "BLOCK_SIZE = 8" in r.printed) for r in results]
    assert summary == [("CompilationError", True, False, False),
                       (None, False, True, False),
                       (None, False, True, True)]


def test_compile_kernels_passes_multiples_of_16_to_the_compiler():
    # A masked vector add: loads of several values per instruction (ld.global.v2 with 2
    # elements per lane here) only when the length is known to divide by 16.
    pointers = ["x_ptr", "y_ptr", "out_ptr"]
    constexprs = {"BLOCK_SIZE": 256, "INT64_OFFSETS": False}
    divides, does_not = compile_kernels([
        (vector_add_kernel, VECTOR_ADD_SIGNATURE, constexprs, pointers + ["num_elements"]),
        (vector_add_kernel, VECTOR_ADD_SIGNATURE, constexprs, pointers),
    ])
    wide = re.compile(r"ld\.global\.v\d\.b32")
    assert wide.search(divides.ptx) and "ld.global.b32" not in divides.ptx
    assert not wide.search(does_not.ptx) and "ld.global.b32" in does_not.ptx
    # The kernel's own argument order decides, not the signature's.
    reordered = {"num_elements": "i32", **VECTOR_ADD_SIGNATURE}
    (also_does_not,) = compile_kernels([(vector_add_kernel, reordered, constexprs, pointers)])
    assert not wide.search(also_does_not.ptx) and "ld.global.b32" in also_does_not.ptx
    with pytest.raises(ValueError, match=r"multiples of 16 \['n'\] are not in the signature"):
        compile_kernels([(vector_add_kernel, VECTOR_ADD_SIGNATURE, constexprs, ["n"])])
    with pytest.raises(TypeError, match="a list of argument names, not the string"):
        compile_kernels([(vector_add_kernel, VECTOR_ADD_SIGNATURE, constexprs, "num_elements")])



@triton.jit
def pipelined_dot_kernel(a_ptr, out_ptr, BLOCK: tl.constexpr):
    offsets = tl.arange(0, BLOCK)[:, None] * BLOCK + tl.arange(0, BLOCK)[None, :]
    total = tl.zeros([BLOCK, BLOCK], tl.float32)
    for step in range(0, 8):
        total = tl.dot(tl.load(a_ptr + offsets + step), tl.load(a_ptr + offsets + 7 * step),
                       total)
    tl.store(out_ptr + offsets, total)


def test_compile_kernels_takes_launch_options_and_reports_shared_memory():
    signature = {"a_ptr": "*fp32", "out_ptr": "*fp32", "BLOCK": "constexpr"}
    constexprs = {"BLOCK": 64}
    two, four, six_warps = compile_kernels([
        (pipelined_dot_kernel, signature, constexprs, [], {"num_stages": 2}),
        (pipelined_dot_kernel, signature, constexprs, [], {"num_stages": 4, "num_warps": 8}),
        (vector_add_kernel, VECTOR_ADD_SIGNATURE, {"BLOCK_SIZE": 256, "INT64_OFFSETS": False},
         [], {"num_warps": 6}),
    ])
    # Each stage more holds another pair of the loop's 64 x 64 float32 tiles (32 KiB) in
    # shared memory.
    assert two.error_type is None and four.error_type is None, (two.message, four.message)
    assert four.shared - two.shared >= 2 * 32768, (two.shared, four.shared)
    assert six_warps.error_type is not None and "power of 2" in six_warps.message
    with pytest.raises(ValueError, match=r"launch options \['warps'\] are not among"):
        compile_kernels([(vector_add_kernel, VECTOR_ADD_SIGNATURE, {}, [], {"warps": 4})])

HELPED_KERNEL = """
import triton
import triton.language as tl

SCALE = tl.constexpr(3.0)


@triton.jit
def _scaled(x):
    return x * SCALE


@triton.jit
def helped_kernel(x_ptr, out_ptr, BLOCK_SIZE: tl.constexpr):
    offsets = tl.arange(0, BLOCK_SIZE)
    tl.store(out_ptr + offsets, _scaled(tl.load(x_ptr + offsets)))
"""


def test_compile_kernels_whole_file_brings_the_kernels_helpers(tmp_path):
    path = tmp_path / "helped.py"
    path.write_text(HELPED_KERNEL)
    kernel = load_solve_module(path).helped_kernel
    job = (kernel, {"x_ptr": "*fp32", "out_ptr": "*fp32", "BLOCK_SIZE": "constexpr"},
           {"BLOCK_SIZE": 64})
    (alone,) = compile_kernels([job])  # the kernel's source only: no _scaled, no SCALE
    (whole,) = compile_kernels([job], whole_file=True)
    assert (alone.error_type, alone.found) == ("CompilationError", True)
    assert (whole.error_type, whole.ptx_lines > 0) == (None, True), whole.message
    # A file that turns the interpreter on before defining its kernel has none to compile.
    path.write_text("import os\nos.environ['TRITON_INTERPRET'] = '1'\n" + HELPED_KERNEL)
    (missing,) = compile_kernels([job], whole_file=True)
    assert (missing.found, missing.ptx_lines) == (False, 0)
    assert "has no @triton.jit function helped_kernel" in missing.message


def load_solve_module(path):
    spec = importlib.util.spec_from_file_location(f"helped_{abs(hash(str(path)))}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_run_python_reports_a_segmentation_fault():
    finished = run_python("import ctypes; print('before', flush=True); ctypes.string_at(0)")
    assert (finished.returncode, finished.output) == (-11, "before\n")


@pytest.mark.skipif(runtime.interpreting(), reason="the interpreter ignores tl.device_assert")
def test_device_assert_fires_on_gpu_with_debug():
    code = ("import torch; from triton_guide.debugging import checked_sqrt; "
            "checked_sqrt(torch.tensor([1.0, -1.0], device='cuda')); torch.cuda.synchronize()")
    finished = run_python(code, env={"TRITON_DEBUG": "1"})
    assert finished.returncode != 0 and "every x must be >= 0" in finished.output
