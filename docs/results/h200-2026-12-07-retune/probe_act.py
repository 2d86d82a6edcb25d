"""The NCHW eval backward through a fused ReLU (batch_norm_2d_act_eval_backward: BN + ReLU fused by
convert(fuse=True) with frozen BN) where no 16-byte pack divides H*W: every candidate plan, the grouped kernel's
(batch_norm_2d_frozen_backward_grouped_act, new) among them, against the rule's (the split kernel), timed interleaved
with PyTorch eager, torch.compile of the same maths and a same-bytes copy; each plan's outputs checked against the
rule's and the rule's against torch's (../h100-2026-12-07-eval-groups/probe.py's time()). Every plan's median goes to
plans_act.csv.

    python probe_act.py         # on the GPU (RUST_KERNELS_CACHE_DIR holding the kernels, the tuning off)
"""

import importlib.util
from pathlib import Path

from rust_kernels import ops
from rust_kernels.bench.baselines.batch_norm import EvalFusedBackward

spec = importlib.util.spec_from_file_location(
    "probe", Path(__file__).resolve().parents[1] / "h100-2026-12-07-eval-groups" / "probe.py"
)
probe = importlib.util.module_from_spec(spec)
spec.loader.exec_module(probe)

# The eval backward's grouped class (probe.SHAPES), f32 where packs of 4 lanes leave 7x7 rows unpacked too.
CASES = [("bf16-f32", s) for s in [(128, 992, 7, 7), (128, 512, 7, 7), (128, 672, 7, 7), (32, 672, 7, 7),
                                   (32, 2048, 7, 7), (128, 256, 14, 14), (32, 992, 14, 14), (128, 480, 14, 14),
                                   (32, 200, 14, 14), (1, 1024, 7, 7)]]  # fmt: skip
CASES += [("f32", s) for s in [(128, 992, 7, 7), (128, 512, 7, 7), (32, 672, 7, 7)]]

if __name__ == "__main__":
    probe.time(CASES, ops.batch_norm_2d_act_eval_backward, EvalFusedBackward(channels_last=False, residual=False),
               {"eps": 1e-5, "activation": "relu"}, "frozen_backward_grouped_act", "plans_act.csv")  # fmt: skip
