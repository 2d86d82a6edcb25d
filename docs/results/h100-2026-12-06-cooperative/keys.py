"""What an H200 needs (without Rust) to add the cooperative kernels to the shipped table: the suite shapes whose
channels_last training keys (plain, + ReLU, + add + ReLU; f32 and bf16 with f32 parameters) the shipped H200 table
lacks entries for (shapes.txt, in the suite's spread order: with this commit's candidates, those of the cooperative
kernels), and the sm_90 kernels of the candidates it lacks, exported to DEST (`tune` times only those).

    python keys.py DEST   # from the repository root
"""

import importlib.util
import sys
from pathlib import Path

import ml_dtypes
import numpy as np

from rust_kernels import builder, cache, ops, tuning
from rust_kernels.bench import suite
from rust_kernels.runtime import Placement

_spec = importlib.util.spec_from_file_location(
    "persistent_unserved", Path(__file__).resolve().parents[1] / "h200-2026-12-06-persistent-tune" / "unserved.py"
)
_unserved = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_unserved)

H200 = tuning.Gpu("NVIDIA H200", 132, "sm_90", 60 << 20)


def main(dest: Path) -> None:
    tuning.gpu = lambda device: H200
    placement = Placement(16, H200.sms)
    shapes, kernels = [], {}
    everything = suite.shapes("batch_norm_2d")
    for shape in (everything[i] for i in suite.spread(len(everything))):
        b, c, h, w = shape
        lacking = 0
        for dtype in (np.float32, ml_dtypes.bfloat16):
            for name, (big, scalars) in _unserved.CALLS.items():
                op = getattr(ops, name).op
                full = np.zeros((b, h, w, c), dtype).transpose(0, 3, 1, 2)
                named = [full if i.name in big.split() else np.ones(c, np.float32) for i in op.inputs]
                _, problem = op.problem(tuple(named), tuple(scalars.get(s.name, s.default) for s in op.scalars), "host")
                key = tuning.key(problem, placement, H200)
                for plan in op.candidates(problem, placement):
                    if tuning.entry_name(key, plan, H200.arch) not in tuning.shipped(H200.slug):
                        lacking += 1
                        kernels.update((launch.kernel.id, launch.kernel) for launch in plan.launches)
        if lacking:
            shapes.append(shape)
    Path(__file__).with_name("shapes.txt").write_text("\n".join("x".join(map(str, s)) for s in shapes) + "\n")
    cache.export(builder.cached_entries([(k, "sm_90") for k in kernels.values()], builder.default_jobs()), dest)
    print(f"{len(shapes)} shapes, {len(kernels)} kernels in {dest}: {sorted(kernels)}")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
