"""BatchNorm2d in eval mode with its activation, or the residual add and ReLU, fused (families/batch_norm/frozen_fused):
against float64 torch (F.batch_norm in eval mode, then the activation or the add and ReLU, and autograd) in the
emulator, both memory formats; refusals; the torch operators (opcheck, gradcheck) on CPU tensors; convert(fuse=True)
in eval mode running them, with and without gradients, and under torch.compile; on the GPU every dtype key."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch

import rust_kernels.torch as rk_torch
from rust_kernels import ops
from rust_kernels.dtypes import DTYPES
from rust_kernels.errors import ArgumentError
from rust_kernels.families.batch_norm import backward, frozen, frozen_fused, training
from rust_kernels.families.batch_norm.common import split_key
from rust_kernels.torch import library, modules
from test_activation import ACT, in_layout
from test_residual import _Bottleneck, assert_same_step, rounded_inputs
from test_torch import FrozenBatchNorm2d, randomise_, spy

EPS = 1e-5
OPS = torch.ops.rust_kernels
C = 8  # channels_last packs of 2 f64


def inputs(seed: int, shape=(3, C, 5, 4), channels_last=False, scale=1.0):
    """x, dy, residual (in layout), weight, bias, running_mean, running_var: float64 NumPy."""
    rng = np.random.default_rng(seed)
    x, dy, residual = (in_layout(rng.standard_normal(shape) * s + m, channels_last)
                       for s, m in ((2, 0.3), (1, 0), (1, 0)))  # fmt: skip
    c = shape[1]
    weight, bias = rng.uniform(0.5, 1.5, c) * scale, rng.standard_normal(c) * 0.5
    return x, dy, residual, weight, bias, rng.standard_normal(c) * 0.5, rng.uniform(0.5, 2.0, c)


def reference(x, dy, weight, bias, mean, var, activation=None, residual=None):
    """float64 torch, eval mode: y and the gradients of x, weight, bias (and residual)."""
    t = [torch.as_tensor(np.asarray(a, np.float64)).requires_grad_() for a in (x, weight, bias)]
    stats = (torch.as_tensor(mean), torch.as_tensor(var))
    z = torch.nn.functional.batch_norm(t[0], *stats, t[1], t[2], False, 0.1, EPS)
    if residual is not None:
        t.append(torch.as_tensor(np.asarray(residual, np.float64)).requires_grad_())
        y = torch.relu(z + t[3])
    else:
        y = ACT[activation](z)
    y.backward(torch.as_tensor(np.asarray(dy, np.float64)))
    return [y.detach().numpy(), *(leaf.grad.numpy() for leaf in t)]


@pytest.mark.parametrize("channels_last", [False, True], ids=["nchw", "cl"])
@pytest.mark.parametrize("activation", list(ACT))
def test_fused_eval_act_matches_float64_torch(activation, channels_last):
    scale = 4 if activation in ("relu6", "hardswish") else 1  # z past every kink
    x, dy, _, weight, bias, mean, var = inputs(1, channels_last=channels_last, scale=scale)
    y = ops.batch_norm_2d_act_eval_forward(x, weight, bias, mean, var, EPS, activation, backend="host")
    dx, dweight, dbias = ops.batch_norm_2d_act_eval_backward(dy, x, weight, bias, mean, var, EPS, activation,
                                                             backend="host")  # fmt: skip
    assert y.strides == x.strides and dx.strides == x.strides  # outputs in x's memory format
    want = reference(x, dy, weight, bias, mean, var, activation)
    for name, a, b in zip(("y", "dx", "dweight", "dbias"), (y, dx, dweight, dbias), want, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12, err_msg=name)
    if activation == "relu6":
        assert (y == 6).any() and (y == 0).any()  # both of ReLU6's kinks were crossed
    if activation == "hardswish":  # both kinks crossed: y 0 below -3, y = z above 3, and between them
        assert (y == 0).any() and (y > 3).any() and ((y < 0) & (y > -0.375)).any()


@pytest.mark.parametrize("channels_last", [False, True], ids=["nchw", "cl"])
def test_fused_eval_add_relu_matches_float64_torch(channels_last):
    x, dy, residual, weight, bias, mean, var = inputs(2, channels_last=channels_last)
    y = ops.batch_norm_2d_add_relu_eval_forward(x, residual, weight, bias, mean, var, EPS, backend="host")
    dx, dresidual, dweight, dbias = ops.batch_norm_2d_add_relu_eval_backward(dy, y, x, weight, mean, var, EPS,
                                                                             backend="host")  # fmt: skip
    assert y.strides == x.strides and dx.strides == x.strides and dresidual.strides == x.strides
    want_y, want_dx, want_dweight, want_dbias, want_dresidual = reference(x, dy, weight, bias, mean, var,
                                                                          residual=residual)  # fmt: skip
    got = (y, dx, dresidual, dweight, dbias)
    for name, a, b in zip(("y", "dx", "dresidual", "dweight", "dbias"), got,
                          (want_y, want_dx, want_dresidual, want_dweight, want_dbias), strict=True):  # fmt: skip
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12, err_msg=name)
    np.testing.assert_array_equal(dresidual, np.where(y > 0, dy, 0))  # the mask passes dy's values on exactly


@pytest.mark.parametrize("key", ["f32", "bf16-f32"])
def test_storage_types_match_float64_within_their_rounding(key):
    storage, param = (DTYPES[d].numpy_dtype() for d in split_key(key))
    x, dy, residual, weight, bias, mean, var = inputs(3, shape=(4, 16, 3, 3))
    x, dy, residual = (a.astype(storage) for a in (x, dy, residual))
    weight, bias, mean, var = (a.astype(param) for a in (weight, bias, mean, var))
    rtol = {"f32": 2e-5, "bf16-f32": 3e-2}[key]
    y = ops.batch_norm_2d_act_eval_forward(x, weight, bias, mean, var, EPS, "silu", backend="host")
    grads = ops.batch_norm_2d_act_eval_backward(dy, x, weight, bias, mean, var, EPS, "silu", backend="host")
    want = reference(*(np.asarray(a, np.float64) for a in (x, dy, weight, bias, mean, var)), "silu")
    for name, a, b in zip(("y", "dx", "dweight", "dbias"), (y, *grads), want, strict=True):
        assert np.abs(np.asarray(a, np.float64) - b).max() <= rtol * np.abs(b).max(), (key, name)


def test_bad_arguments_are_named_before_any_launch():
    x = np.zeros((2, 3, 4, 4))
    p = np.ones(3)
    with pytest.raises(
        ArgumentError, match=r"activation: expected one of \['hardswish', 'relu', 'relu6', 'silu'\], got 'gelu'"
    ):
        ops.batch_norm_2d_act_eval_forward(x, p, p, p, p, EPS, "gelu", backend="host")
    with pytest.raises(ArgumentError, match="bias: expected shape"):
        ops.batch_norm_2d_act_eval_backward(x, x, p, np.ones(4), p, p, EPS, "relu", backend="host")
    with pytest.raises(ArgumentError, match="residual: expected shape"):
        ops.batch_norm_2d_add_relu_eval_forward(x, np.zeros((2, 3, 4, 5)), p, p, p, p, EPS, backend="host")
    with pytest.raises(ArgumentError, match="y: expected a channels_last array like x"):
        cl = in_layout(x, True)
        ops.batch_norm_2d_add_relu_eval_backward(cl, x.copy(), cl, p, p, p, EPS, backend="host")
    silu = training.ACTIVATIONS["silu"]
    for plan in (backward.plan((2, 3, 4, 4), "f64", "f64", 16, 1, activation=silu),
                 frozen.backward((2, 3, 4, 4), "f64", "f64", 0, 1, activation=silu)):  # fmt: skip
        with pytest.raises(ArgumentError, match=r"plan: its kernel .* fuses activation 2, the call 1"):
            ops.batch_norm_2d_act_eval_backward(x, x, p, p, p, p, EPS, "relu", backend="host", plan=plan)
    nhwc = frozen.backward((2, 3, 4, 4), "f64", "f64", 0, 1, activation=training.ACTIVATIONS["relu"])
    with pytest.raises(ArgumentError, match="reads the other memory format"):
        ops.batch_norm_2d_act_eval_backward(x, x, p, p, p, p, EPS, "relu", backend="host", plan=nhwc)


def test_the_fused_eval_ops_are_torch_operators_passing_opcheck_and_gradcheck():
    torch.manual_seed(0)
    x = torch.randn(2, 3, 2, 3, dtype=torch.float64)
    weight, bias = torch.rand(3, dtype=torch.float64) + 0.5, torch.randn(3, dtype=torch.float64)
    mean, var = torch.randn(3, dtype=torch.float64), torch.rand(3, dtype=torch.float64) + 0.5
    for layout in (x, x.contiguous(memory_format=torch.channels_last)):
        residual = torch.randn_like(layout)
        torch.library.opcheck(OPS.batch_norm_2d_act_eval_forward, (layout, weight, bias, mean, var, EPS, "silu"))
        torch.library.opcheck(OPS.batch_norm_2d_add_relu_eval_forward, (layout, residual, weight, bias, mean, var,
                                                                        EPS))  # fmt: skip
        y = OPS.batch_norm_2d_add_relu_eval_forward(layout, residual, weight, bias, mean, var, EPS)
        assert y.is_contiguous(memory_format=torch.channels_last) == (layout is not x)
        dy = torch.randn_like(y)
        torch.library.opcheck(OPS.batch_norm_2d_act_eval_backward, (dy, layout, weight, bias, mean, var, EPS, "silu"))
        torch.library.opcheck(OPS.batch_norm_2d_add_relu_eval_backward, (dy, y, layout, weight, mean, var, EPS))

    def act(x, weight, bias):
        return OPS.batch_norm_2d_act_eval_forward(x, weight, bias, mean, var, EPS, "silu")

    def add_relu(x, residual, weight, bias):
        return OPS.batch_norm_2d_add_relu_eval_forward(x, residual, weight, bias, mean, var, EPS)

    assert torch.autograd.gradcheck(act, [t.clone().requires_grad_() for t in (x, weight, bias)])
    leaves = [t.clone().requires_grad_() for t in (x, torch.randn_like(x), weight, bias)]
    assert torch.autograd.gradcheck(add_relu, leaves)


@pytest.mark.parametrize("layout", [torch.contiguous_format, torch.channels_last], ids=["nchw", "cl"])
def test_convert_fuse_runs_the_eval_kernels_with_and_without_gradients(layout, monkeypatch):
    """A converted ResNet bottleneck in eval mode: its BN + ReLU and BN + add + ReLU run the fused eval ops (forward
    and backward where gradients are needed, the forward alone under no_grad), results and gradients as torch's."""
    torch.manual_seed(3)
    theirs = randomise_(_Bottleneck(4)).double().eval()
    ours = rk_torch.convert(copy.deepcopy(theirs), fuse=True).eval()
    seen = []
    monkeypatch.setattr(library, "run_host", spy(seen, library.run_host))
    x = torch.randn(2, 4, 5, 5, dtype=torch.float64).contiguous(memory_format=layout)
    assert_same_step(theirs, ours, x, layout)
    ran = [c[0] for c in seen]
    assert ran.count(frozen_fused.ACT_FORWARD) == 2 and ran.count(frozen_fused.ACT_BACKWARD) == 2  # bn1, bn2
    assert ran.count(frozen_fused.ADD_RELU_FORWARD) == 1 and ran.count(frozen_fused.ADD_RELU_BACKWARD) == 1  # bn3
    seen.clear()
    with torch.no_grad():
        torch.testing.assert_close(ours(x), theirs(x))
    assert [c[0] for c in seen].count(frozen_fused.ACT_FORWARD) == 2
    assert not any(c[0] in (frozen_fused.ACT_BACKWARD, frozen_fused.ADD_RELU_BACKWARD) for c in seen)
    for name, t in theirs.state_dict().items():  # eval mode updates nothing
        torch.testing.assert_close(ours.state_dict()[name], t, msg=name)


