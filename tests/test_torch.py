"""rust_kernels in PyTorch (issue 8.5, 8.6, 8.8): the torch.library ops, their fakes and autograd, BatchNorm2d and
convert(). On CPU tensors the ops run the host emulator, so CI runs all of it without a GPU; the tests marked gpu run
the same checks on CUDA tensors (and capture, compile and autocast there)."""

import copy
import subprocess
import sys
import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="the rust_kernels[torch] tests need PyTorch (pip install torch==2.11.0)")

import rust_kernels.torch as rk_torch  # noqa: E402 (after the skip)
from rust_kernels import ArgumentError, RustKernelsError, arrays, registry  # noqa: E402
from rust_kernels.dtypes import DTYPES  # noqa: E402
from rust_kernels.families.batch_norm import activation, backward, common, forward, frozen_fused  # noqa: E402
from rust_kernels.torch import library  # noqa: E402

F = torch.nn.functional
OPS = torch.ops.rust_kernels
FORWARD = registry.family("batch_norm_2d_nchw_forward_inference")
BACKWARD = registry.family("batch_norm_2d_nchw_backward")
# Eval mode over channels_last tensors: the torch-native ops' channels_last eval kernels, verified by these families.
FORWARD_CL = registry.family("batch_norm_2d_forward_eval")
BACKWARD_CL = registry.family("batch_norm_2d_backward_eval")
NAMES = ("dy", "x", "weight", "bias", "running_mean", "running_var")
BACKWARD_NAMES = ("dy", "x", "weight", "running_mean", "running_var")  # the backward op's arrays, in its order
KEYS = common.DTYPE_KEYS  # f32, f64, bf16, f16, and bf16/f16 activations with f32 parameters (autocast's pairing)
# (2, 3, 5, 7): a warp per channel in the backward; (2, 4, 16, 16): the split kernel with 16-byte packs.
SHAPES = [(2, 3, 5, 7), (2, 4, 16, 16)]
EPS = 1e-5


def tensors(shape, key, device="cpu", seed=0, memory_format=torch.contiguous_format):
    """The families' seeded inputs (activations in the key's first dtype, parameters in its second) as tensors, dy
    and x in `memory_format`."""
    data = common.random_inputs(shape, key, seed, NAMES)
    out = {name: arrays.to_torch(a, device) for name, a in data.items()}
    return out | {n: out[n].contiguous(memory_format=memory_format) for n in ("dy", "x")}


def leaves(t, *names):
    """Copies of t[names] that require grad (autograd leaves)."""
    return [t[n].detach().clone().requires_grad_() for n in names]


# --- opcheck ----------------------------------------------------------------------------------------------------------
def opcheck_both(device, shape, key):
    t = tensors(shape, key, device)
    x, weight, bias = leaves(t, "x", "weight", "bias")
    forward_args = (x, weight, bias, t["running_mean"], t["running_var"], False, 0.1, EPS)
    torch.library.opcheck(OPS.batch_norm_2d_forward, forward_args)
    _, save_mean, save_invstd = OPS.batch_norm_2d_forward(*forward_args)
    backward_args = (t["dy"], t["x"], t["weight"], t["running_mean"], t["running_var"], save_mean.detach(),
                     save_invstd.detach(), False, EPS)  # fmt: skip
    torch.library.opcheck(OPS.batch_norm_2d_backward, backward_args)


@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("key", KEYS)
def test_opcheck_on_cpu_through_the_emulator(shape, key):
    """Schema, autograd registration, fake kernels (against the real outputs' metadata) and AOT dispatch with
    dynamic shapes (compiled results and gradients against eager) for both ops."""
    opcheck_both("cpu", shape, key)


# --- results against torch's own batch norm -----------------------------------------------------------------------
def torch_error_bounds(key, inputs, refs):
    """Bounds on the error of PyTorch's eval batch norm (forward, and its autograd) against the exact results `refs`
    (y, dx, dweight, dbias), derived like the families' own: u is the unit roundoff of the type PyTorch computes in
    (f32 for f32, bf16 and f16; f64 for f64), us that of rounding to the stored dtype, n = B*H*W terms per channel.
    - y = x * alpha + beta, alpha = weight * rstd, beta = bias - mean * alpha: rstd 3 roundings (add, sqrt, divide;
      or add and a 2-ulp rsqrt), alpha 1, mean * alpha 1, beta 1, x * alpha 1, the add 1: gamma_8 of the terms'
      magnitudes |x alpha| + |mean alpha| + |bias| (one more than counted, for a fused multiply-add's freedom).
    - dx = dy * weight * rstd: 5 roundings, counted as gamma_6 |dx|.
    - dweight = rstd * sum(dy * (x - mean)): each term 2 roundings, any summation order at most n - 1 more (Higham
      4.2), rstd 3 and the product 1: gamma_(n+7) rstd sum|dy (x - mean)|. dbias = sum(dy): gamma_n sum|dy|.
    Stored results round once more: (1 + us) bound + us |exact|."""
    activations, parameters = common.split_key(key)
    u = DTYPES[activations].unit_roundoff
    dy, x, weight, bias, mean, var = (np.asarray(inputs[n], np.float64) for n in NAMES)
    n = x.shape[0] * x.shape[2] * x.shape[3]
    rstd = common.rstd(var, EPS)
    c = (slice(None), None, None)
    alpha = weight * rstd
    centred_terms = np.abs(dy * (x - mean[c])).sum(axis=(0, 2, 3))
    bounds = [
        common.gamma(u, 8) * (np.abs(x * alpha[c]) + np.abs(mean * alpha)[c] + np.abs(bias)[c]),
        common.gamma(u, 6) * np.abs(refs[1]),
        common.gamma(u, n + 7) * rstd * centred_terms,
        common.gamma(u, n) * np.abs(dy).sum(axis=(0, 2, 3)),
    ]
    stored = (activations, activations, parameters, parameters)
    return [
        (1 + DTYPES[d].storage_roundoff) * b + DTYPES[d].storage_roundoff * np.abs(r) + common.floor(d)
        for d, b, r in zip(stored, bounds, refs, strict=True)
    ]


