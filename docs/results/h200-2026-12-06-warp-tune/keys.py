"""What an H200 needs (without Rust) to time the candidates the shipped table lacks: the suite shapes where the
training ops' warp kernels are candidates (shapes.txt) and those at H*W = 1 with C > 1 (shapes_hw1.txt, whose NCHW
ops now also take the channels_last one-launch kernels, and whose fused eval forwards the channels_last kernels),
and the sm_90 kernels of every candidate of those ops there (f32 and bf16 with f32 parameters), exported to DEST.

    python keys.py DEST   # from the repository root
"""

import importlib.util
import sys
from pathlib import Path

import ml_dtypes
import numpy as np

from rust_kernels import builder, cache, ops
from rust_kernels.bench import suite
from rust_kernels.families.batch_norm import common, training
from rust_kernels.runtime import Placement

_spec = importlib.util.spec_from_file_location(
    "persistent_unserved", Path(__file__).resolve().parents[1] / "h200-2026-12-06-persistent-tune" / "unserved.py"
)
_unserved = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_unserved)

TRAINING = _unserved.CALLS  # op: (its [B, C, H, W] inputs, scalars)
EVAL = {
    "batch_norm_2d_nchw_forward_inference": ("x", {}),
    "batch_norm_2d_nchw_backward": ("dy x", {}),
    "batch_norm_2d_act_eval_forward": ("x", {"activation": "relu"}),
    "batch_norm_2d_act_eval_backward": ("dy x", {"activation": "relu"}),
    "batch_norm_2d_add_relu_eval_forward": ("x residual", {}),
    "batch_norm_2d_add_relu_eval_backward": ("dy y x", {}),
}


def kernels_of(shapes, calls) -> dict:
    """Every candidate kernel of `calls`' ops on `shapes`, by id."""
    out = {}
    for shape in shapes:
        for dtype in (np.float32, ml_dtypes.bfloat16):
            for name, (big, scalars) in calls.items():
                op = getattr(ops, name).op
                named = [np.zeros(shape, dtype) if i.name in big.split() else np.ones(shape[1], np.float32)
                         for i in op.inputs]  # fmt: skip
                values = tuple(scalars.get(s.name, s.default) for s in op.scalars)
                _, problem = op.problem(tuple(named), values, "host")
                out.update((launch.kernel.id, launch.kernel) for plan in op.candidates(problem, Placement(16, 132))
                           for launch in plan.launches)  # fmt: skip
    return out


def main(dest: Path) -> None:
    everything = suite.shapes("batch_norm_2d")
    warp = [s for s in everything if training.warp_units(s, "f32") or training.warp_units(s, "bf16")]
    hw1 = [s for s in everything if common.both_layouts(s)]
    for name, shapes in (("shapes.txt", warp), ("shapes_hw1.txt", hw1)):
        Path(__file__).with_name(name).write_text("\n".join("x".join(map(str, s)) for s in shapes) + "\n")
    kernels = {**kernels_of(warp, TRAINING), **kernels_of(hw1, {**TRAINING, **EVAL})}
    cache.export(builder.cached_entries([(k, "sm_90") for k in kernels.values()], builder.default_jobs()), dest)
    print(f"{len(warp)} + {len(hw1)} shapes, {len(kernels)} kernels in {dest}")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
