"""A side of ab.sh: the kernels of every candidate plan of the channels_last ops on the A/B shapes (f32, bf16-f32;
an H200: 132 SMs, 16-byte aligned arrays), built for sm_90 with a checkout's code (its templates) and copied with
their source-key pointers into DEST, a cache directory to carry (xz it as whl_carry/br*.tar.xz).

    python side_cache.py WORKTREE DEST   # WORKTREE: a checkout of the branch (git worktree add)
"""

import itertools
import shutil
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

sys.path.insert(0, sys.argv[1] + "/python")
from rust_kernels import builder, cache, registry
from rust_kernels.dtypes import DTYPES
from rust_kernels.families.batch_norm import common
from rust_kernels.runtime import Placement

SHAPES = ("1x256x56x56 1x96x56x56 32x112x14x14 32x200x14x14 32x320x8x8 128x320x8x8 1024x2048x1x1 32x256x28x28 "
          "128x256x28x28 128x64x112x112 32x32x149x149 1x3x1024x1024")  # fmt: skip
CHOICES = {"training": (False, True), "deterministic": (True, False), "activation": ("relu", "silu", "relu6")}
STATISTICS = ("save_mean", "save_invstd", "mean", "invstd")
PER_CHANNEL = ("weight", "bias", "running_mean", "running_var", *STATISTICS)

kernels = {}
for shape, key in itertools.product(SHAPES.split(), ("f32", "bf16-f32")):
    b, c, h, w = map(int, shape.split("x"))
    storage, param = common.split_key(key)
    nhwc = np.zeros((b, h, w, c), DTYPES[storage].numpy_dtype()).transpose(0, 3, 1, 2)
    for op in registry.ops():
        if op.candidates is None:
            continue
        arrays = tuple(nhwc if i.name not in PER_CHANNEL else np.ones(c, DTYPES[storage].acc_numpy
                       if i.name in STATISTICS else DTYPES[param].numpy_dtype()) for i in op.inputs)  # fmt: skip
        for values in itertools.product(*(CHOICES.get(s.name, (s.default,)) for s in op.scalars)):
            try:
                _, problem = op.problem(arrays, values, "host")
            except Exception:  # an op that does not take these arrays
                continue
            for plan in op.candidates(problem, Placement(16, 132)):
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