def _frozen(channels: int, seed: int) -> FrozenBatchNorm2d:
    bn = FrozenBatchNorm2d(channels).double()
    generator = torch.Generator().manual_seed(seed)
    for name, value in bn.named_buffers():
        value.copy_(torch.rand(channels, generator=generator, dtype=torch.float64) +
                    (0.5 if name in ("weight", "running_var") else -0.5))  # fmt: skip
    return bn


@pytest.mark.parametrize("layout", [torch.contiguous_format, torch.channels_last], ids=["nchw", "cl"])
def test_convert_fuse_fuses_torchvisions_frozen_batchnorm(layout, monkeypatch):
    """A bottleneck with FrozenBatchNorm2d (a detection backbone's): its BN + ReLU and BN + add + ReLU on the fused
    eval kernels, outputs and gradients as the original's."""
    torch.manual_seed(7)
    theirs = _Bottleneck(4).double().train()
    theirs.bn1, theirs.bn2, theirs.bn3 = _frozen(4, 1), _frozen(4, 2), _frozen(8, 3)
    theirs.downsample[1] = _frozen(8, 4)
    ours = rk_torch.convert(copy.deepcopy(theirs), fuse=True)
    for name in ("bn1", "bn2", "bn3"):
        module = ours.get_submodule(name)
        assert isinstance(module, FrozenBatchNorm2d) and isinstance(module, modules._FusedFrozenBatchNorm2d), name
    assert not isinstance(ours.get_submodule("downsample.1"), modules._FusedFrozenBatchNorm2d)  # the add's operand
    seen = []
    monkeypatch.setattr(library, "run_host", spy(seen, library.run_host))
    x = torch.randn(2, 4, 5, 5, dtype=torch.float64).contiguous(memory_format=layout)
    assert_same_step(theirs, ours, x, layout)
    ran = [c[0] for c in seen]
    assert ran.count(frozen_fused.ACT_FORWARD) == 2 and ran.count(frozen_fused.ACT_BACKWARD) == 2
    assert ran.count(frozen_fused.ADD_RELU_FORWARD) == 1 and ran.count(frozen_fused.ADD_RELU_BACKWARD) == 1


