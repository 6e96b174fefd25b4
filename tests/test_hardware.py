"""triton_guide.hardware: each query asks the GPU of the tensors at hand, once per GPU."""

from __future__ import annotations

import pytest
import torch

from triton_guide import hardware


@pytest.fixture
def fake_gpus(monkeypatch):
    """Two fake GPUs, 0 an H100 and 1 an RTX 50-series, and a log of torch's queries."""
    asked = []
    props = {0: type("Props", (), {"multi_processor_count": 132,
                                   "shared_memory_per_block_optin": 232448}),
             1: type("Props", (), {"multi_processor_count": 170,
                                   "shared_memory_per_block_optin": 101376})}
    capability = {0: (9, 0), 1: (12, 0)}
    monkeypatch.setattr(torch.cuda, "get_device_capability",
                        lambda index: asked.append(("capability", index)) or capability[index])
    monkeypatch.setattr(torch.cuda, "get_device_properties",
                        lambda index: asked.append(("properties", index)) or props[index])
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 1)
    monkeypatch.setattr(hardware, "interpreting", lambda: False)
    hardware.clear_caches()
    yield asked
    hardware.clear_caches()  # forget the fake answers


def test_queries_follow_the_device_they_are_given(fake_gpus):
    first, second = torch.device("cuda", 0), torch.device("cuda:1")
    assert hardware.multiprocessors(first) == 132 and hardware.multiprocessors(second) == 170
    assert hardware.shared_memory_per_block(first) == 232448
    assert hardware.shared_memory_per_block("cuda:1") == 101376
    assert hardware.compute_capability(first) == (9, 0)
    assert hardware.compute_capability(1) == (12, 0)
    # no index, or no device: the current GPU (here 1), never GPU 0
    assert hardware.multiprocessors(torch.device("cuda")) == 170
    assert hardware.multiprocessors() == 170


def test_torch_is_asked_once_per_gpu(fake_gpus):
    for _ in range(3):
        for index in (0, 1):
            hardware.compute_capability(torch.device("cuda", index))
            hardware.multiprocessors(torch.device("cuda", index))
            hardware.shared_memory_per_block(torch.device("cuda", index))
    assert sorted(fake_gpus) == [("capability", 0), ("capability", 1),
                                 ("properties", 0), ("properties", 1)]


def test_tma_from_hopper_on(fake_gpus, monkeypatch):
    assert hardware.has_tma(torch.device("cuda", 0))
    monkeypatch.setattr(hardware, "compute_capability", lambda device: (8, 9))
    assert not hardware.has_tma(torch.device("cuda", 0))


def test_tma_under_the_interpreter(monkeypatch):
    monkeypatch.setattr(hardware, "interpreting", lambda: True)
    assert hardware.has_tma(torch.device("cpu"))


def test_tma_alignment_is_sixteen_bytes():
    assert hardware.TMA_ALIGNMENT == 16


@pytest.mark.parametrize("elements,most,warps", [
    (128, 32, 4), (2047, 32, 4), (2048, 32, 8), (16384, 32, 16), (32768, 32, 32),
    (65536, 32, 32),
    (32768, 16, 16), (4096, 16, 8),  # the norms' cap
    (32768, 8, 8), (1024, 8, 4),  # cross-entropy's cap
])
def test_warps_grow_with_the_tile_up_to_the_cap(elements, most, warps):
    assert hardware.num_warps_for(elements, most=most) == warps


def test_launchers_use_the_shared_helpers():
    """No op module keeps its own copy of a hardware query or of the warps table."""
    from pathlib import Path
    package = Path(hardware.__file__).parent
    for path in package.glob("*.py"):
        if path.name == "hardware.py":
            continue
        text = path.read_text()
        assert "multi_processor_count" not in text or path.name == "results.py", path.name
        assert "def _num_warps" not in text, path.name
        assert "TMA_ALIGNMENT = " not in text, path.name
