"""The host emulator runs the very kernels that go to PTX, compiled for the CPU (rust_kernels._host)."""

import subprocess
import sys

import numpy as np
import pytest

from rust_kernels import LaunchError, check, load, ops, plan
from rust_kernels.errors import RustKernelsError
from rust_kernels.kernels import BatchNorm2dNchwBackward, instances

CASES = [(plan, shape) for shape in check.HOST_SUITE for plan in check.plans_for("host", shape)]


@pytest.mark.parametrize(("plan", "shape"), CASES, ids=[f"{check.label(p)} {s}" for p, s in CASES])
def test_host_cross_check(plan, shape):
    result = check.check_one(plan, shape, "host")
    assert result.passed, result


@pytest.mark.parametrize("block_hw", [64, 128, 512])
def test_every_block_size_runs(block_hw):
    result = check.check_one(plan.seed(block_hw, "f32"), (3, 2, 7, 9), "host")
    assert result.passed, result


def test_split_plan_in_every_mode_and_block():
    for kernel in instances():
        if kernel.name == "batch_norm_2d_nchw_backward_split" and kernel.dtype == "f32":
            result = check.check_one(plan.Plan(kernel, 2), (2, 3, 4, 8), "host")
            assert result.passed, (kernel, result)


def test_split_results_are_bit_identical_run_to_run_when_deterministic():
    data = check.inputs((3, 4, 8, 8), "f32")
    kernel = plan.choose((3, 4, 8, 8), "f32", 16, 1, deterministic=True).kernel
    first = ops.batch_norm_2d_nchw_backward(*data, backend="host", plan=plan.Plan(kernel, 5))
    again = ops.batch_norm_2d_nchw_backward(*data, backend="host", plan=plan.Plan(kernel, 5))
    assert all(np.array_equal(a, b) for a, b in zip(first, again, strict=True))


def test_op_returns_numpy_arrays_of_the_input_dtype():
    data = check.inputs((2, 3, 4, 5), "f64")
    dx, dweight, dbias = ops.batch_norm_2d_nchw_backward(*data, backend="host")
    assert (dx.dtype, dx.shape, dweight.shape, dbias.shape) == (np.float64, (2, 3, 4, 5), (3,), (3,))


def test_out_of_bounds_access_raises_naming_kernel_argument_and_index():
    kernel = BatchNorm2dNchwBackward(block_hw=32)
    dy, x, weight, mean, var = check.inputs((2, 3, 4, 5), "f32")
    dx = np.zeros(2 * 3 * 20 - 1, np.float32)  # one element short
    guard = np.full(8, 7.0, np.float32)
    dweight, dbias = np.zeros(3, np.float32), np.zeros(3, np.float32)
    args = (dy, x, dx, weight, mean, var, dweight, dbias, 2, 3, 20, 1e-5)
    with pytest.raises(LaunchError, match=r"batch_norm_2d_nchw_backward.*out-of-bounds write to dx_ptr at element 119"):
        load(kernel, backend="host").launch(3, 32, args)
    assert (guard == 7.0).all()


def test_stale_host_build_is_refused(monkeypatch):
    kernel = BatchNorm2dNchwBackward(block_hw=256)
    monkeypatch.setattr(type(kernel), "kernel_source", property(lambda self: "// edited\n"))
    with pytest.raises(RustKernelsError, match="stale build"):
        load(kernel, backend="host")


def test_shape_errors_come_before_any_launch():
    dy, x, weight, mean, var = check.inputs((2, 3, 4, 5), "f32")
    with pytest.raises(ValueError, match=r"weight: expected shape \(3,\), got \(4,\)"):
        ops.batch_norm_2d_nchw_backward(dy, x, np.ones(4, np.float32), mean, var, backend="host")
    with pytest.raises(ValueError, match=r"running_var: expected dtype f32 like x, got f64"):
        ops.batch_norm_2d_nchw_backward(dy, x, weight, mean, var.astype(np.float64), backend="host")
    with pytest.raises(ValueError, match=r"x: expected an NCHW array"):
        ops.batch_norm_2d_nchw_backward(dy, x[0], weight, mean, var, backend="host")


def test_package_and_gpu_path_import_without_the_extension():
    code = (
        "import sys; sys.modules['rust_kernels._host'] = None\n"
        "import rust_kernels, rust_kernels.cuda, rust_kernels.ops, rust_kernels.check\n"
        "from rust_kernels.host import host_available\n"
        "ok, why = host_available(); assert not ok and 'not built' in why, why\n"
        "print('ok')\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr
