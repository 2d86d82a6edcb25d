"""BatchNorm2d with the residual add and ReLU fused (ops.batch_norm_2d_add_relu_forward / _backward,
families/batch_norm/residual): against float64 torch (F.batch_norm in training mode, + residual, relu, autograd) in
the emulator, both memory formats; refusals; the torch operators (opcheck, gradcheck); convert(fuse=True) on a
ResNet bottleneck (its residual computed after the BN); on the GPU every dtype key and CUDA-graph capture."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch

import rust_kernels.torch as rk_torch
from rust_kernels import ops
from rust_kernels.dtypes import DTYPES
from rust_kernels.errors import ArgumentError
from rust_kernels.families.batch_norm import residual, training
from rust_kernels.families.batch_norm.common import split_key
from rust_kernels.torch import library
from test_activation import in_layout  # a channels-last NumPy array
from test_torch import randomise_, spy

EPS = 1e-5
OPS = torch.ops.rust_kernels


def reference(x, r, dy, weight, bias, momentum=0.1):
    """float64 torch: y, dx, dresidual, dweight, dbias and the running statistics after one step from (0, 1)."""
    leaves = [torch.as_tensor(np.asarray(a, np.float64)).requires_grad_() for a in (x, r, weight, bias)]
    mean, var = torch.zeros(x.shape[1], dtype=torch.float64), torch.ones(x.shape[1], dtype=torch.float64)
    z = torch.nn.functional.batch_norm(leaves[0], mean, var, leaves[2], leaves[3], True, momentum, EPS)
    y = torch.relu(z + leaves[1])
    y.backward(torch.as_tensor(np.asarray(dy, np.float64)))
    return [t.detach().numpy() for t in (y, *(leaf.grad for leaf in leaves), mean, var)]


def ours(x, r, dy, weight, bias, backend="host"):
    channels = x.shape[1]
    mean, var = np.zeros(channels, weight.dtype), np.ones(channels, weight.dtype)
    y, save_mean, save_invstd = ops.batch_norm_2d_add_relu_forward(x, r, weight, bias, mean, var, 0.1, EPS,
                                                                   backend=backend)  # fmt: skip
    dx, dresidual, dweight, dbias = ops.batch_norm_2d_add_relu_backward(dy, y, x, weight, save_mean, save_invstd, EPS,
                                                                        backend=backend)  # fmt: skip
    return [y, dx, dresidual, dweight, dbias, mean, var]


@pytest.mark.parametrize("channels_last", [False, True], ids=["nchw", "cl"])
def test_fused_forward_and_backward_match_float64_torch(channels_last):
    rng = np.random.default_rng(1)
    shape = (3, 8, 5, 4)  # C = 8: channels_last packs of 2 f64
    x = in_layout(rng.standard_normal(shape) * 2 + 0.3, channels_last)
    r = in_layout(rng.standard_normal(shape), channels_last)
    weight, bias = rng.uniform(0.5, 1.5, 8), rng.standard_normal(8) * 0.5
    dy = in_layout(rng.standard_normal(shape), channels_last)
    got = ours(x, r, dy, weight, bias)
    want = reference(x, r, dy, weight, bias)
    assert 0.2 < (want[0] == 0).mean() < 0.8  # the ReLU cuts a good part
    assert all(a.strides == x.strides for a in (got[0], got[1], got[2]))  # outputs in x's memory format
    names = ("y", "dx", "dresidual", "dweight", "dbias", "running_mean", "running_var")
    for name, a, b in zip(names, got, want, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12, err_msg=name)


def test_f32_and_autocast_pairing_match_float64_within_their_rounding():
    rng = np.random.default_rng(2)
    shape = (4, 16, 3, 3)
    x64, r64, dy64 = rng.standard_normal(shape) * 3 + 1, rng.standard_normal(shape), rng.standard_normal(shape)
    weight, bias = rng.uniform(0.5, 1.5, 16).astype(np.float32), (rng.standard_normal(16) * 0.5).astype(np.float32)
    for key, rtol in (("f32", 2e-5), ("bf16-f32", 3e-2)):
        storage = DTYPES[split_key(key)[0]].numpy_dtype()
        x, r, dy = x64.astype(storage), r64.astype(storage), dy64.astype(storage)
        got = ours(x, r, dy, weight, bias)
        want = reference(*(a.astype(np.float64) for a in (x, r, dy)), weight, bias)
        for name, a, b in zip(("y", "dx", "dresidual", "dweight", "dbias"), got, want, strict=False):
            scale = np.abs(b).max()
            assert np.abs(np.asarray(a, np.float64) - b).max() <= rtol * scale, (key, name)


def test_dresidual_is_dy_where_y_is_positive_bit_for_bit():
    """The mask compares y: dy's values pass unchanged, 0 where y <= 0 (a NaN y passes dy), as torch's
    threshold_backward."""
    rng = np.random.default_rng(3)
    shape = (2, 8, 3, 3)
    dy = rng.standard_normal(shape).astype(np.float32)
    y = np.maximum(rng.standard_normal(shape), 0).astype(np.float32)
    y[0, 0, 0, 0] = np.nan
    x = rng.standard_normal(shape).astype(np.float32)
    p = np.ones(8, np.float32)
    _, mean, invstd = ops.batch_norm_2d_add_relu_forward(x, x, p, p, p.copy(), p.copy(), backend="host")
    _, dresidual, _, _ = ops.batch_norm_2d_add_relu_backward(dy, y, x, p, mean, invstd, backend="host")
    want = torch.ops.aten.threshold_backward(torch.from_numpy(dy), torch.from_numpy(y), 0.0).numpy()
    assert np.array_equal(dresidual, want)
    assert dresidual[0, 0, 0, 0] == dy[0, 0, 0, 0] and (dresidual == 0).sum() == (y <= 0).sum()


def test_relu_nan_passes_through_as_torch_s_does():
    x = np.ones((2, 1, 2, 2))
    x[1] = 3.0
    r = np.zeros_like(x)
    r[0, 0, 0, 0] = np.nan
    y, _, _ = ops.batch_norm_2d_add_relu_forward(x, r, np.ones(1), np.zeros(1), np.zeros(1), np.ones(1),
                                                 backend="host")  # fmt: skip
    assert np.isnan(y[0, 0, 0, 0]) and not np.isnan(y).sum() > 1


def test_bad_arguments_are_named_before_any_launch():
    x = np.zeros((2, 3, 4, 4))
    p = np.ones(3)
    with pytest.raises(ArgumentError, match=r"residual: expected shape \(2, 3, 4, 4\), got \(2, 3, 4, 5\)"):
        ops.batch_norm_2d_add_relu_forward(x, np.zeros((2, 3, 4, 5)), p, p, p.copy(), p.copy(), backend="host")
    with pytest.raises(ArgumentError, match="residual: expected dtype f64 like x, got f32"):
        ops.batch_norm_2d_add_relu_forward(x, x.astype(np.float32), p, p, p.copy(), p.copy(), backend="host")
    with pytest.raises(ArgumentError, match="residual: expected a contiguous NCHW array like x"):
        ops.batch_norm_2d_add_relu_forward(x, in_layout(x + 1, True), p, p, p.copy(), p.copy(), backend="host")
    with pytest.raises(ArgumentError, match="training mode needs more than 1 value per channel"):
        one = np.zeros((1, 3, 1, 1))
        ops.batch_norm_2d_add_relu_forward(one, one, p, p, p.copy(), p.copy(), backend="host")
    y, mean, invstd = ops.batch_norm_2d_add_relu_forward(x, x, p, p, p.copy(), p.copy(), backend="host")
    with pytest.raises(ArgumentError, match=r"y: expected shape"):
        ops.batch_norm_2d_add_relu_backward(x, y[:1], x, p, mean, invstd, backend="host")
    # A forced plan must run the mask first, and its other launches read the mask's output.
    plain = training.plan("backward", (2, 3, 4, 4), "f64", "f64", 16, 1, False)
    first = residual.mask((2, 3, 4, 4), "f64", 16, 1)
    unread = residual.through_mask(first, plain)
    unread = type(unread)(unread.kernel, unread.grid, unread.values, (), tuple(
        type(p)(p.kernel, p.grid, p.values, p.workspaces) for p in unread.then))  # fmt: skip
    for plan in (plain, unread):
        with pytest.raises(ArgumentError, match=r"plan: expected the mask launch"):
            ops.batch_norm_2d_add_relu_backward(x, y, x, p, mean, invstd, backend="host", plan=plan)


def test_the_fused_ops_are_torch_operators_passing_opcheck_and_gradcheck():
    x = torch.randn(2, 3, 2, 3, dtype=torch.float64)
    r = torch.randn(2, 3, 2, 3, dtype=torch.float64)
    weight, bias = torch.rand(3, dtype=torch.float64) + 0.5, torch.randn(3, dtype=torch.float64)

    def statistics():
        return torch.zeros(3, dtype=torch.float64), torch.ones(3, dtype=torch.float64)

    for cl in (False, True):
        xs, rs = (t.contiguous(memory_format=torch.channels_last) if cl else t for t in (x, r))
        torch.library.opcheck(OPS.batch_norm_2d_add_relu_forward, (xs, rs, weight, bias, *statistics(), 0.1, EPS))
        y, save_mean, save_invstd = OPS.batch_norm_2d_add_relu_forward(xs, rs, weight, bias, *statistics(), 0.1, EPS)
        assert y.is_contiguous(memory_format=torch.channels_last) == cl
        dy = torch.randn_like(y)
        torch.library.opcheck(OPS.batch_norm_2d_add_relu_backward, (dy, y, xs, weight, save_mean, save_invstd, EPS))

    def f(x, r, weight, bias):
        return OPS.batch_norm_2d_add_relu_forward(x, r, weight, bias, *statistics(), 0.1, EPS)[0]

    leaves = [t.clone().requires_grad_() for t in (x, r, weight, bias)]
    assert torch.autograd.gradcheck(f, leaves, fast_mode=True)  # random projections: a few emulator calls


class _Bottleneck(torch.nn.Module):
    """torchvision's Bottleneck in small: conv-bn-relu twice, conv-bn3, the downsample computed after bn3 in the
    traced graph, `out += identity`, the shared in-place ReLU."""

    def __init__(self, c: int) -> None:
        super().__init__()
        self.conv1, self.conv2 = (torch.nn.Conv2d(c, c, 3, padding=1, bias=False) for _ in range(2))
        self.conv3 = torch.nn.Conv2d(c, 2 * c, 1, bias=False)
        self.bn1, self.bn2, self.bn3 = torch.nn.BatchNorm2d(c), torch.nn.BatchNorm2d(c), torch.nn.BatchNorm2d(2 * c)
        self.relu = torch.nn.ReLU(inplace=True)
        self.downsample = torch.nn.Sequential(torch.nn.Conv2d(c, 2 * c, 1, bias=False), torch.nn.BatchNorm2d(2 * c))

    def forward(self, x):
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        identity = self.downsample(x)
        out += identity
        return self.relu(out)


def assert_same_step(theirs, ours, x, layout) -> None:
    """A forward and backward of both bottlenecks on x (the loss weighting their outputs by x): ours' output (in
    `layout`), its input's and parameters' gradients (accumulated) as theirs'."""
    a, b = x.clone().requires_grad_(), x.clone().requires_grad_()
    ya, yb = theirs(a), ours(b)
    (ya * x.repeat(1, 2, 1, 1)).sum().backward(), (yb * x.repeat(1, 2, 1, 1)).sum().backward()
    torch.testing.assert_close(yb, ya)
    assert yb.is_contiguous(memory_format=layout)
    torch.testing.assert_close(b.grad, a.grad)
    mine = dict(ours.named_parameters())
    for name, p in theirs.named_parameters():
        torch.testing.assert_close(mine[name].grad, p.grad, msg=name)


