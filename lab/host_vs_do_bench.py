"""On a GPU: softmax and rms_norm against torch at small sizes, in three rounds, timed by
do_bench and by host time per call, then by gpu_ms and torch.profiler's kernel times.

    python lab/host_vs_do_bench.py

Written to see why the smallest sizes of host-timed sweeps changed from one recording to
the next (NOTES.md, eighteenth session)."""
import time
import torch
import triton_guide
from triton_guide import softmax, rms_norm
from triton_guide.benchmark import median_ms, gpu_ms, copies_for_cold_cache

print(torch.cuda.get_device_name(), flush=True)


def host_us(fn, calls=300):
    fn(); torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    host = (time.perf_counter() - start) / calls * 1e6
    torch.cuda.synchronize()
    return host


cases = []
for n in (128, 256, 512, 1024, 2048):
    data = torch.randn(4096, n, device="cuda")
    cases.append((f"softmax 4096x{n} fused", lambda d=data: softmax(d, method="one_pass"), data))
    cases.append((f"softmax 4096x{n} torch", lambda d=data: torch.softmax(d, -1), data))
for h in (1024, 2048, 4096):
    x = torch.randn(4096, h, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(h, device="cuda", dtype=torch.bfloat16)
    cases.append((f"rms_norm 4096x{h} ours", lambda x=x, w=w: rms_norm(x, w), x))
    cases.append((f"rms_norm 4096x{h} torch", lambda x=x, w=w: torch.nn.functional.rms_norm(x, (x.shape[-1],), w), x))

for rnd in range(3):
    print(f"round {rnd}", flush=True)
    for name, fn, data in cases:
        dob = median_ms(fn) * 1e3
        host = host_us(fn)
        print(f"  {name:<28} do_bench {dob:7.1f} us   host per call {host:6.1f} us", flush=True)

# GPU time without the host, and torch.profiler's own kernel times, once
for name, fn, data in cases[:10]:
    copies = [data.clone() for _ in range(copies_for_cold_cache(data.numel() * data.element_size() * 2))]
    if "fused" in name:
        calls = [lambda d=d: softmax(d, method="one_pass") for d in copies]
    else:
        calls = [lambda d=d: torch.softmax(d, -1) for d in copies]
    print(f"  {name:<28} gpu_ms {gpu_ms(calls) * 1e3:7.1f} us", flush=True)
from torch.profiler import profile, ProfilerActivity
with profile(activities=[ProfilerActivity.CUDA]) as prof:
    for name, fn, data in cases[:10]:
        for _ in range(20):
            fn()
    torch.cuda.synchronize()
print(prof.key_averages().table(sort_by="cuda_time_total", row_limit=15))
