"""BatchNorm2d with its activation fused (ops.batch_norm_2d_act_forward / _backward, families/batch_norm/activation):
against float64 torch (F.batch_norm in training mode, then relu or silu, and autograd) in the emulator, both memory
formats; refusals; the torch operators (opcheck, gradcheck) on CPU tensors; on the GPU every dtype key."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch

import rust_kernels.torch
from rust_kernels import ops
from rust_kernels.dtypes import DTYPES
from rust_kernels.errors import ArgumentError
from rust_kernels.families.batch_norm import training
from rust_kernels.families.batch_norm.common import split_key

EPS = 1e-5
OPS = torch.ops.rust_kernels
ACT = {
    "relu": torch.relu,
    "silu": torch.nn.functional.silu,
    "relu6": torch.nn.functional.relu6,
    "hardswish": torch.nn.functional.hardswish,
}


def reference(x, dy, weight, bias, activation, momentum=0.1):
    """float64 torch: y, dx, dweight, dbias and the running statistics after one step from (0, 1)."""
    leaves = [torch.as_tensor(np.asarray(a, np.float64)).requires_grad_() for a in (x, weight, bias)]
    mean, var = torch.zeros(x.shape[1], dtype=torch.float64), torch.ones(x.shape[1], dtype=torch.float64)
    y = ACT[activation](torch.nn.functional.batch_norm(leaves[0], mean, var, leaves[1], leaves[2], True, momentum, EPS))
    y.backward(torch.as_tensor(np.asarray(dy, np.float64)))
    return [t.detach().numpy() for t in (y, *(leaf.grad for leaf in leaves), mean, var)]


def in_layout(a: np.ndarray, channels_last: bool) -> np.ndarray:
    """A channels-last NumPy array: an NHWC buffer viewed as NCHW."""
    return np.ascontiguousarray(a.transpose(0, 2, 3, 1)).transpose(0, 3, 1, 2) if channels_last else a


def ours(x, dy, weight, bias, activation, backend="host"):
    channels = x.shape[1]
    mean, var = np.zeros(channels, weight.dtype), np.ones(channels, weight.dtype)
    y, save_mean, save_invstd = ops.batch_norm_2d_act_forward(x, weight, bias, mean, var, 0.1, EPS, activation,
                                                              backend=backend)  # fmt: skip
    dx, dweight, dbias = ops.batch_norm_2d_act_backward(dy, x, weight, bias, save_mean, save_invstd, EPS, activation,
                                                        backend=backend)  # fmt: skip
    return [y, dx, dweight, dbias, mean, var]


@pytest.mark.parametrize("channels_last", [False, True], ids=["nchw", "cl"])
@pytest.mark.parametrize("activation", list(ACT))
def test_fused_forward_and_backward_match_float64_torch(activation, channels_last):
    rng = np.random.default_rng(1)
    shape = (3, 8, 5, 4)  # C = 8: channels_last packs of 2 f64
    x = in_layout(rng.standard_normal(shape) * 2 + 0.3, channels_last)
    weight, bias = rng.uniform(0.5, 1.5, 8), rng.standard_normal(8) * 0.5
    if activation in ("relu6", "hardswish"):  # z past every kink: above 6, below -3
        weight *= 4
    dy = in_layout(rng.standard_normal(shape), channels_last)
    got = ours(x, dy, weight, bias, activation)
    want = reference(x, dy, weight, bias, activation)
    if activation == "hardswish":  # both kinks crossed: y 0 below -3, y = z above 3
        z = torch.nn.functional.batch_norm(torch.as_tensor(x), None, None, torch.as_tensor(weight),
                                           torch.as_tensor(bias), True)  # fmt: skip
        assert (z < -3).any() and (z > 3).any() and ((z > -3) & (z < 3)).any()
    assert got[0].strides == x.strides and got[1].strides == x.strides  # outputs in x's memory format
    for name, a, b in zip(("y", "dx", "dweight", "dbias", "running_mean", "running_var"), got, want, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12, err_msg=name)


def test_f32_and_autocast_pairing_match_float64_within_their_rounding():
    """f32, and bf16 activations with f32 parameters: within a few units of the storage's rounding of float64's."""
    rng = np.random.default_rng(2)
    shape = (4, 16, 3, 3)
    x64, dy64 = rng.standard_normal(shape) * 3 + 1, rng.standard_normal(shape)
    weight, bias = rng.uniform(0.5, 1.5, 16).astype(np.float32), (rng.standard_normal(16) * 0.5).astype(np.float32)
    for key, rtol in (("f32", 2e-5), ("bf16-f32", 3e-2)):
        storage = DTYPES[split_key(key)[0]].numpy_dtype()
        x, dy = x64.astype(storage), dy64.astype(storage)
        got = ours(x, dy, weight, bias, "silu")
        want = reference(x.astype(np.float64), dy.astype(np.float64), weight, bias, "silu")
        for name, a, b in zip(("y", "dx", "dweight", "dbias"), got, want, strict=False):
            scale = np.abs(b).max()
            assert np.abs(np.asarray(a, np.float64) - b).max() <= rtol * scale, (key, name)


def test_relu_nan_passes_through_as_torch_s_does():
    x = np.zeros((2, 1, 2, 2))
    x[0, 0, 0, 0] = np.nan
    y, _, _ = ops.batch_norm_2d_act_forward(x, np.ones(1), np.zeros(1), np.zeros(1), np.ones(1), 0.1, EPS, "relu",
                                            backend="host")  # fmt: skip
    assert np.isnan(y).all()  # the statistics are NaN: every output is, as torch's


def test_bad_arguments_are_named_before_any_launch():
    x = np.zeros((2, 3, 4, 4))
    p = np.ones(3)
    with pytest.raises(
        ArgumentError, match=r"activation: expected one of \['hardswish', 'relu', 'relu6', 'silu'\], got 'gelu'"
    ):
        ops.batch_norm_2d_act_forward(x, p, p, p.copy(), p.copy(), 0.1, EPS, "gelu", backend="host")
    with pytest.raises(ArgumentError, match="training mode needs more than 1 value per channel"):
        ops.batch_norm_2d_act_forward(np.zeros((1, 3, 1, 1)), p, p, p.copy(), p.copy(), 0.1, EPS, backend="host")
    _, mean, invstd = ops.batch_norm_2d_act_forward(x, p, p, p.copy(), p.copy(), 0.1, EPS, "relu", backend="host")
    with pytest.raises(ArgumentError, match="bias: expected shape"):
        ops.batch_norm_2d_act_backward(x, x, p, np.ones(4), mean, invstd, EPS, "relu", backend="host")
    plain = training.plan("backward", (2, 3, 4, 4), "f64", "f64", 16, 1, False)  # no activation fused
    silu = training.plan("backward", (2, 3, 4, 4), "f64", "f64", 16, 1, False, training.ACTIVATIONS["silu"])
    for plan in (plain, silu):
        with pytest.raises(ArgumentError, match=r"plan: its kernel .* fuses activation"):
            ops.batch_norm_2d_act_backward(x, x, p, p, mean, invstd, EPS, "relu", backend="host", plan=plan)


@pytest.mark.parametrize("channels_last", [False, True])
def test_silu_over_16_bit_activations_takes_the_fast_sigmoid(channels_last):
    """SiLU's sigmoid over bf16/f16 activations is ex2.approx and rcp.approx (the accurate exp and division made those
    kernels compute-bound); f32 keeps the accurate one, and ReLU instances never take an exp."""
    shape = (8, 64, 14, 14)
    for key, activation, fast in (("bf16-f32", "silu", True), ("f16", "silu", True), ("f32", "silu", False),
                                  ("bf16-f32", "relu", False)):  # fmt: skip
        storage, param = split_key(key)
        for which in ("forward", "backward"):
            plan = training.plan(which, shape, storage, param, 16, 132, channels_last, training.ACTIVATIONS[activation])
            ptx = "".join(rust_kernels.build(launch.kernel, "sm_90").read_text() for launch in plan.launches)
            assert ("ex2.approx" in ptx) == fast, (key, activation, which, plan.label)


def test_the_fused_ops_are_torch_operators_passing_opcheck_and_gradcheck():
    x = torch.randn(2, 3, 2, 3, dtype=torch.float64)
    weight, bias = torch.rand(3, dtype=torch.float64) + 0.5, torch.randn(3, dtype=torch.float64)

    def statistics():
        return torch.zeros(3, dtype=torch.float64), torch.ones(3, dtype=torch.float64)

    for layout in (x, x.contiguous(memory_format=torch.channels_last)):
        torch.library.opcheck(OPS.batch_norm_2d_act_forward, (layout, weight, bias, *statistics(), 0.1, EPS, "silu"))
        y, save_mean, save_invstd = OPS.batch_norm_2d_act_forward(layout, weight, bias, *statistics(), 0.1, EPS)
        assert y.is_contiguous(memory_format=torch.channels_last) == (layout is not x)
        dy = torch.randn_like(y)
        torch.library.opcheck(OPS.batch_norm_2d_act_backward, (dy, layout, weight, bias, save_mean, save_invstd, EPS,
                                                               "silu"))  # fmt: skip

    for activation in ("silu", "hardswish"):

        def f(x, weight, bias, activation=activation):
            return OPS.batch_norm_2d_act_forward(x, weight, bias, *statistics(), 0.1, EPS, activation)[0]

        leaves = [t.clone().requires_grad_() for t in (x, weight, bias)]
        assert torch.autograd.gradcheck(f, leaves), activation


# --- on the GPU -------------------------------------------------------------------------------------------------------
@pytest.mark.gpu
@pytest.mark.parametrize("channels_last", [False, True], ids=["nchw", "cl"])
@pytest.mark.parametrize("activation", list(ACT))
@pytest.mark.parametrize("key", ["f32", "f64", "bf16-f32", "f16-f32", "bf16", "f16"])
def test_gpu_fused_matches_float64_as_closely_as_torch_unfused(key, activation, channels_last):
    """Ours fused and torch's unfused (F.batch_norm, then the activation), both on CUDA in `key`, against float64 on
    the same inputs (as rounded to `key`'s dtypes: an activation's gradient jumps at its kinks, and the rounding of an
    input can move z across one, which would be no kernel's error): ours never more than twice torch's error (or a
    tenth of the dtype's tolerance)."""
    from test_residual import rounded_inputs  # (test_residual imports this module)

    act, par, x64, _, dy64, w64, b64 = rounded_inputs((8, 24, 14, 14), key)
    layout = torch.channels_last if channels_last else torch.contiguous_format

    def run(fused, dtype, pdtype, device):
        x = x64.to(device, dtype).contiguous(memory_format=layout)
        weight, bias = w64.to(device, pdtype), b64.to(device, pdtype)
        mean, var = torch.zeros(24, device=device, dtype=pdtype), torch.ones(24, device=device, dtype=pdtype)
        dy = dy64.to(device, dtype).contiguous(memory_format=layout)
        if fused:
            y, sm, si = OPS.batch_norm_2d_act_forward(x, weight, bias, mean, var, 0.1, EPS, activation)
            grads = OPS.batch_norm_2d_act_backward(dy, x, weight, bias, sm, si, EPS, activation)
        else:
            leaves = [t.clone().requires_grad_() for t in (x, weight, bias)]
            y = ACT[activation](torch.nn.functional.batch_norm(leaves[0], mean, var, *leaves[1:], True, 0.1, EPS))
            grads = torch.autograd.grad(y, leaves, dy)
        return [t.detach().double().cpu() for t in (y, *grads, mean, var)]

    want = run(False, torch.float64, torch.float64, "cpu")
    theirs = run(False, act, par, "cuda")
    got = run(True, act, par, "cuda")
    tol = {torch.float64: 1e-12, torch.float32: 1e-5, torch.bfloat16: 2e-2, torch.float16: 4e-3}[act]
    for name, a, b, w in zip(("y", "dx", "dweight", "dbias", "running_mean", "running_var"), got, theirs, want,
                             strict=True):  # fmt: skip
        scale = w.abs().max().clamp_min(1e-30)
        ours_err, theirs_err = float((a - w).abs().max() / scale), float((b - w).abs().max() / scale)
        assert ours_err <= max(2 * theirs_err, tol / 10), (name, ours_err, theirs_err)


def test_a_fused_model_traces_whole_under_torch_compile():
    """fullgraph=True through convert(fuse=True): the fused operator's fake kernel, mutation of the running
    statistics and autograd trace (aot_eager: no C++ compiler needed); results as torch's unfused module's."""
    torch._dynamo.reset()
    torch.manual_seed(4)
    theirs = torch.nn.Sequential(torch.nn.BatchNorm2d(4), torch.nn.SiLU()).train()
    ours = rust_kernels.torch.convert(copy.deepcopy(theirs), fuse=True)
    compiled = torch.compile(ours, fullgraph=True, backend="aot_eager")
    x = torch.randn(2, 4, 3, 5).contiguous(memory_format=torch.channels_last)
    a, b = x.clone().requires_grad_(), x.clone().requires_grad_()
    ya, yb = theirs(a), compiled(b)
    (ya * x).sum().backward(), (yb * x).sum().backward()
    torch.testing.assert_close(yb, ya)
    torch.testing.assert_close(b.grad, a.grad)
    assert isinstance(ours.get_submodule("0"), rust_kernels.torch.FusedBatchNorm2d)
    torch.testing.assert_close(ours.get_submodule("0").running_var, theirs[0].running_var)


@pytest.mark.gpu
def test_gpu_fused_step_is_captured_by_a_cuda_graph_and_bit_identical_run_to_run():
    torch.manual_seed(5)
    x = torch.randn(16, 32, 14, 14, device="cuda").contiguous(memory_format=torch.channels_last)
    dy = torch.randn_like(x)
    weight, bias = torch.rand(32, device="cuda") + 0.5, torch.randn(32, device="cuda")

    def step(mean, var):
        y, sm, si = OPS.batch_norm_2d_act_forward(x, weight, bias, mean, var, 0.1, EPS, "relu6")
        return (y, *OPS.batch_norm_2d_act_backward(dy, x, weight, bias, sm, si, EPS, "relu6"))

    eager_stats = torch.zeros(32, device="cuda"), torch.ones(32, device="cuda")
    want = step(*eager_stats)
    graph_stats = torch.zeros(32, device="cuda"), torch.ones(32, device="cuda")
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):  # warm up: every signature decided (and the kernels loaded) before capture
        step(torch.zeros(32, device="cuda"), torch.ones(32, device="cuda"))
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        got = step(*graph_stats)
    graph.replay()
    torch.cuda.synchronize()
    for a, b in zip((*got, *graph_stats), (*want, *eager_stats), strict=True):
        assert torch.equal(a, b)