@pytest.mark.parametrize("layout", [torch.contiguous_format, torch.channels_last], ids=["nchw", "cl"])
def test_convert_fuse_fuses_the_bottleneck_s_add_and_relu(layout, monkeypatch):
    torch.manual_seed(3)
    theirs = randomise_(_Bottleneck(4)).double().train()
    ours = rk_torch.convert(copy.deepcopy(theirs), fuse=True)
    assert type(ours.bn3) is rk_torch.FusedBatchNorm2dAddReLU
    assert type(ours.get_submodule("downsample.1")) is rk_torch.BatchNorm2d  # the other operand of the add
    assert sorted(ours.state_dict()) == sorted(theirs.state_dict())  # the traced graph registers in call order
    seen = []
    monkeypatch.setattr(library, "run_host", spy(seen, library.run_host))
    x = torch.randn(2, 4, 5, 5, dtype=torch.float64).contiguous(memory_format=layout)
    for _ in range(2):  # two steps: the running statistics of both
        assert_same_step(theirs, ours, x, layout)
    state = ours.state_dict()
    for name, t in theirs.state_dict().items():
        torch.testing.assert_close(state[name], t, msg=name)
    assert sum(c[0] is residual.FORWARD for c in seen) == 2
    assert sum(c[0] is residual.BACKWARD for c in seen) == 2
    ours.eval(), theirs.eval()
    with torch.no_grad():
        torch.testing.assert_close(ours(x), theirs(x))


def test_a_residual_of_another_shape_or_dtype_runs_unfused():
    """A BN output added to a broadcast tensor (or one torch would promote) is not fused by the module."""
    torch.manual_seed(4)
    theirs = torch.nn.BatchNorm2d(3).train()
    ours = rk_torch.convert(copy.deepcopy(theirs))
    ours.__class__ = rk_torch.FusedBatchNorm2dAddReLU
    x = torch.randn(2, 3, 4, 4)
    for other in (torch.randn(3, 1, 1), torch.randn(2, 3, 4, 4, dtype=torch.float64)):
        want = torch.relu(theirs(x) + other)
        got = ours(x, other)
        assert got.dtype == want.dtype  # torch's promotion kept
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)  # f32 BN outputs, each side's rounding


def test_a_fused_bottleneck_traces_whole_under_torch_compile():
    torch._dynamo.reset()
    torch.manual_seed(5)
    theirs = randomise_(_Bottleneck(4)).train()
    ours = rk_torch.convert(copy.deepcopy(theirs), fuse=True)
    compiled = torch.compile(ours, fullgraph=True, backend="aot_eager")
    x = torch.randn(2, 4, 3, 5).contiguous(memory_format=torch.channels_last)
    a, b = x.clone().requires_grad_(), x.clone().requires_grad_()
    ya, yb = theirs(a), compiled(b)
    ya.sum().backward(), yb.sum().backward()
    torch.testing.assert_close(yb, ya)
    torch.testing.assert_close(b.grad, a.grad)
    torch.testing.assert_close(ours.bn3.running_var, theirs.bn3.running_var)


