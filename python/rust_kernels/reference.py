"""Independent NumPy float64 references. Reductions use math.fsum (correctly rounded), so the reference's own
error is a rounding of each term, which the tolerances in check.py account for."""

from __future__ import annotations

import math

import numpy as np


def batch_norm_2d_nchw_backward(
    dy: np.ndarray,
    x: np.ndarray,
    weight: np.ndarray,
    running_mean: np.ndarray,
    running_var: np.ndarray,
    eps: float = 1e-5,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(dx, dweight, dbias) of BatchNorm2d over NCHW input with frozen statistics, in float64.

    eps is rounded to f32 first, as the kernel receives it."""
    dy, x = np.asarray(dy, np.float64), np.asarray(x, np.float64)
    weight, mean, var = (np.asarray(a, np.float64) for a in (weight, running_mean, running_var))
    rstd = 1.0 / np.sqrt(var + float(np.float32(eps)))
    per_channel = (slice(None), None, None)
    dx = (weight * rstd)[per_channel] * dy
    channels = dy.shape[1]
    terms = (dy * (x - mean[per_channel])).transpose(1, 0, 2, 3).reshape(channels, -1)
    dys = dy.transpose(1, 0, 2, 3).reshape(channels, -1)
    dweight = np.array([math.fsum(row) for row in terms]) * rstd
    dbias = np.array([math.fsum(row) for row in dys])
    return dx, dweight, dbias
