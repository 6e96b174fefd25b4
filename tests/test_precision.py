"""float32 ``tl.dot`` follows PyTorch's float32 matmul setting: the setting reaches the
kernels, and their accuracy is the one it asks for."""

import importlib

import pytest
import torch
from triton.runtime import interpreter

from triton_guide import attention_reference, matmul, runtime
from triton_guide.attention_steps import attention_online, attention_two_pass
from triton_guide.matmul_steps import matmul_grouped, matmul_pointer_loads, matmul_row_major
from triton_guide.precision import dot_input_precision, float32_matmul_precision
from triton_guide.testing import relative_error, tolerance

SETTINGS = {"highest": "tf32x3", "high": "tf32", "medium": "tf32"}
OPS = {
    "matmul": matmul,  # through tensor descriptors (matmul_tma_kernel) under the interpreter
    "matmul_pointer_loads": matmul_pointer_loads,  # matmul_kernel
    "matmul_row_major": matmul_row_major,
    "matmul_grouped": matmul_grouped,
}
# The attention steps' dots, on q, k, v of one shape (batch, heads, seq, head_dim).
ATTENTION_STEPS = {"attention_two_pass": attention_two_pass, "attention_online": attention_online}
# The module whose launches each op makes.
LAUNCHED_FROM = {"matmul": "triton_guide.matmul", "matmul_pointer_loads": "triton_guide.matmul",
                 "matmul_row_major": "triton_guide.matmul_steps",
                 "matmul_grouped": "triton_guide.matmul_steps"}
# Large enough on a GPU for TF32's rounding to show in every element's neighbourhood.
M, N, K = runtime.pick(interpreter=(65, 47, 129), gpu=(1000, 777, 1029))


@pytest.fixture
def precision():
    """``precision(name)`` sets PyTorch's float32 matmul precision for this test only."""
    before = float32_matmul_precision()
    yield torch.set_float32_matmul_precision
    if hasattr(torch.backends.cuda.matmul, "fp32_precision"):
        # PyTorch 2.9 on: undo a per-backend setting first, or the two stay mixed and
        # torch.get_float32_matmul_precision() (which torch.compile reads) raises
        torch.backends.cuda.matmul.fp32_precision = "none"
    torch.set_float32_matmul_precision(before)
    assert torch.get_float32_matmul_precision() == before


@pytest.mark.parametrize("setting", list(SETTINGS))
def test_each_setting_names_its_dot_precision(setting, precision):
    precision(setting)
    assert float32_matmul_precision() == setting
    assert dot_input_precision(torch.float32) == SETTINGS[setting]


@pytest.mark.parametrize("setting", list(SETTINGS))
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
def test_16_bit_operands_compile_one_kernel_whatever_the_setting(setting, dtype, precision):
    precision(setting)
    assert dot_input_precision(dtype) == "tf32"  # Triton's default, unread for 16-bit


@pytest.mark.skipif(not hasattr(torch.backends.cuda.matmul, "fp32_precision"),
                    reason="PyTorch before 2.9 has no per-backend precision setting")
@pytest.mark.parametrize("backend,expected", [("ieee", "highest"), ("tf32", "high")])
def test_the_cuda_backend_setting_wins_where_both_were_set(backend, expected, precision):
    # Set the older way, then the newer per-backend way: PyTorch's CUDA matmul follows the
    # newer, and torch.get_float32_matmul_precision() raises or returns the older one.
    precision("high" if backend == "ieee" else "highest")
    torch.backends.cuda.matmul.fp32_precision = backend
    assert float32_matmul_precision() == expected


def launch_spy(monkeypatch, module_name):
    """The keyword arguments of every launch ``module_name`` makes, in order."""
    module = importlib.import_module(module_name)
    launches = []

    class Spy:
        def __init__(self, kernel, launch):
            self.kernel, self.launch = kernel, launch

        def __getitem__(self, grid):
            def call(*args, **kwargs):
                launches.append(kwargs)
                return self.launch(self.kernel)[grid](*args, **kwargs)
            return call

    if hasattr(module, "fast_launch"):
        real = module.fast_launch
        monkeypatch.setattr(module, "fast_launch", lambda kernel: Spy(kernel, real))
    else:  # matmul_steps launches its kernels directly
        for name in ("matmul_row_major_kernel", "matmul_grouped_kernel"):
            monkeypatch.setattr(module, name, Spy(getattr(module, name), lambda k: k))
    return launches