# --- on the GPU -------------------------------------------------------------------------------------------------------
def rounded_inputs(shape, key):
    """The activations' and the parameters' torch dtypes of `key`, then x, residual, dy (activations), weight and bias
    (parameters): random, as float64 rounded to those dtypes (seed 0)."""
    act, par = (getattr(torch, DTYPES[d].numpy) for d in split_key(key))
    torch.manual_seed(0)
    c = shape[1]
    x64, r64, dy64 = (torch.randn(shape, dtype=torch.float64).to(act).double() for _ in range(3))
    x64 = (x64 * 3 + 2).to(act).double()
    w64, b64 = ((torch.rand(c, dtype=torch.float64) + 0.5).to(par).double(),
                torch.randn(c, dtype=torch.float64).to(par).double())  # fmt: skip
    return act, par, x64, r64, dy64, w64, b64


@pytest.mark.gpu
@pytest.mark.parametrize("channels_last", [False, True], ids=["nchw", "cl"])
@pytest.mark.parametrize("key", ["f32", "f64", "bf16-f32", "f16-f32", "bf16", "f16"])
@pytest.mark.parametrize("shape", [(8, 24, 14, 14), (4, 64, 7, 7), (2, 512, 1, 1), (64, 16, 28, 28)])
def test_gpu_fused_matches_float64_as_closely_as_torch_unfused(shape, key, channels_last):
    """Ours fused and torch's unfused (F.batch_norm, + residual, relu), both on CUDA in `key`, against float64 on
    the same inputs (as rounded to `key`'s storage: the ReLU's mask flips where the rounding of an input moves z +
    residual across 0, for both alike): ours never more than twice torch's error (or a tenth of the dtype's
    tolerance)."""
    act, par, x64, r64, dy64, w64, b64 = rounded_inputs(shape, key)
    layout = torch.channels_last if channels_last else torch.contiguous_format
    c = shape[1]

    def run(fused, dtype, pdtype, device):
        x, r, dy = (t.to(device, dtype).contiguous(memory_format=layout) for t in (x64, r64, dy64))
        weight, bias = w64.to(device, pdtype), b64.to(device, pdtype)
        mean, var = torch.zeros(c, device=device, dtype=pdtype), torch.ones(c, device=device, dtype=pdtype)
        if fused:
            y, sm, si = OPS.batch_norm_2d_add_relu_forward(x, r, weight, bias, mean, var, 0.1, EPS)
            grads = OPS.batch_norm_2d_add_relu_backward(dy, y, x, weight, sm, si, EPS)
        else:
            leaves = [t.clone().requires_grad_() for t in (x, r, weight, bias)]
            z = torch.nn.functional.batch_norm(leaves[0], mean, var, *leaves[2:], True, 0.1, EPS)
            y = torch.relu(z + leaves[1])
            grads = torch.autograd.grad(y, leaves, dy)
        return [t.detach().double().cpu() for t in (y, *grads, mean, var)]

    want = run(False, torch.float64, torch.float64, "cpu")
    theirs = run(False, act, par, "cuda")
    got = run(True, act, par, "cuda")
    tol = {torch.float64: 1e-12, torch.float32: 1e-5, torch.bfloat16: 2e-2, torch.float16: 4e-3}[act]
    names = ("y", "dx", "dresidual", "dweight", "dbias", "running_mean", "running_var")
    for name, a, b, w in zip(names, got, theirs, want, strict=True):
        scale = w.abs().max().clamp_min(1e-30)
        ours_err, theirs_err = float((a - w).abs().max() / scale), float((b - w).abs().max() / scale)
        assert ours_err <= max(2 * theirs_err, tol / 10), (name, ours_err, theirs_err)


