"""Where a compiled ResNet-50 training step with our BN spends host time: cProfile over steps after warm-up."""
import cProfile
import pstats
import sys
import time

import torch
import torchvision

import rust_kernels.torch as rk

fmt = torch.channels_last if sys.argv[1] == "cl" else torch.contiguous_format
torch.manual_seed(0)
model = torchvision.models.resnet50().cuda().to(memory_format=fmt).train()
model = rk.convert(model, fuse=True)
opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
x = torch.randn(128, 3, 224, 224, device="cuda").contiguous(memory_format=fmt)
y = torch.randint(0, 1000, (128,), device="cuda")
cmodel = torch.compile(model)
def step():
    with torch.autocast("cuda", torch.bfloat16):
        loss = torch.nn.functional.cross_entropy(cmodel(x), y)
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
for _ in range(5):
    step()
torch.cuda.synchronize()
t = time.perf_counter()
for _ in range(5):
    step()
torch.cuda.synchronize()
print("step ms", (time.perf_counter() - t) / 5 * 1e3)
pr = cProfile.Profile()
pr.enable()
for _ in range(5):
    step()
torch.cuda.synchronize()
pr.disable()
st = pstats.Stats(pr)
st.sort_stats("tottime").print_stats(25)
st.sort_stats("cumtime").print_stats(40)