def test_forward_mode_ad_through_an_eval_fused_module_runs_unfused():
    torch.manual_seed(6)
    theirs = torch.nn.Sequential(torch.nn.BatchNorm2d(3), torch.nn.SiLU()).double().eval()
    randomise_(theirs)
    ours = rk_torch.convert(copy.deepcopy(theirs), fuse=True).eval()
    x, tangent = torch.randn(2, 3, 4, 4, dtype=torch.float64), torch.randn(2, 3, 4, 4, dtype=torch.float64)
    with torch.autograd.forward_ad.dual_level():
        want = torch.autograd.forward_ad.unpack_dual(theirs(torch.autograd.forward_ad.make_dual(x, tangent)))
        got = torch.autograd.forward_ad.unpack_dual(ours(torch.autograd.forward_ad.make_dual(x, tangent)))
    torch.testing.assert_close(got.primal, want.primal)
    torch.testing.assert_close(got.tangent, want.tangent)


def test_an_eval_fused_bottleneck_traces_whole_under_torch_compile():
    torch._dynamo.reset()
    torch.manual_seed(5)
    theirs = randomise_(_Bottleneck(4)).eval()
    ours = rk_torch.convert(copy.deepcopy(theirs), fuse=True).eval()
    compiled = torch.compile(ours, fullgraph=True, backend="aot_eager")
    x = torch.randn(2, 4, 3, 5).contiguous(memory_format=torch.channels_last)
    a, b = x.clone().requires_grad_(), x.clone().requires_grad_()
    ya, yb = theirs(a), compiled(b)
    ya.sum().backward(), yb.sum().backward()
    torch.testing.assert_close(yb, ya, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(b.grad, a.grad, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("channels_last", [False, True], ids=["nchw", "cl"])
def test_the_eval_fused_backward_benches_time_what_the_ops_compute(channels_last):
    """The bench's torch column (autograd through eval BN and the ReLU) gives our act backward's gradients; the
    add + ReLU one all four (dx, dresidual, dweight, dbias); the bounds count 3 and 5 passes."""
    from rust_kernels.bench import baselines

    suffix = "_channels_last" if channels_last else ""
    act = baselines.baseline("batch_norm_2d_act_eval_backward" + suffix)
    add = baselines.baseline("batch_norm_2d_add_relu_eval_backward" + suffix)
    shape = (2, C, 3, 5)
    arrays = act.inputs(shape, "f64")
    calls = act.bench_calls({k: torch.from_numpy(v) for k, v in arrays.items()})
    want = [t.numpy() for t in calls["torch"]()]
    names = ("dy", "x", "weight", "bias", "running_mean", "running_var")
    got = ops.batch_norm_2d_act_eval_backward(*(arrays[n] for n in names), EPS, "relu", backend="host")
    for a, b in zip(got, want, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)
    calls = add.bench_calls({k: torch.from_numpy(v) for k, v in add.inputs(shape, "f64").items()})
    assert [tuple(t.shape) for t in calls["torch"]()] == [shape, shape, (C,), (C,)]
    layout = torch.channels_last if channels_last else torch.contiguous_format
    assert calls["bound"]().is_contiguous(memory_format=layout)
    assert (act.moved_bytes(shape, "bf16-f32"), add.moved_bytes(shape, "f32")) == (3 * 2 * 240, 5 * 4 * 240)


@pytest.mark.parametrize("activation", ["silu", "relu6", "hardswish"])
@pytest.mark.parametrize("channels_last", [False, True], ids=["nchw", "cl"])
def test_a_bench_with_another_activation_times_it_on_every_side(channels_last, activation):
    """with_activation (`tune --activation`): the act benches' copy named for the activation, whose torch column
    (F.batch_norm then the activation, and autograd) gives our act ops' results with it; the add + ReLU's is itself."""
    from rust_kernels.bench import baselines

    suffix = "_channels_last" if channels_last else ""
    shape, names = (2, C, 3, 5), ("x", "weight", "bias", "running_mean", "running_var")
    for direction in ("forward", "backward"):
        relu = baselines.baseline(f"batch_norm_2d_act_eval_{direction}{suffix}")
        bench = baselines.with_activation(relu, activation)
        assert (bench.name, relu.activation) == (f"batch_norm_2d_act_eval_{direction}_{activation}{suffix}", "relu")
        arrays = bench.inputs(shape, "f64")
        got = (ops.batch_norm_2d_act_eval_forward(*(arrays[n] for n in names), EPS, activation, backend="host"),)
        if direction == "backward":
            got = ops.batch_norm_2d_act_eval_backward(arrays["dy"], *(arrays[n] for n in names), EPS, activation,
                                                      backend="host")  # fmt: skip
        want = bench.bench_calls({k: torch.from_numpy(v) for k, v in arrays.items()})["torch"]()
        for a, b in zip(got, want if direction == "backward" else (want,), strict=True):
            np.testing.assert_allclose(a, b.detach().numpy(), rtol=1e-12, atol=1e-12)
    add = baselines.baseline(f"batch_norm_2d_add_relu_eval_forward{suffix}")
    assert baselines.with_activation(add, activation) is add


# --- on the GPU -------------------------------------------------------------------------------------------------------
@pytest.mark.gpu
@pytest.mark.parametrize("residual", [False, True], ids=["act", "add_relu"])
@pytest.mark.parametrize("channels_last", [False, True], ids=["nchw", "cl"])
def test_gpu_eval_fused_backward_bench_columns_run_and_agree(channels_last, residual):
    """Every column of the eval fused backward benches runs on CUDA tensors; ours gives torch's gradients (the act
    backward; the add + ReLU one's torch column masks where z + y > 0, ours where y > 0: shapes only)."""
    from rust_kernels.bench import baselines

    name = ("batch_norm_2d_add_relu_eval_backward" if residual else "batch_norm_2d_act_eval_backward") + (
        "_channels_last" if channels_last else ""
    )
    bench = baselines.baseline(name)
    arrays = bench.inputs((4, 32, 7, 7), "f32")
    calls = bench.bench_calls({k: torch.from_numpy(v).cuda() for k, v in arrays.items()})
    results = {column: call() for column, call in calls.items()}
    ours, theirs = results["ours"], results["torch"]
    assert [t.shape for t in ours] == [t.shape for t in theirs] == [t.shape for t in results["ours_op"]]
    if not residual:
        for a, b in zip(ours, theirs, strict=True):
            torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(results["compile"][0], theirs[0], rtol=1e-4, atol=1e-4)


@pytest.mark.gpu
@pytest.mark.parametrize("channels_last", [False, True], ids=["nchw", "cl"])
@pytest.mark.parametrize("activation", [*ACT, None], ids=[*ACT, "add_relu"])
@pytest.mark.parametrize("key", ["f32", "f64", "bf16-f32", "f16-f32", "bf16", "f16"])
@pytest.mark.parametrize("shape", [(8, 24, 14, 14), (2, 512, 1, 1), (64, 16, 28, 28)])
def test_gpu_fused_eval_matches_float64_as_closely_as_torch_unfused(shape, key, activation, channels_last):
    """Ours fused and torch's unfused (eval F.batch_norm, then the activation or + residual and ReLU), both on CUDA
    in `key`, against float64 on the same rounded inputs: ours never more than twice torch's error (or a tenth of
    the dtype's tolerance)."""
    act, par, x64, r64, dy64, w64, b64 = rounded_inputs(shape, key)
    layout = torch.channels_last if channels_last else torch.contiguous_format
    c = shape[1]
    m64, v64 = (
        (torch.randn(c, dtype=torch.float64) + 2).to(par).double(),
        (torch.rand(c, dtype=torch.float64) * 8 + 1).to(par).double(),
    )

    def run(fused, dtype, pdtype, device):
        x, r, dy = (t.to(device, dtype).contiguous(memory_format=layout) for t in (x64, r64, dy64))
        weight, bias, mean, var = (t.to(device, pdtype) for t in (w64, b64, m64, v64))
        if fused and activation:
            y = OPS.batch_norm_2d_act_eval_forward(x, weight, bias, mean, var, EPS, activation)
            grads = (*OPS.batch_norm_2d_act_eval_backward(dy, x, weight, bias, mean, var, EPS, activation),)
        elif fused:
            y = OPS.batch_norm_2d_add_relu_eval_forward(x, r, weight, bias, mean, var, EPS)
            grads = OPS.batch_norm_2d_add_relu_eval_backward(dy, y, x, weight, mean, var, EPS)
        else:
            leaves = [t.clone().requires_grad_() for t in (x, weight, bias, r)]
            z = torch.nn.functional.batch_norm(leaves[0], mean, var, leaves[1], leaves[2], False, 0.1, EPS)
            y = ACT[activation](z) if activation else torch.relu(z + leaves[3])
            dx, dweight, dbias, *dr = torch.autograd.grad(y, leaves if not activation else leaves[:3], dy)
            grads = (dx, dweight, dbias) if activation else (dx, *dr, dweight, dbias)
        return [t.detach().double().cpu() for t in (y, *grads)]

    want = run(False, torch.float64, torch.float64, "cpu")
    theirs = run(False, act, par, "cuda")
    got = run(True, act, par, "cuda")
    tol = {torch.float64: 1e-12, torch.float32: 1e-5, torch.bfloat16: 2e-2, torch.float16: 4e-3}[act]
    for k, (a, b, w) in enumerate(zip(got, theirs, want, strict=True)):
        scale = w.abs().max().clamp_min(1e-30)
        ours_err, theirs_err = float((a - w).abs().max() / scale), float((b - w).abs().max() / scale)
        assert ours_err <= max(2 * theirs_err, tol / 10), (k, ours_err, theirs_err)


@pytest.mark.gpu
@pytest.mark.parametrize("layout", [torch.contiguous_format, torch.channels_last], ids=["nchw", "cl"])
def test_gpu_fused_eval_step_is_captured_by_a_cuda_graph_and_bit_identical_run_to_run(layout):
    torch.manual_seed(5)
    x = torch.randn(16, 32, 14, 14, device="cuda").contiguous(memory_format=layout)
    r, dy = torch.randn_like(x), torch.randn_like(x)
    weight, bias = torch.rand(32, device="cuda") + 0.5, torch.randn(32, device="cuda")
    mean, var = torch.randn(32, device="cuda"), torch.rand(32, device="cuda") + 0.5

    def step():
        y = OPS.batch_norm_2d_act_eval_forward(x, weight, bias, mean, var, EPS, "silu")
        z = OPS.batch_norm_2d_add_relu_eval_forward(x, r, weight, bias, mean, var, EPS)
        return (y, z, *OPS.batch_norm_2d_act_eval_backward(dy, x, weight, bias, mean, var, EPS, "silu"),
                *OPS.batch_norm_2d_add_relu_eval_backward(dy, z, x, weight, mean, var, EPS))  # fmt: skip

    want = step()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        got = step()
    graph.replay()
    torch.cuda.synchronize()
    for a, b in zip(got, want, strict=True):
        assert torch.equal(a, b)
