"""The sm_90 kernels of every candidate of the training ops (plain, + ReLU, + ReLU6, + add + ReLU; f32 and bf16 with
f32 parameters) on the suite's batch-32 shapes (ResNet-50's and MobileNetV2's BatchNorm inputs among them), into DEST:
what `bench --models resnet50 mobilenet_v2 --batch 32 --bn train --fuse` launches, tuned or not (go.sh's "models").

    python build.py DEST   # from the repository root
"""

import importlib.util
import sys
from pathlib import Path

from rust_kernels import builder, cache
from rust_kernels.bench import suite

_spec = importlib.util.spec_from_file_location(
    "warp_tune_keys", Path(__file__).resolve().parents[1] / "h200-2026-12-06-warp-tune" / "keys.py"
)
keys = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(keys)

CALLS = keys.TRAINING | {
    "batch_norm_2d_act_forward_relu6": ("x", {"activation": "relu6"}),
    "batch_norm_2d_act_backward_relu6": ("dy x", {"activation": "relu6"}),
}


def main(dest: Path) -> None:
    shapes = [s for s in suite.shapes("batch_norm_2d") if s[0] == 32]
    kernels = {}
    for name, call in CALLS.items():
        kernels.update(keys.kernels_of(shapes, {name.removesuffix("_relu6"): call}))
    cache.export(builder.cached_entries([(k, "sm_90") for k in kernels.values()], builder.default_jobs()), dest)
    print(f"{len(shapes)} shapes, {len(kernels)} kernels in {dest}")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
