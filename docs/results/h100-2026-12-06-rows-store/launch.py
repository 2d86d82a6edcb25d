"""One launch each of the row kernels' softmax and LayerNorm forward (examples/rows, the benchmark's plans), bf16
and f32, 4096 and 16384 columns over 2^24 elements, and a copy of the same bytes, for ncu (run.sh): bf16 softmax's
long rows reach 0.54-0.67 of a copy where LayerNorm's, with the same plans, reach ~0.85 (issue 17).

    python launch.py          # from the repository root, with the rows' kernels in RUST_KERNELS_CACHE_DIR
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "examples" / "rows"))
import run
import torch

import rust_kernels

for name in ("softmax", "layer_norm_forward"):
    case = next(c for c in run.CASES if c.name == name)
    for dtype, tdtype in (("bf16", torch.bfloat16), ("f32", torch.float32)):
        for n in (4096, 16384):
            m = 2**24 // n
            gen = torch.Generator(device="cuda").manual_seed(0)
            x = torch.randn(m, n, device="cuda", dtype=tdtype, generator=gen) * 3
            data = {"x": x, **{e: torch.rand(n, device="cuda", dtype=tdtype, generator=gen) + 0.5 for e in case.extra}}
            y = torch.empty_like(x)
            threads, consts = run.plan(case, n, 16 // x.element_size())
            kernel = run.kernel_for(case, dtype, threads, consts)
            fn = rust_kernels.compile(kernel, target="ptx").get_kernel()
            fn.launch(m, threads, run.launch_args(case, kernel, data, y))
            y.copy_(x)
            torch.cuda.synchronize()
            print(name, dtype, f"{m}x{n}", kernel.id, f"block={threads}", consts, flush=True)