@pytest.mark.parametrize("op", list(OPS))
@pytest.mark.parametrize("setting", list(SETTINGS))
def test_the_launcher_passes_the_setting(op, setting, precision, monkeypatch, device):
    precision(setting)
    module = LAUNCHED_FROM[op]
    launches = launch_spy(monkeypatch, module)
    a, b = torch.randn(33, 40, device=device), torch.randn(40, 17, device=device)
    OPS[op](a, b)
    assert [kwargs["INPUT_PRECISION"] for kwargs in launches] == [SETTINGS[setting]]


@pytest.fixture
def dot_precisions(monkeypatch):
    """The input precision of every tl.dot the interpreter runs from here on, in order."""
    seen = []
    real = interpreter.InterpreterBuilder.create_dot

    def create_dot(self, a, b, d, input_precision, max_num_imprecise_acc):
        seen.append(input_precision.name.lower())
        return real(self, a, b, d, input_precision, max_num_imprecise_acc)

    monkeypatch.setattr(interpreter.InterpreterBuilder, "create_dot", create_dot)
    return seen


@pytest.mark.skipif(not runtime.interpreting(),
                    reason="reads tl.dot's argument in the interpreter's builder; on a GPU "
                           "test_float32_accuracy_follows_the_setting shows it arrived")
@pytest.mark.parametrize("op", list(OPS))
@pytest.mark.parametrize("setting", list(SETTINGS))
def test_the_setting_reaches_tl_dot(op, setting, precision, dot_precisions):
    precision(setting)
    OPS[op](torch.randn(33, 40), torch.randn(40, 17))
    assert set(dot_precisions) == {SETTINGS[setting]}


@pytest.mark.skipif(not runtime.interpreting(),
                    reason="reads tl.dot's argument in the interpreter's builder; on a GPU "
                           "test_attention_steps_accuracy_follows_the_setting shows it arrived")
@pytest.mark.parametrize("step", list(ATTENTION_STEPS))
@pytest.mark.parametrize("setting", list(SETTINGS))
def test_the_setting_reaches_the_attention_steps_dots(step, setting, precision, dot_precisions):
    precision(setting)
    q, k, v = (torch.randn(1, 1, 20, 16) for _ in range(3))
    ATTENTION_STEPS[step](q, k, v)
    assert dot_precisions and set(dot_precisions) == {SETTINGS[setting]}  # q @ k^T, p @ v


@pytest.mark.parametrize("step", list(ATTENTION_STEPS))
@pytest.mark.parametrize("setting", ["highest", "high"])
def test_attention_steps_accuracy_follows_the_setting(step, setting, precision, device, check):
    precision(setting)
    shape = runtime.pick(interpreter=(1, 2, 40, 32), gpu=(2, 4, 1000, 64))
    q, k, v = (torch.randn(shape, device=device) for _ in range(3))
    out = ATTENTION_STEPS[step](q, k, v)
    expected = attention_reference(q.double(), k.double(), v.double())
    error = check(step, out, expected, rtol=tolerance(torch.float32, tensor_cores=True))
    if setting == "highest" or runtime.interpreting():
        assert error < 1e-5
    else:
        assert error > 1e-4  # TF32 really ran


@pytest.mark.parametrize("op", list(OPS))
@pytest.mark.parametrize("setting", ["highest", "high"])
def test_float32_accuracy_follows_the_setting(op, setting, precision, device, check):
    precision(setting)
    a = torch.randn(M, K, device=device)
    b = torch.randn(K, N, device=device)
    c = OPS[op](a, b)
    expected = a.double() @ b.double()
    error = check(op, c, expected, rtol=tolerance(torch.float32, tensor_cores=True))
    if setting == "highest" or runtime.interpreting():
        # float32's accuracy: the interpreter multiplies exactly, a GPU through tf32x3.
        assert error < 1e-5
    else:
        # TF32 (10 fraction bits) leaves about 5e-4 over the tensor: it really ran as TF32.
        assert error > 1e-4


@pytest.mark.skipif(runtime.interpreting(),
                    reason="the interpreter multiplies float32 exactly whatever the "
                           "precision, so the settings' results cannot differ there")
def test_each_setting_runs_its_own_compiled_kernel(precision, device):
    # The fast launch path keys constexpr keywords by value: switching the setting back and
    # forth must switch kernels, never reuse the one compiled for the other setting.
    a = torch.randn(512, 512, device=device)
    b = torch.randn(512, 512, device=device)
    results = {}
    for setting in ("highest", "high", "highest", "high"):
        precision(setting)
        c = matmul(a, b)
        if setting in results:
            assert torch.equal(c, results[setting])
        results[setting] = c
    assert not torch.equal(results["highest"], results["high"])
