"""A side of ab.sh: the kernels of every candidate plan of every op for the A/B shapes' tuning keys (channels_last,
f32 and bf16-f32; an H200: 132 SMs, 16-byte aligned arrays; merge_tuning_table.candidate_plans), built for sm_90
with a checkout's code (its templates) and copied with their source-key pointers into DEST, a cache directory to
carry (xz it as whl_carry/br*.tar.xz).

    python side_cache.py WORKTREE DEST   # WORKTREE: a checkout of the branch (git worktree add)
"""

import json
import shutil
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

# The branch's package first: merge_tuning_table (this repository's scripts/) then finds it imported.
sys.path.insert(0, sys.argv[1] + "/python")
from rust_kernels import builder, cache, tuning

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "scripts"))
from merge_tuning_table import candidate_plans

SHAPES = ("1x256x56x56 1x96x56x56 32x112x14x14 32x200x14x14 32x320x8x8 128x320x8x8 1024x2048x1x1 32x256x28x28 "
          "128x256x28x28 128x64x112x112 32x32x149x149 1x3x1024x1024")  # fmt: skip
H200 = tuning.Gpu("NVIDIA H200", 132, "sm_90", 60 << 20)

kernels = {}
for shape in SHAPES.split():
    for dtype_key in ("f32", "bf16-f32"):
        b, c, h, w = map(int, shape.split("x"))
        order = None if h * w == 1 else [0, 2, 3, 1]  # H*W = 1: both memory formats, the key names none
        key = json.dumps([[b, c, h, w], dtype_key, order, 16, H200.name, H200.sms])
        for plan in candidate_plans(key, H200):
            kernels.update((launch.kernel.id, launch.kernel) for launch in plan.launches)
with ThreadPoolExecutor(2) as pool:
    list(pool.map(lambda k: builder.build(k, "sm_90"), kernels.values()))
dest = Path(sys.argv[2])
(dest / "by-source").mkdir(parents=True, exist_ok=True)
for kernel in kernels.values():
    source_key = builder.source_key(kernel, "sm_90")
    key = cache.resolve(source_key)
    shutil.copytree(cache.cache_dir() / "kernels" / key, dest / "kernels" / key, dirs_exist_ok=True)
    (dest / "by-source" / source_key).write_text(key)
print(f"{len(kernels)} kernels in {dest}")