def our_error_bounds(inputs, data, backend, families=(FORWARD, BACKWARD)):
    """The families' own tolerance models for the plans our ops chose on `data` (the arrays the ops saw), and the
    exact results (their float64 references): ([y, dx, dweight, dbias] bounds, [y, dx, dweight, dbias] exact)."""
    bounds, refs = [], []
    for fam, names in zip(families, (NAMES[1:], BACKWARD_NAMES), strict=True):
        plan = fam.choose(data, backend)
        np_inputs = {n: inputs[n] for n in names}
        ref = fam.reference(np_inputs, plan)
        bounds += fam.tolerances(plan, inputs["x"].shape, np_inputs, ref)
        refs += ref
    return bounds, refs


def assert_matches_torch(t, run_ours, run_theirs, key, backend):
    """Ours and PyTorch's eval batch norm, forward and gradients, on the same tensors `t`: they differ by at most the
    sum of the two error bounds against the exact results."""
    got, want = run_ours(t), run_theirs(t)
    inputs = {n: arrays.to_host(a.detach()) for n, a in t.items()}
    data = {n: a.detach() for n, a in t.items()}
    if backend == "host":
        data = {n: arrays.to_host(a) for n, a in data.items()}
    channels_last = not t["x"].is_contiguous()
    assert got[0].is_contiguous(memory_format=torch.channels_last if channels_last else torch.contiguous_format)
    ours, refs = our_error_bounds(inputs, data, backend, (FORWARD_CL, BACKWARD_CL) if channels_last else
                                  (FORWARD, BACKWARD))  # fmt: skip
    theirs = torch_error_bounds(key, inputs, refs)
    for name, a, b, bound_ours, bound_theirs in zip(("y", "dx", "dweight", "dbias"), got, want, ours, theirs,
                                                    strict=True):  # fmt: skip
        assert a.dtype == b.dtype and a.shape == b.shape, (name, a.dtype, b.dtype)
        err = np.abs(arrays.to_host(a.detach()).astype(np.float64) - arrays.to_host(b.detach()).astype(np.float64))
        worst = float(np.max(err / (bound_ours + bound_theirs)))
        assert worst <= 1.0, f"{name}: {worst:.3f} of the bound"


def forward_and_grads(bn):
    """y = bn(x, weight, bias, running stats) and (dx, dweight, dbias) of y.backward(dy), through autograd."""

    def run(t):
        x, weight, bias = leaves(t, "x", "weight", "bias")
        y = bn(x, weight, bias, t["running_mean"], t["running_var"])
        y.backward(t["dy"])
        return y, x.grad, weight.grad, bias.grad

    return run


OURS = forward_and_grads(lambda x, w, b, m, v: OPS.batch_norm_2d_forward(x, w, b, m, v, False, 0.1, EPS)[0])
THEIRS = forward_and_grads(lambda x, w, b, m, v: F.batch_norm(x, m, v, w, b, False, 0.1, EPS))


@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("key", KEYS)
def test_forward_and_gradients_match_torchs_eval_batch_norm(shape, key):
    assert_matches_torch(tensors(shape, key), OURS, THEIRS, key, "host")


@pytest.mark.parametrize("key", KEYS)
def test_channels_last_forward_and_gradients_match_torchs_eval_batch_norm(key):
    """Eval mode over channels_last tensors (C = 16: every pack): our channels_last eval kernels, y and dx
    channels_last."""
    assert_matches_torch(tensors((2, 16, 3, 5), key, memory_format=torch.channels_last), OURS, THEIRS, key, "host")


# --- layouts, autograd corners, errors ----------------------------------------------------------------------------
def test_channels_last_and_expanded_tensors_give_the_nchw_results():
    """channels_last x in eval mode is read as it is (y channels_last, bit for bit the NCHW values); the expanded
    gradient of y.sum() (stride 0) is copied to x's memory format: dx bit for bit, dweight and dbias to rounding
    (another summation order)."""
    t = tensors((2, 4, 6, 5), "f32")
    want = OURS(t)
    t_last = {**t, "x": t["x"].to(memory_format=torch.channels_last), "dy": torch.ones_like(t["dy"])}
    assert not t_last["x"].is_contiguous()
    x, weight, bias = leaves(t_last, "x", "weight", "bias")
    y = OPS.batch_norm_2d_forward(x, weight, bias, t["running_mean"], t["running_var"])[0]
    y.sum().backward()  # dy: ones expanded from a scalar (stride 0)
    assert torch.equal(y, want[0]) and y.is_contiguous(memory_format=torch.channels_last)
    ones = OURS({**t, "dy": torch.ones_like(t["dy"])})
    assert torch.equal(x.grad, ones[1]) and x.grad.is_contiguous(memory_format=torch.channels_last)
    for got, exact in zip((weight.grad, bias.grad), ones[2:], strict=True):
        torch.testing.assert_close(got, exact, rtol=1e-6, atol=1e-6)


def test_gradients_only_where_needed_and_none_for_running_statistics():
    t = tensors((2, 3, 5, 7), "f32")
    weight, mean = leaves(t, "weight", "running_mean")
    y = OPS.batch_norm_2d_forward(t["x"], weight, t["bias"], mean, t["running_var"])[0]
    (dweight,) = torch.autograd.grad(y, weight, t["dy"])
    assert torch.equal(dweight, OURS(t)[2])
    y = OPS.batch_norm_2d_forward(t["x"], weight, t["bias"], mean, t["running_var"])[0]
    y.backward(t["dy"])
    assert mean.grad is None


