"""GPU tests: run on a machine with a CUDA device (the device machine), skipped with the reason elsewhere."""

import pytest

from rust_kernels import ArgumentError, check, driver, load, ops, registry
from rust_kernels.families.batch_norm import backward as plans
from rust_kernels.kernels import BatchNorm2dNchwBackward

pytestmark = pytest.mark.gpu

CASES = [
    (f, p, s)
    for f in registry.families()
    for s in f.suites["cuda"][:4]
    for d in f.dtypes
    for p in f.plans("cuda", s, d)
]
BACKWARD = registry.family("batch_norm_2d_nchw_backward")
NAMES = ("dy", "x", "weight", "running_mean", "running_var")


def inputs(shape, dtype="f32"):
    data = BACKWARD.inputs(shape, dtype)
    return [data[n] for n in NAMES]


@pytest.mark.parametrize(("fam", "plan", "shape"), CASES, ids=[f"{p.label} {s}" for _, p, s in CASES])
def test_gpu_matches_reference(fam, plan, shape):
    result = check.check_one(fam, plan, shape, "cuda")
    assert result.passed, result


@pytest.mark.parametrize("deterministic", [True, False])
@pytest.mark.parametrize("shape", [(32, 64, 28, 28), (8, 32, 8, 8), (4, 3, 7, 7), (2, 16, 97, 131)], ids=str)
def test_the_chosen_plan_matches_reference(shape, deterministic):
    chosen = plans.plan(shape, "f32", "f32", 16, driver.multiprocessor_count(0), deterministic)
    result = check.check_one(BACKWARD, chosen, shape, "cuda")
    assert result.passed, (chosen.label, result)


def test_deterministic_mode_is_bit_identical_run_to_run():
    torch = pytest.importorskip("torch")
    data = [torch.from_numpy(a).cuda() for a in inputs((32, 64, 28, 28))]
    first = ops.batch_norm_2d_nchw_backward(*data, deterministic=True)
    for _ in range(10):
        again = ops.batch_norm_2d_nchw_backward(*data, deterministic=True)
        assert all(torch.equal(a, b) for a, b in zip(first, again, strict=True))


def test_loads_the_cubin_for_sm_90():
    loaded = load(BatchNorm2dNchwBackward(block_hw=256))
    assert loaded.image_kind == "kernel.sm_90.cubin"


def test_bad_arguments_are_refused_before_launch_and_touch_nothing():
    torch = pytest.importorskip("torch")
    dy, x, weight, mean, var = (torch.ones(s, device="cuda") for s in [(2, 3, 4, 4), (2, 3, 4, 4), 3, 3, 3])
    dx = torch.full((2, 3, 4, 4), 7.0, device="cuda")
    dweight, dbias = torch.full((3,), 7.0, device="cuda"), torch.full((3,), 7.0, device="cuda")
    loaded = load(BatchNorm2dNchwBackward(block_hw=32))
    args = [dy, x, dx, weight, mean, var, dweight, dbias, 2, 3, 16, 1e-5]
    for index, bad in [(2, dx.double()), (1, x.transpose(2, 3)), (0, dy.cpu()), (11, "eps")]:
        wrong = list(args)
        wrong[index] = bad
        with pytest.raises((ArgumentError, TypeError)):
            loaded.launch(3, 32, wrong)
    torch.cuda.synchronize()
    assert bool((dx == 7).all()) and bool((dweight == 7).all()) and bool((dbias == 7).all())


def test_launch_does_not_synchronise():
    torch = pytest.importorskip("torch")
    dy, x = torch.randn(64, 256, 56, 56, device="cuda"), torch.randn(64, 256, 56, 56, device="cuda")
    weight, mean, var = torch.ones(256, device="cuda"), torch.zeros(256, device="cuda"), torch.ones(256, device="cuda")
    ops.batch_norm_2d_nchw_backward(dy, x, weight, mean, var)  # load outside the measurement
    torch.cuda.synchronize()
    done = torch.cuda.Event()
    for _ in range(5):
        ops.batch_norm_2d_nchw_backward(dy, x, weight, mean, var)
    done.record()
    assert not done.query(), "the launches returned only after the GPU finished them"
    done.synchronize()


def test_stream_argument_orders_work_on_that_stream():
    torch = pytest.importorskip("torch")
    stream = torch.cuda.Stream()
    data = [torch.from_numpy(a).cuda() for a in inputs((4, 8, 17, 19))]
    torch.cuda.synchronize()
    with torch.cuda.stream(stream):
        dx, dweight, dbias = ops.batch_norm_2d_nchw_backward(*data, stream=stream)
    stream.synchronize()
    ref = ops.batch_norm_2d_nchw_backward(*data)
    torch.cuda.synchronize()
    assert all(torch.equal(a, b) for a, b in zip((dx, dweight, dbias), ref, strict=True))


def test_ops_run_on_torchs_current_stream_and_are_captured_by_cuda_graphs():
    """Issue 8.1: with no stream argument an op runs on torch's current stream, so graph capture records it and a
    replay recomputes after the inputs change in place."""
    torch = pytest.importorskip("torch")
    data = [torch.from_numpy(a).cuda() for a in inputs((8, 16, 14, 14))]
    dy, x, weight, mean, var = data
    ops.batch_norm_2d_nchw_backward(dy, x, weight, mean, var)  # load and allocate workspaces outside capture
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        dx, dweight, dbias = ops.batch_norm_2d_nchw_backward(dy, x, weight, mean, var)
    for scale in (1.0, 3.0):
        dy.copy_(data[0] * 0 + torch.from_numpy(inputs((8, 16, 14, 14))[0]).cuda() * scale)
        graph.replay()
        torch.cuda.synchronize()
        want = ops.batch_norm_2d_nchw_backward(dy, x, weight, mean, var)
        torch.cuda.synchronize()
        assert all(torch.equal(a, b) for a, b in zip((dx, dweight, dbias), want, strict=True))


@pytest.mark.parametrize("shape", [(4, 0, 112, 8), (0, 3, 4, 5), (2, 3, 0, 5)], ids=str)
def test_zero_size_torch_tensors_launch_nothing(shape):
    """Found by the GPU fuzz run: `y.size == 0` is False for a torch tensor (size is a method), so an empty forward
    reached the launch with a zero grid."""
    torch = pytest.importorskip("torch")
    x = torch.zeros(shape, device="cuda")
    c = torch.ones(shape[1], device="cuda")
    y = ops.batch_norm_2d_nchw_forward_inference(x, c, c, c, c)
    dx, dweight, dbias = ops.batch_norm_2d_nchw_backward(x, x, c, c, c)
    assert y.shape == dx.shape == shape and not dweight.any() and not dbias.any()
