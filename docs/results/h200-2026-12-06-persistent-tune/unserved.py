"""Suite shapes whose channels_last training keys the shipped H200 table does not fully serve with the persistent
kernels among the candidates (RUST_KERNELS_PERSISTENT=1). CALLS (the training ops and their inputs) is read by
../h200-2026-12-06-warp-tune/keys.py too."""

import numpy as np

from rust_kernels import ops, tuning
from rust_kernels.bench import suite
from rust_kernels.runtime import Placement

CALLS = {  # op: (its [B, C, H, W] inputs, scalars)
    "batch_norm_2d_forward": ("x", {"training": True}),
    "batch_norm_2d_backward": ("dy x", {"training": True}),
    "batch_norm_2d_act_forward": ("x", {"activation": "relu"}),
    "batch_norm_2d_act_backward": ("dy x", {"activation": "relu"}),
    "batch_norm_2d_add_relu_forward": ("x residual", {}),
    "batch_norm_2d_add_relu_backward": ("dy y x", {}),
}


def main() -> None:
    h200 = tuning.Gpu("NVIDIA H200", 132, "sm_90", 60 << 20)
    tuning.gpu = lambda device: h200
    shapes = suite.shapes("batch_norm_2d")
    order = suite.spread(len(shapes))
    need = {}
    for rank, i in enumerate(order):
        b, c, h, w = shapes[i]
        for name, (big, scalars) in CALLS.items():
            op = getattr(ops, name).op
            full = np.zeros((b, h, w, c), np.float32).transpose(0, 3, 1, 2)
            named = [full if inp.name in big.split() else np.ones(c, np.float32) for inp in op.inputs]
            values = tuple(scalars.get(s.name, s.default) for s in op.scalars)
            _, problem = op.problem(tuple(named), values, "host")
            placement = Placement(16, h200.sms)
            names = [
                tuning.entry_name(tuning.key(problem, placement, h200), p, h200.arch)
                for p in op.candidates(problem, placement)
            ]
            missing = sum(n not in tuning.shipped(h200.slug) for n in names)
            if missing:
                need.setdefault((rank, shapes[i]), []).append((name, missing))
    for (rank, s), v in sorted(need.items()):
        print(rank, "x".join(map(str, s)), v)
    print(len(need), "shapes of", len(shapes))


if __name__ == "__main__":
    main()