def test_the_eager_path_gives_the_operators_results_and_gradients(monkeypatch):
    """batch_norm_2d (BatchNorm2d's call) runs eager calls on plain tensors through an autograd.Function calling the
    kernels directly: the operators' outputs and gradients, bit for bit, without the dispatcher."""
    t = tensors((2, 3, 5, 7), "bf16-f32")
    names = ("x", "weight", "bias")
    calls = []
    monkeypatch.setattr(library, "run_host", spy(calls, library.run_host))
    for needs in [(True, True, True), (False, True, False), (False, False, False)]:
        ours = [a.requires_grad_(n) for a, n in zip(leaves(t, *names), needs, strict=True)]
        theirs = [a.requires_grad_(n) for a, n in zip(leaves(t, *names), needs, strict=True)]
        x, weight, bias = ours
        del calls[:]
        y = rk_torch.batch_norm_2d(x, t["running_mean"], t["running_var"], weight, bias, eps=EPS)
        want = OPS.batch_norm_2d_forward(*theirs, t["running_mean"], t["running_var"], False, 0.1, EPS)[0]
        assert torch.equal(y, want) and y.requires_grad == any(needs)
        if any(needs):
            y.backward(t["dy"])
            want.backward(t["dy"])
        direct = [c[0].name for c in calls if "_nchw_" in c[0].name]
        want_direct = ["batch_norm_2d_nchw_forward_inference", "batch_norm_2d_nchw_backward"][: 1 + any(needs)]
        assert direct == want_direct  # (the operators run the torch-native signatures, batch_norm_2d_forward, ...)
        for a, b in zip(ours, theirs, strict=True):
            assert (a.grad is None) == (b.grad is None) and (a.grad is None or torch.equal(a.grad, b.grad))


def _statistics(t):
    return t["running_mean"].clone(), t["running_var"].clone()


# What a create_graph backward differentiates: (x, weight, bias) -> y, statistics fresh for each call.
SECOND_ORDER = {
    "operator, training": lambda t: lambda x, w, b: OPS.batch_norm_2d_forward(x, w, b, *_statistics(t), True)[0],
    "operator, silu": lambda t: (
        lambda x, w, b: OPS.batch_norm_2d_act_forward(x, w, b, *_statistics(t), 0.1, EPS, "silu")[0]
    ),
    "eager, training": lambda t: lambda x, w, b: rk_torch.batch_norm_2d(x, *_statistics(t), w, b, True),
    "eager, eval": lambda t: lambda x, w, b: rk_torch.batch_norm_2d(x, *_statistics(t), w, b),
    "eager, silu": lambda t: lambda x, w, b: rk_torch.batch_norm_act_2d(x, *_statistics(t), w, b, act="silu"),
    "eager, add + relu": lambda t: lambda x, w, b: rk_torch.batch_norm_add_relu_2d(x, t["dy"], *_statistics(t), w, b),
}


LAYOUTS = [torch.contiguous_format, torch.channels_last] * 3  # each form in one memory format, both covered


@pytest.mark.parametrize(("name", "memory_format"), list(zip(SECOND_ORDER, LAYOUTS, strict=True)))
def test_double_backward_passes_gradgradcheck(name, memory_format):
    """create_graph=True (a gradient penalty, MAML): the operators and the eager modules, in training and eval mode,
    and the fused activation and residual forms, give the second derivatives of our forward (gradgradcheck, f64)."""
    t = tensors((2, 2, 2, 3), "f64", memory_format=memory_format)
    assert torch.autograd.gradgradcheck(SECOND_ORDER[name](t), tuple(leaves(t, "x", "weight", "bias")))


def test_a_backward_operator_called_itself_refuses_double_backward():
    t = tensors((2, 3, 5, 7), "f32")
    (dy,) = leaves(t, "dy")
    dx = OPS.batch_norm_2d_backward(dy, t["x"], t["weight"], t["running_mean"], t["running_var"], None, None, False)[0]
    with pytest.raises(NotImplementedError, match="double backward is not implemented"):
        dx.sum().backward()


def test_arguments_passed_by_name_bind_as_inspect_binds_them():
    """The operators' kernels get what compiled graphs pass (scalars by name) in the declaration's order, defaults
    filled in; a call that does not fit the signature is inspect's TypeError."""
    import inspect

    op = forward.NATIVE
    t = tensors((2, 3, 4, 5), "f32")
    arrays_ = (t["x"], t["weight"], t["bias"], t["running_mean"], t["running_var"])
    calls = [((*arrays_, True), {"eps": 1e-3}), (arrays_, {"momentum": 0.5, "training": True}), (arrays_, {}),
             ((t["x"],), {"weight": t["weight"], "bias": t["bias"], "running_mean": t["running_mean"],
                          "running_var": t["running_var"], "eps": 0.2})]  # fmt: skip
    for args, kwargs in calls:
        want = inspect.signature(op.function).bind(*args, **kwargs)
        want.apply_defaults()
        names = [*(i.name for i in op.inputs), *(s.name for s in op.scalars)]
        got = library._bound(op, args, kwargs)
        assert len(got) == len(names) and all(a is want.arguments[n] for a, n in zip(got, names, strict=True))
    for args, kwargs in (((*arrays_, True), {"training": False}), (arrays_, {"gamma": 1}), (arrays_[:4], {})):
        with pytest.raises(TypeError):
            library._bound(op, args, kwargs)
    got = OPS.batch_norm_2d_forward(*arrays_, eps=1e-3, training=True)
    want = OPS.batch_norm_2d_forward(*arrays_, True, 0.1, 1e-3)
    for a, b in zip(got, want, strict=True):
        torch.testing.assert_close(a, b)


