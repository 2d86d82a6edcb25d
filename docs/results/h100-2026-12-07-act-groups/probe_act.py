"""The NCHW eval backward through a fused ReLU (batch_norm_2d_act_eval_backward: BN + ReLU fused by
convert(fuse=True) with frozen BN) where no 16-byte pack divides H*W: every candidate plan, the grouped kernel's
(batch_norm_2d_frozen_backward_grouped_act, new) among them, against the rule's (the split kernel), timed interleaved
with PyTorch eager, torch.compile of the same maths and a same-bytes copy; each plan's outputs checked against the
rule's and the rule's against torch's (../h100-2026-12-07-eval-groups/probe.py's time()). Every plan's median goes to
plans_act.csv.

    python probe_act.py [more]  # on the GPU (RUST_KERNELS_CACHE_DIR holding the kernels, the tuning off)

`more`: MORE's cases, 7x7 and 14x14 at batch 1 to 256 and 96 to 2 048 channels, to plans_act_more.csv.
"""

import importlib.util
import sys
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
S7 = [(1, 512, 7, 7), (1, 2048, 7, 7), (8, 512, 7, 7), (8, 2048, 7, 7), (32, 512, 7, 7), (32, 1280, 7, 7),
      (64, 512, 7, 7), (64, 2048, 7, 7), (128, 160, 7, 7), (128, 2048, 7, 7), (256, 512, 7, 7)]  # fmt: skip
S14 = [(1, 256, 14, 14), (8, 256, 14, 14), (32, 256, 14, 14), (64, 256, 14, 14), (8, 1024, 14, 14),
       (128, 1024, 14, 14), (32, 480, 14, 14), (128, 96, 14, 14)]  # fmt: skip
MORE = [("bf16-f32", s) for s in S7 + S14] + [("f32", s) for s in S7]

if __name__ == "__main__":
    more = sys.argv[1:] == ["more"]
    probe.time(MORE if more else CASES, ops.batch_norm_2d_act_eval_backward,
               EvalFusedBackward(channels_last=False, residual=False), {"eps": 1e-5, "activation": "relu"},
               "frozen_backward_grouped_act", "plans_act_more.csv" if more else "plans_act.csv")  # fmt: skip