@pytest.mark.gpu
def test_gpu_fused_step_is_captured_by_a_cuda_graph_and_bit_identical_run_to_run():
    torch.manual_seed(5)
    x = torch.randn(16, 32, 14, 14, device="cuda").contiguous(memory_format=torch.channels_last)
    r, dy = torch.randn_like(x), torch.randn_like(x)
    weight, bias = torch.rand(32, device="cuda") + 0.5, torch.randn(32, device="cuda")

    def step(mean, var):
        y, sm, si = OPS.batch_norm_2d_add_relu_forward(x, r, weight, bias, mean, var, 0.1, EPS)
        return (y, *OPS.batch_norm_2d_add_relu_backward(dy, y, x, weight, sm, si, EPS))

    eager_stats = torch.zeros(32, device="cuda"), torch.ones(32, device="cuda")
    want = step(*eager_stats)
    graph_stats = torch.zeros(32, device="cuda"), torch.ones(32, device="cuda")
    step(*graph_stats)  # warm-up: plans decided, kernels loaded
    graph_stats[0].zero_(), graph_stats[1].fill_(1)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        got = step(*graph_stats)
    graph_stats[0].zero_(), graph_stats[1].fill_(1)
    graph.replay()
    torch.cuda.synchronize()
    for a, b in zip(got, want, strict=True):
        assert torch.equal(a, b)
    assert torch.equal(graph_stats[0], eager_stats[0]) and torch.equal(graph_stats[1], eager_stats[1])