def test_mutating_operators_record_a_graph_only_where_one_is_wanted():
    """A compiled graph's forward calls the mutating operators with parameters that require grad, under no_grad: they
    run below autograd there (no autograd.Function), running statistics updated all the same."""
    t = tensors((2, 3, 4, 5), "f32")
    weight = t["weight"].requires_grad_()
    arrays_ = (t["x"], weight, t["bias"], t["running_mean"], t["running_var"])
    with torch.no_grad():
        y, mean, _ = OPS.batch_norm_2d_forward(*arrays_, training=True, momentum=1.0)
    assert y.grad_fn is None and not y.requires_grad
    torch.testing.assert_close(t["running_mean"], mean)  # momentum 1: the running mean is the batch mean
    y, _, _ = OPS.batch_norm_2d_forward(*arrays_, training=True)
    assert y.grad_fn is not None
    (dweight,) = torch.autograd.grad(y, weight, t["dy"])
    want = F.batch_norm(t["x"], None, None, weight=weight, bias=t["bias"], training=True)
    torch.testing.assert_close(dweight, torch.autograd.grad(want, weight, t["dy"])[0])


def test_calls_without_a_graph_cross_into_python_once(monkeypatch):
    """A compiled graph's calls (no graph recorded): the Autograd kernel runs the device's kernel itself, not through
    the dispatcher's CPU kernel (a second crossing into Python); with a graph recorded the Function redispatches to it.
    Forward and backward ops alike, results as torch's."""
    crossed = []
    monkeypatch.setattr(library, "run_host", spy(crossed, library.run_host))  # what the registered CPU kernel calls
    t = tensors((2, 3, 4, 5), "f32")
    weight, bias = t["weight"].requires_grad_(), t["bias"].requires_grad_()
    arrays_ = (t["x"], weight, bias, t["running_mean"], t["running_var"])
    with torch.no_grad():
        y, mean, invstd = OPS.batch_norm_2d_forward(*arrays_, True, 0.1, EPS)
        backward_args = (t["dy"], t["x"], weight, t["running_mean"], t["running_var"], mean, invstd, True, EPS)
        dx, dweight, dbias = OPS.batch_norm_2d_backward(*backward_args)
    assert not crossed
    OPS.batch_norm_2d_forward(*arrays_, True, 0.1, EPS)
    assert len(crossed) == 1
    x = t["x"].clone().requires_grad_()
    want = F.batch_norm(x, None, None, weight=weight, bias=bias, training=True, eps=EPS)
    torch.testing.assert_close(y, want)
    for got, expected in zip((dx, dweight, dbias), torch.autograd.grad(want, (x, weight, bias), t["dy"]),
                             strict=False):  # fmt: skip
        torch.testing.assert_close(got, expected)


