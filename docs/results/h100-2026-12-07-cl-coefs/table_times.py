"""What rule_from_table.py, groups_rule.py and rule_gaps.py share: an op's candidate plans for a suite key and their
times in the shipped H200 table (no GPU: the arrays are strided views of one element, never read)."""

import ml_dtypes
import numpy as np
from numpy.lib.stride_tricks import as_strided

from rust_kernels import tuning
from rust_kernels.runtime import Placement

H200 = tuning.Gpu("NVIDIA H200", 132, "sm_90", 60 << 20)
PLACEMENT = Placement(16, 132)
STORAGE = {"f32": np.float32, "bf16": ml_dtypes.bfloat16}


def candidates_and_times(op, big, scalars, shape, dtype, channels_last):
    """The op's candidates (the rule's first) for x of `shape` in `dtype` (the arrays named in `big`; the others
    per-channel f32), called with `scalars` (by name), and {plan: µs} of those the table holds."""
    _, c, h, w = shape
    e = np.dtype(STORAGE[dtype]).itemsize
    strides = (h * w * c * e, e, w * c * e, c * e) if channels_last else (c * h * w * e, h * w * e, w * e, e)
    x = as_strided(np.zeros(1, STORAGE[dtype]), shape, strides)
    arrays = tuple(x if i.name in big.split() else np.zeros(c, np.float32) for i in op.inputs)
    _, problem = op.problem(arrays, tuple(scalars.get(s.name, s.default) for s in op.scalars), "host")
    key, names, table = tuning.key(problem, PLACEMENT, H200), {}, tuning.shipped(H200.slug)
    plans = op.candidates(problem, PLACEMENT)
    times = {}
    for plan in plans:
        entry = table.get(tuning.entry_name(key, plan, "sm_90", names))
        if entry is not None and entry.us is not None:
            times[plan] = entry.us
    return plans, times
