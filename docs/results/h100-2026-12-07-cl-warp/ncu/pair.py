"""One channels_last training-mode BatchNorm2d forward + backward (DTYPE: bf16-f32 or f32) of a shape,
ours (the torch-native ops, tuned on first use), torch.compile of the same maths and PyTorch eager, each inside
cudaProfilerStart/Stop after warm-up: run under `ncu --profile-from-start off` (go.sh), summarise.py reads the CSV.

    python pair.py BxCxHxW DTYPE
"""

import sys

import torch

from rust_kernels.bench.baselines.batch_norm import Training
from rust_kernels.bench.ops import device_tensors

shape = tuple(int(v) for v in sys.argv[1].split("x"))
family = Training(channels_last=True)
calls = family.bench_calls(device_tensors(family, shape, sys.argv[2]))
for _ in range(5):  # tuning (ours), compiling and autotuning (Inductor)
    for side in ("ours", "compile", "torch"):
        calls[side]()
torch.cuda.synchronize()
torch.cuda.cudart().cudaProfilerStart()
for side in ("ours", "compile", "torch"):
    calls[side]()
    torch.cuda.synchronize()
torch.cuda.cudart().cudaProfilerStop()