def test_calls_without_a_graph_still_reach_modes_below_autograd():
    """The Autograd kernel's direct path is for plain dispatch only: a TorchDispatchMode (the Python key) below
    autograd still sees every call, forward and backward ops."""
    from torch.utils._python_dispatch import TorchDispatchMode

    seen = []

    class Record(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            seen.append(str(func))
            return func(*args, **(kwargs or {}))

    t = tensors((2, 3, 4, 5), "f32")
    arrays_ = (t["x"], t["weight"], t["bias"], t["running_mean"], t["running_var"])
    with torch.no_grad(), Record():
        _, mean, invstd = OPS.batch_norm_2d_forward(*arrays_, True, 0.1, EPS)
        OPS.batch_norm_2d_backward(t["dy"], *arrays_[:2], *arrays_[3:], mean, invstd, True, EPS)
    assert "rust_kernels.batch_norm_2d_forward.default" in seen
    assert "rust_kernels.batch_norm_2d_backward.default" in seen


def test_operators_take_the_layout_inductor_chose():
    """flexible_layout: Inductor passes the layout it picked (channels_last convolutions in an NCHW model) instead of
    copying to the traced strides and back around each call; the kernels make their inputs dense themselves."""
    for name in library.OPS:
        assert torch.Tag.flexible_layout in getattr(OPS, name).default.tags, name


@pytest.mark.gpu
def test_gpu_operator_call_of_a_decided_signature_takes_the_fast_path(monkeypatch):
    """What a compiled graph calls: the operator's second call of a signature is the op's native fast path (no
    argument preparation), with the same results."""
    resolved = []
    monkeypatch.setattr(library, "_resolved", spy(resolved, library._resolved))
    t = tensors((3, 5, 4, 7), "f32", "cuda", memory_format=torch.channels_last)
    arrays_ = (t["x"], t["weight"], t["bias"], t["running_mean"], t["running_var"])
    first = OPS.batch_norm_2d_forward(*arrays_, training=True)
    second = OPS.batch_norm_2d_forward(*arrays_, training=True)
    assert len(resolved) == 1
    assert second[0].is_contiguous(memory_format=torch.channels_last)
    for a, b in zip(first, second, strict=True):
        torch.testing.assert_close(a, b, rtol=0, atol=0)


@pytest.mark.parametrize("device", ["cpu", "meta"])
def test_errors_name_the_argument_eagerly_and_in_the_fake_kernels(device):
    """The same messages from the ops (cpu) and from their fakes (meta, as torch.compile traces them)."""
    t = {n: a.to(device) for n, a in tensors((2, 3, 4, 5), "bf16-f32").items()}
    x, weight, bias, mean, var, dy = (t[n] for n in ("x", "weight", "bias", "running_mean", "running_var", "dy"))
    with pytest.raises(ArgumentError, match=r"save_mean: training mode needs the forward's saved batch statistics"):
        OPS.batch_norm_2d_backward(dy, x, weight, mean, var, None, None, True)
    with pytest.raises(ArgumentError, match=r"x: training mode needs more than 1 value per channel"):
        OPS.batch_norm_2d_forward(x[:1, :, :1, :1], weight, bias, mean, var, True)
    with pytest.raises(ArgumentError, match=r"weight: expected dtype bf16 or f32 with x in bf16, got f64"):
        OPS.batch_norm_2d_forward(x, weight.double(), bias, mean, var)
    with pytest.raises(ArgumentError, match=r"running_var: expected dtype f32 like weight, got bf16"):
        OPS.batch_norm_2d_backward(dy, x, weight, mean, var.bfloat16())
    with pytest.raises(ArgumentError, match=r"weight: expected dtype f32 with x in f32, got bf16"):
        OPS.batch_norm_2d_forward(x.float(), weight.bfloat16(), bias, mean, var)
    with pytest.raises(ArgumentError, match=r"dy: expected dtype bf16 like x, got f32"):
        OPS.batch_norm_2d_backward(dy.float(), x, weight, mean, var)
    with pytest.raises(ArgumentError, match=r"x: expected a floating dtype among .*, got i32"):
        OPS.batch_norm_2d_forward(x.int(), weight, bias, mean, var)
    with pytest.raises(ArgumentError, match=r"bias: expected shape \(3,\), got \(4,\)"):
        OPS.batch_norm_2d_forward(x, weight, bias.new_zeros(4), mean, var)
    with pytest.raises(ArgumentError, match=r"x: expected an NCHW array \(4 dimensions\)"):
        OPS.batch_norm_2d_forward(x[0], weight, bias, mean, var)


def test_fake_kernels_give_the_outputs_metadata_on_meta_tensors():
    t = {n: a.to("meta") for n, a in tensors((2, 3, 4, 5), "f16-f32").items()}
    y, save_mean, save_invstd = OPS.batch_norm_2d_forward(*(t[n] for n in NAMES[1:]))
    assert (y.shape, y.dtype, save_mean.shape, save_invstd.dtype) == ((2, 3, 4, 5), torch.float16, (0,), torch.float32)
    dx, dweight, dbias = OPS.batch_norm_2d_backward(*(t[n] for n in BACKWARD_NAMES))
    assert (dx.dtype, dweight.shape, dbias.dtype) == (torch.float16, (3,), torch.float32)


def test_empty_batch():
    t = tensors((0, 3, 4, 5), "f32")
    y, dx, dweight, dbias = OURS(t)
    assert y.shape == dx.shape == (0, 3, 4, 5) and torch.equal(dweight, torch.zeros(3)) and not dbias.any()


def test_import_rust_kernels_never_imports_torch():
    code = (
        "import sys, rust_kernels, rust_kernels.ops\n"
        "rust_kernels.registry.families(); rust_kernels.ops.batch_norm_2d_forward\n"
        "assert 'torch' not in sys.modules, 'torch was imported'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


# --- BatchNorm2d and convert() ------------------------------------------------------------------------------------
def randomise_(model):
    """Non-default parameters and running statistics, so copies that lose them show."""
    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for bn in model.modules():
            if isinstance(bn, torch.nn.BatchNorm2d) and bn.track_running_stats:
                bn.running_mean.copy_(torch.randn(bn.num_features, generator=generator) * 0.5)
                bn.running_var.copy_(torch.rand(bn.num_features, generator=generator) * 1.5 + 0.5)
                bn.num_batches_tracked.fill_(7)
            if isinstance(bn, torch.nn.BatchNorm2d) and bn.affine:
                bn.weight.copy_(torch.rand(bn.num_features, generator=generator) + 0.5)
                bn.bias.copy_(torch.randn(bn.num_features, generator=generator))
    return model


class OwnBatchNorm(torch.nn.BatchNorm2d):
    """A user's subclass: its forward may differ, so convert() leaves it alone."""


def small_model():
    torch.manual_seed(0)
    return randomise_(
        torch.nn.Sequential(
            torch.nn.Conv2d(3, 4, 3, padding=1),
            torch.nn.BatchNorm2d(4),
            torch.nn.ReLU(),
            torch.nn.Sequential(torch.nn.BatchNorm2d(4, affine=False), torch.nn.BatchNorm2d(4, momentum=None)),
            torch.nn.BatchNorm2d(4, track_running_stats=False),
            OwnBatchNorm(4),
        )
    )


def test_batch_norm_2d_has_torchs_parameters_buffers_and_state_dict():
    ours, theirs = rk_torch.BatchNorm2d(5, eps=1e-3, momentum=0.2), torch.nn.BatchNorm2d(5, eps=1e-3, momentum=0.2)
    assert isinstance(ours, torch.nn.BatchNorm2d)
    assert ours.state_dict().keys() == theirs.state_dict().keys()
    assert [n for n, _ in ours.named_parameters()] == [n for n, _ in theirs.named_parameters()]
    assert [n for n, _ in ours.named_buffers()] == [n for n, _ in theirs.named_buffers()]
    assert (ours.eps, ours.momentum, ours.affine, ours.track_running_stats) == (1e-3, 0.2, True, True)
    ours.load_state_dict(theirs.state_dict())


def test_convert_swaps_in_place_and_keeps_state():
    model = small_model()
    model[0].bias.requires_grad_(False)
    model[3][1].bias.requires_grad_(False)
    model[3].eval()  # mixed train/eval state
    before = {k: v.clone() for k, v in model.state_dict().items()}
    params = {n: (p, p.requires_grad) for n, p in model.named_parameters()}
    modes = [m.training for m in model.modules()]
    with pytest.warns(
        UserWarning, match=r"convert: left 1 batch-norm module\(s\) to their own implementation: 1 OwnBatchNorm"
    ):
        assert rk_torch.convert(model) is model
    kinds = [type(m) for m in model.modules()]
    assert kinds[2] is kinds[5] is kinds[6] is kinds[7] is rk_torch.BatchNorm2d and kinds[8] is OwnBatchNorm
    after = model.state_dict()
    assert after.keys() == before.keys() and all(torch.equal(after[k], v) for k, v in before.items())
    assert {n: (p, p.requires_grad) for n, p in model.named_parameters()} == params
    assert [m.training for m in model.modules()] == modes
    standalone = torch.nn.BatchNorm2d(3)
    assert type(rk_torch.convert(standalone)) is rk_torch.BatchNorm2d  # the model itself may be one


def test_converted_model_trains_and_evaluates_with_ours(monkeypatch):
    x = torch.randn(3, 3, 6, 5)
    theirs, ours = small_model(), rk_torch.convert(small_model())
    # training mode: our batch statistics (torch's for the subclass), the same outputs and running-statistics updates
    trained = []
    monkeypatch.setattr(library, "run_host", spy(trained, library.run_host))
    torch.testing.assert_close(ours(x), theirs(x))
    assert sum(c[0] is forward.NATIVE for c in trained) == 4
    for a, b in zip(ours.state_dict().values(), theirs.state_dict().values(), strict=True):
        torch.testing.assert_close(a, b)
    # eval mode: our op with the running statistics wherever they exist, with the batch's in the BatchNorm2d without
    # them (as torch's), not in the subclass
    seen, op = [], OPS.batch_norm_2d_forward
    monkeypatch.setattr(library, "run_host", spy(seen, library.run_host))  # eager calls run the op directly

    def ours_ran() -> int:  # (the operator's own calls run batch_norm_2d_forward)
        return sum(c[0] is forward.NCHW for c in seen)

    ours.eval(), theirs.eval()
    h = ours[0](x)
    for bn in (ours[1], *ours[3]):  # with weight and bias; without (affine=False); momentum=None
        weight = torch.ones(4) if bn.weight is None else bn.weight
        bias = torch.zeros(4) if bn.bias is None else bn.bias
        assert torch.equal(bn(h), op(h, weight, bias, bn.running_mean, bn.running_var, False, 0.0, bn.eps)[0])
    assert ours_ran() == 3  # (how the op compares with torch's eval batch norm: the tests above)
    native = len(seen)
    torch.testing.assert_close(ours[4](h), theirs[4](h))
    assert [c[0] for c in seen[native:]] == [forward.NATIVE]  # the training kernels: the batch's statistics
    # the subclass: torch's (its running statistics came from our [4]'s training output: close, not equal)
    torch.testing.assert_close(ours[5](h), theirs[5](h))
    assert ours_ran() == 3


def spy(calls, op):
    def call(*args, **kwargs):
        calls.append(args)
        return op(*args, **kwargs)

    return call


def test_module_errors():
    bn = rk_torch.BatchNorm2d(3).eval()
    with pytest.raises(ValueError, match="expected 4D input"):
        bn(torch.randn(3, 4, 5))
    with pytest.raises(ArgumentError, match=r"weight: expected dtype f16 or f32 with x in f16, got f64"):
        bn.double()(torch.randn(1, 3, 4, 5, dtype=torch.float16))


# --- torch.compile ------------------------------------------------------------------------------------------------
def compile_model(device, conv=True):
    """[Conv2d(3, 8),] BatchNorm2d(8), ReLU, BatchNorm2d(8), converted and in eval mode."""
    torch.manual_seed(0)
    layers = [torch.nn.Conv2d(3, 8, 3, padding=1)] if conv else []
    model = torch.nn.Sequential(*layers, torch.nn.BatchNorm2d(8), torch.nn.ReLU(), torch.nn.BatchNorm2d(8))
    return rk_torch.convert(randomise_(model)).to(device).eval()


def assert_compiled_matches_eager(device, conv, exact=True):
    """Zero graph breaks, and fullgraph compilation by inductor (forward and, through AOT autograd, backward)
    bit-identical to eager (`exact`): our ops are the same opaque calls on the same inputs in both, and what the
    compiler generates around them here (ReLU and its backward) is exact. `conv`: a convolution first, whose input
    needs no gradient (inductor computes the convolution's input gradient with another call than eager). Inductor
    lowers the convolution itself, with its own layout and algorithm, so the values our ops receive can differ from
    eager's by rounding (seen on an AMD EPYC CPU; on the GPU cuDNN's algorithm may change too): with a convolution
    the results are compared to rounding (exact=False). Without one, the gradient of x is the first BatchNorm2d's
    dx."""
    model = compile_model(device, conv)
    x = torch.randn(2, 3 if conv else 8, 9, 9, device=device, requires_grad=not conv)
    dy = torch.randn(2, 8, 9, 9, device=device)
    assert torch._dynamo.explain(model)(x).graph_break_count == 0
    torch._dynamo.reset()
    compiled = torch.compile(model, fullgraph=True)
    results = []
    for run in (compiled, model):
        model.zero_grad(set_to_none=True)
        x.grad = None
        y = run(x)
        y.backward(dy)
        results.append([y.detach(), x.grad, *(p.grad for p in model.parameters())])
    for a, b in zip(*results, strict=True):
        if a is None or b is None:
            assert a is b
        elif exact:
            assert torch.equal(a, b)
        else:
            torch.testing.assert_close(a, b)


def test_compile_fullgraph_on_cpu_matches_eager():
    """Inductor on the CPU (C++ code generation: needs g++, which the set-up's Debian has): bit-identical around our
    ops alone; with a convolution first (inductor's own lowering of it), no graph break and equal to rounding."""
    assert_compiled_matches_eager("cpu", conv=False)
    assert_compiled_matches_eager("cpu", conv=True, exact=False)


# --- GPU ----------------------------------------------------------------------------------------------------------
@pytest.mark.gpu
@pytest.mark.parametrize("shape", [*SHAPES, (8, 64, 28, 28)], ids=str)
@pytest.mark.parametrize("key", KEYS)
def test_gpu_opcheck(shape, key):
    opcheck_both("cuda", shape, key)


@pytest.mark.gpu
@pytest.mark.parametrize("memory_format", [torch.contiguous_format, torch.channels_last], ids=["nchw", "cl"])
@pytest.mark.parametrize("key", KEYS)
def test_gpu_matches_torchs_eval_batch_norm(key, memory_format):
    assert_matches_torch(tensors((8, 64, 28, 28), key, "cuda", memory_format=memory_format), OURS, THEIRS, key,
                         "cuda")  # fmt: skip


@pytest.mark.gpu
def test_gpu_compile_fullgraph_matches_eager():
    assert_compiled_matches_eager("cuda", conv=False)


@pytest.mark.gpu
def test_gpu_cuda_graph_of_a_converted_models_eval_forward_and_backward():
    """Whole-step capture (torch's recipe: warm up on a side stream, capture, replay after changing the inputs in
    place): replays recompute, bit-identical to eager. The first BatchNorm2d's input needs no gradient (its
    backward computes dweight and dbias only)."""
    model = compile_model("cuda", conv=False)
    x, dy = torch.randn(8, 8, 28, 28, device="cuda"), torch.randn(8, 8, 28, 28, device="cuda")
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            model.zero_grad(set_to_none=True)
            model(x).backward(dy)
    torch.cuda.current_stream().wait_stream(side)
    model.zero_grad(set_to_none=True)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        y = model(x)
        y.backward(dy)
    params = [p for p in model.parameters() if p.requires_grad]
    for seed in (1, 2):
        generator = torch.Generator(device="cuda").manual_seed(seed)
        x.copy_(torch.randn(x.shape, device="cuda", generator=generator))
        dy.copy_(torch.randn(dy.shape, device="cuda", generator=generator))
        graph.replay()
        got = [y.clone(), *(p.grad.clone() for p in params)]
        want_y = model(x)
        want = [want_y, *torch.autograd.grad(want_y, params, dy)]
        torch.cuda.synchronize()
        assert all(torch.equal(a, b) for a, b in zip(got, want, strict=True)), seed


@pytest.mark.gpu
def test_gpu_autocast_bfloat16():
    """Under torch.autocast(bfloat16) a convolution gives BatchNorm2d bf16 activations while its parameters and
    statistics stay f32: ours runs that pairing (dweight, dbias in f32) and matches torch's within both bounds."""
    model = compile_model("cuda")
    theirs = copy.deepcopy(model)
    for m in theirs.modules():
        if type(m) is rk_torch.BatchNorm2d:
            m.__class__ = torch.nn.BatchNorm2d
    x = torch.randn(8, 3, 28, 28, device="cuda")
    with torch.autocast("cuda", dtype=torch.bfloat16):
        h = model[0](x).detach()
        assert h.dtype == torch.bfloat16 and model[1].weight.dtype == torch.float32
        t = {"x": h, "dy": torch.randn_like(h), "weight": model[1].weight.detach(), "bias": model[1].bias.detach(),
             "running_mean": model[1].running_mean, "running_var": model[1].running_var}  # fmt: skip

        def module_run(bn):
            def run(t):
                x = t["x"].clone().requires_grad_()
                bn.zero_grad(set_to_none=True)
                y = bn(x)
                y.backward(t["dy"])
                return y, x.grad, bn.weight.grad, bn.bias.grad

            return run

        assert_matches_torch(t, module_run(model[1]), module_run(theirs[1]), "bf16-f32", "cuda")
        y = model(x)
        assert y.dtype == torch.bfloat16
        y.float().sum().backward()
        assert model[1].weight.grad.dtype == torch.float32


class BatchNormAct2d(torch.nn.BatchNorm2d):
    """timm's BatchNormAct2d, as it is shaped: a BatchNorm2d, then its `drop` and `act` modules."""

    def __init__(self, channels: int) -> None:
        super().__init__(channels)
        self.drop, self.act = torch.nn.Identity(), torch.nn.SiLU()

    def forward(self, x):
        return self.act(self.drop(super().forward(x)))


class FrozenBatchNorm2d(torch.nn.Module):
    """torchvision's FrozenBatchNorm2d, as it is shaped: buffers only, x * scale + shift."""

    def __init__(self, channels: int, eps: float = 1e-5) -> None:
        super().__init__()
        self.eps = eps
        for name, value in (("weight", 1.0), ("bias", 0.0), ("running_mean", 0.0), ("running_var", 1.0)):
            self.register_buffer(name, torch.full((channels,), value))

    def forward(self, x):
        scale = self.weight * (self.running_var + self.eps).rsqrt()
        shift = self.bias - self.running_mean * scale
        return x * scale[None, :, None, None] + shift[None, :, None, None]


@pytest.mark.parametrize("training", [True, False], ids=["train", "eval"])
def test_convert_takes_timms_batchnormact_and_torchvisions_frozen_batchnorm(monkeypatch, training):
    """Both converted (no warning), on our kernels in both memory formats; outputs, gradients and running statistics
    as the originals'."""
    torch.manual_seed(0)
    theirs = randomise_(torch.nn.Sequential(BatchNormAct2d(4), FrozenBatchNorm2d(4))).train(training)
    for name, value in theirs[1].named_buffers():
        value.copy_(torch.rand(4) + (0.5 if name in ("weight", "running_var") else -0.5))
    ours = copy.deepcopy(theirs)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        rk_torch.convert(ours)
    assert isinstance(ours[0], BatchNormAct2d) and isinstance(ours[0], rk_torch.BatchNorm2d)
    assert isinstance(ours[1], FrozenBatchNorm2d) and type(ours[1]) is not FrozenBatchNorm2d
    seen = []
    monkeypatch.setattr(library, "run_host", spy(seen, library.run_host))
    for layout in (torch.contiguous_format, torch.channels_last):
        x = torch.randn(3, 4, 5, 6).contiguous(memory_format=layout)
        a, b = x.clone().requires_grad_(), x.clone().requires_grad_()
        ya, yb = theirs(a), ours(b)
        ya.sum().backward(), yb.sum().backward()
        torch.testing.assert_close(yb, ya)
        torch.testing.assert_close(b.grad, a.grad)
    for a, b in zip(theirs.state_dict().values(), ours.state_dict().values(), strict=True):
        torch.testing.assert_close(b, a)
    fusing = (activation.FORWARD, frozen_fused.ACT_FORWARD)
    ours_calls = sum(c[0] in (forward.NATIVE, forward.NCHW, *fusing) for c in seen)
    assert ours_calls == 4  # both modules in both layouts
    assert sum(c[0] is backward.NATIVE and not c[-3] for c in seen) == 1  # the frozen BN's, eval channels_last
    fused = sum(c[0] in fusing for c in seen)
    assert fused == 2  # SiLU and no drop: normalisation and activation fused, in both modes


@pytest.mark.parametrize(("act", "drop", "fused"), [(torch.nn.ReLU(inplace=True), torch.nn.Identity(), True),
                                                    (torch.nn.Hardswish(inplace=True), torch.nn.Identity(), True),
                                                    (torch.nn.ReLU(), torch.nn.Dropout(0.0), False),
                                                    (torch.nn.GELU(), torch.nn.Identity(), False)])  # fmt: skip
def test_batchnormact_fuses_its_activations_without_drop_only(monkeypatch, act, drop, fused):
    torch.manual_seed(1)
    theirs = randomise_(BatchNormAct2d(4)).train()
    theirs.act, theirs.drop = act, drop
    ours = rk_torch.convert(copy.deepcopy(theirs))
    seen = []
    monkeypatch.setattr(library, "run_host", spy(seen, library.run_host))
    x = torch.randn(3, 4, 5, 6)
    a, b = x.clone().requires_grad_(), x.clone().requires_grad_()
    ya, yb = theirs(a), ours(b)
    (ya * x).sum().backward(), (yb * x).sum().backward()
    torch.testing.assert_close(yb, ya)
    torch.testing.assert_close(b.grad, a.grad)
    torch.testing.assert_close(ours.running_var, theirs.running_var)
    assert ours.num_batches_tracked == theirs.num_batches_tracked
    assert any(c[0] is activation.FORWARD for c in seen) == fused


class _Block(torch.nn.Module):
    """A residual block shaped like torchvision's: bn1 -> relu (a shared inplace ReLU module), bn2 -> F.relu6,
    bn3 -> an inplace Hardswish module (MobileNetV3's), bn4 -> the residual add -> relu (fused with its add), bn5 ->
    silu method-free and GELU (neither fused)."""

    def __init__(self, c: int) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.bn1, self.bn2, self.bn3, self.bn4, self.bn5 = (torch.nn.BatchNorm2d(c) for _ in range(5))
        self.relu, self.gelu, self.hardswish = torch.nn.ReLU(inplace=True), torch.nn.GELU(), torch.nn.Hardswish(True)

    def forward(self, x):
        out = self.relu(self.bn1(self.conv(x)))
        out = torch.nn.functional.relu6(self.bn2(self.conv(out)))
        out = self.hardswish(self.bn3(self.conv(out)))
        out = self.relu(self.bn4(self.conv(out)) + x)
        return torch.nn.functional.silu(self.bn5(out)) + self.gelu(self.bn5.weight[None, :, None, None] * out)


@pytest.mark.parametrize("layout", [torch.contiguous_format, torch.channels_last], ids=["nchw", "cl"])
def test_convert_fuse_fuses_each_bn_feeding_only_an_activation(layout, monkeypatch):
    torch.manual_seed(3)
    theirs = randomise_(_Block(4)).double().train()
    ours = rk_torch.convert(copy.deepcopy(theirs), fuse=True)
    assert isinstance(ours, torch.fx.GraphModule)
    kinds = {name: type(m) for name, m in ours.named_modules() if name.startswith("bn")}
    assert kinds == {"bn1": rk_torch.FusedBatchNorm2d, "bn2": rk_torch.FusedBatchNorm2d,
                     "bn3": rk_torch.FusedBatchNorm2d, "bn4": rk_torch.FusedBatchNorm2dAddReLU,
                     "bn5": rk_torch.FusedBatchNorm2d}  # fmt: skip
    assert [ours.get_submodule(f"bn{k}").activation for k in (1, 2, 3, 5)] == ["relu", "relu6", "hardswish", "silu"]
    assert list(ours.state_dict()) == list(theirs.state_dict())
    seen = []
    monkeypatch.setattr(library, "run_host", spy(seen, library.run_host))
    x = torch.randn(2, 4, 5, 5, dtype=torch.float64).contiguous(memory_format=layout)
    for _ in range(2):  # two steps: the running statistics of both
        a, b = x.clone().requires_grad_(), x.clone().requires_grad_()
        ya, yb = theirs(a), ours(b)
        (ya * x).sum().backward(), (yb * x).sum().backward()
        torch.testing.assert_close(yb, ya)
        torch.testing.assert_close(b.grad, a.grad)
    for (name, p), q in zip(theirs.named_parameters(), ours.parameters(), strict=True):
        torch.testing.assert_close(q.grad, p.grad, msg=name)
    for (name, t), u in zip(theirs.state_dict().items(), ours.state_dict().values(), strict=True):
        torch.testing.assert_close(u, t, msg=name)
    assert sum(c[0] is activation.FORWARD for c in seen) == 8  # bn1, bn2, bn3, bn5 fused, two steps
    ours.eval(), theirs.eval()
    with torch.no_grad():  # eval: our normalisation in either layout, the activation after it once
        for layout in (torch.contiguous_format, torch.channels_last):
            torch.testing.assert_close(ours(x.contiguous(memory_format=layout)), theirs(x))


def test_convert_fuse_names_an_untraceable_model():
    class Branchy(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.bn = torch.nn.BatchNorm2d(2)

        def forward(self, x):
            return self.bn(x) if x.sum() > 0 else x  # data-dependent control flow

    with pytest.raises(RustKernelsError, match=r"convert\(fuse=True\): torch.fx cannot trace Branchy \(.*\); "
                       r"convert\(model\) without fuse converts it unfused"):  # fmt: skip
        rk_torch.convert(Branchy(), fuse=True)
