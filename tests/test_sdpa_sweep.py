"""Attention against PyTorch's SDPA (triton_guide.benchmark.sdpa) and the backward sweep
variant (triton_guide.benchmark.random_inputs_backward). Nothing is timed: a stand-in
benchmark records what a sweep is asked for, and its variants are run on small CPU
inputs."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from triton_guide import benchmark


class SweepAsked:
    """Stands in for a Benchmark: keeps the arguments of its one sweep."""

    def sweep(self, title, xs, variants, rate, **options):
        self.title, self.xs, self.variants, self.rate, self.options = (
            title, xs, variants, rate, options)
        return "results"


def plain_attention(q, k, v, causal=False):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if causal:
        n = q.shape[-2]
        scores = scores.masked_fill(torch.ones(n, n, dtype=torch.bool).triu(1), -math.inf)
    return torch.softmax(scores, dim=-1) @ v


def test_random_inputs_backward_times_the_gradients_of_every_input():
    forwards = []

    def scale_rows(a, b):
        forwards.append((a, b))
        return a * b

    prepare = benchmark.random_inputs_backward(scale_rows, lambda n: (3, n), lambda n: (n,),
                                               dtype=torch.float64, warm=True)
    call = prepare(5)
    assert len(forwards) == 1  # the forward runs once, when the inputs are prepared
    a, b = forwards[0]
    assert a.requires_grad and b.requires_grad and a.dtype == torch.float64
    grad_a, grad_b = call()
    # d(a * b)/da = upstream * b; d/db sums upstream * a over the broadcast rows
    upstream = grad_a / b
    torch.testing.assert_close(grad_b, (upstream * a).sum(0))
    again = call()  # the graph is kept: the same backward again, same gradients
    torch.testing.assert_close(again[0], grad_a)
    assert len(forwards) == 1 and a.grad is None  # autograd.grad leaves .grad alone
    prepare(5)
    assert not torch.equal(forwards[1][0], a)  # preparing again draws fresh inputs


def test_sdpa_backends_name_the_baselines_and_apply_the_causal_mask():
    assert list(benchmark.sdpa_backends()) == ["SDPA flash", "SDPA cuDNN"]
    q, k, v = (torch.randn(1, 2, 33, 16) for _ in range(3))
    for causal in (False, True):
        flash = benchmark.sdpa_backends(causal)["SDPA flash"]  # runs on a CPU too
        torch.testing.assert_close(flash(q, k, v), plain_attention(q, k, v, causal))


@pytest.mark.skipif(torch.cuda.is_available(), reason="cuDNN attention runs on a GPU")
def test_a_forced_backend_raises_instead_of_falling_back():
    q = torch.randn(1, 1, 8, 16)
    with pytest.raises(RuntimeError):
        benchmark.sdpa_backends()["SDPA cuDNN"](q, q, q)


@pytest.mark.parametrize("backward", [False, True], ids=["forward", "backward"])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_attention_sweep_asks_for_ours_then_both_backends_at_their_flops(causal, backward):
    calls = []

    def ours(q, k, v, **options):
        calls.append(options)
        return plain_attention(q.double(), k.double(), v.double(), **options).to(q.dtype)

    asked = SweepAsked()
    assert benchmark.attention_sweep(asked, {"ours": ours}, (64, 128), batch=2, heads=3,
                                     head_dim=16, causal=causal, backward=backward) == "results"
    assert asked.title == (f"attention {'backward' if backward else 'forward'}, "
                           f"{'causal' if causal else 'full'}, d=16")
    assert asked.xs == [64, 128]
    assert list(asked.variants) == ["ours", "SDPA flash", "SDPA cuDNN"]
    assert asked.options == dict(label="N", unit="TFLOP/s", ceiling="gemm_fp16",
                                 xlabel="sequence length")
    # 4 B H N^2 d FLOPs forward, half of them causal, 2.5 times that backward; 2 ms a call
    flops = 4 * 2 * 3 * 128**2 * 16 * (0.5 if causal else 1) * (2.5 if backward else 1)
    assert asked.rate(128, 2.0) == pytest.approx(flops / 2.0 * 1e-9)
    timed = asked.variants["ours"](64)  # warmed: called once while preparing
    assert calls == [{"causal": True} if causal else {}]
    out = timed()
    if backward:
        assert len(out) == 3 and all(grad.shape == (2, 3, 64, 16) for grad in out)
    else:
        assert out.shape == (2, 3, 64, 16) and out.dtype == torch.float16


def test_attention_sweep_keeps_a_title_it_is_given():
    asked = SweepAsked()
    benchmark.attention_sweep(asked, {"step 1": F.scaled_dot_product_attention}, [4096],
                              batch=1, heads=1, head_dim=64, title="steps ladder")
    assert asked.title == "steps ladder" and asked.xs == [4096]
    assert list(asked.variants) == ["step 1", "SDPA flash", "SDPA cuDNN"]


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("backward", [False, True], ids=["forward", "backward"])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_on_a_gpu_ours_and_both_backends_compute_the_same_attention(causal, backward):
    from triton_guide import attention

    asked = SweepAsked()
    benchmark.attention_sweep(asked, {"triton_guide": attention}, [384], batch=2, heads=4,
                              head_dim=64, causal=causal, backward=backward)
    outputs = {}
    for name, prepare in asked.variants.items():
        torch.manual_seed(0)  # the same q, k, v (and upstream gradient) for every variant
        result = prepare(384)()
        outputs[name] = result if backward else (result,)
    for name in ("SDPA flash", "SDPA cuDNN"):
        for ours, theirs in zip(outputs["triton_guide"], outputs[name]):
            torch.testing.assert_close(ours, theirs, atol=2e-2, rtol=2e-2)


def test_a_page_that_sweeps_through_a_sweeping_helper_has_benchmarks():
    # The stamp says "Timings live" (or that none are recorded yet) only for a page that
    # has benchmarks, found by reading its source for the calls that run a sweep.
    from triton_guide.benchmark.recording import _calls_sweep

    assert _calls_sweep("r = attention_sweep(bench, {}, [1], batch=1, heads=1, head_dim=8)")
    assert _calls_sweep("r = benchmark.attention_sweep(bench, {}, [1])")
    assert _calls_sweep("r = bench.sweep('t', [1], {}, rate)")
    assert _calls_sweep("sizes = measure_device_sizes(bench)")
    assert _calls_sweep("sweep_working_sets(bench, 't', [1.0], read, passes, sizes)")
    assert _calls_sweep("benchmark.place_on_roofline(bench, 't', costs, run_kernel)")
    assert _calls_sweep("runs = compute_bound_sweep(bench, 't', [1], {}, flops, label='n')")
    assert not _calls_sweep("out = attention(q, k, v)\nsweeps = {}")
    assert not _calls_sweep("figure = roofline(placed, costs, copy)")
    assert not _calls_sweep("runs = random_inputs_by_setting({}, 'num_stages', 8)")


def test_every_page_with_recordings_is_found_to_have_benchmarks():
    from triton_guide.benchmark.recording import _calls_sweep
    from triton_guide.results import page_key, results_dir

    recorded = {path.stem for path in results_dir().glob("*/*.json")}
    pages = {page_key(page): page for page in Path(__file__).resolve().parent.parent.glob(
        "examples/*/[0-9][0-9]_*.py")}
    assert recorded <= set(pages)
    assert [key for key in sorted(recorded) if not _calls_sweep(pages[key].read_text())] == []


def test_every_benchmark_helper_that_sweeps_is_listed_as_one():
    # A helper that runs bench.sweep or bench.measure for a page stands in for the page's
    # own call: unlisted, a page that sweeps only through it would be found to have none.
    import ast

    from triton_guide import benchmark
    from triton_guide.benchmark.recording import SWEEPING_HELPERS

    functions = [node for module in Path(benchmark.__file__).parent.glob("*.py")
                 for node in ast.parse(module.read_text()).body  # module-level functions
                 if isinstance(node, ast.FunctionDef)]

    def sweeps(function, sweeping):  # calls bench.sweep / bench.measure, or a helper that does
        return any(isinstance(call, ast.Call) and (
            (isinstance(call.func, ast.Attribute) and call.func.attr in ("sweep", "measure")
             and isinstance(call.func.value, ast.Name) and call.func.value.id == "bench")
            or (isinstance(call.func, ast.Name) and call.func.id in sweeping))
            for call in ast.walk(function))

    sweeping: set[str] = set()
    while True:  # until no helper calling one found so far is left
        found = {function.name for function in functions if sweeps(function, sweeping)}
        if found == sweeping:
            break
        sweeping = found
    assert "attention_sweep" in sweeping  # the scan finds what it is looking for
    assert sweeping == set(SWEEPING_HELPERS)
