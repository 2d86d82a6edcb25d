"""The host emulator runs the very kernels that go to PTX, built for the CPU per kernel instance on demand."""

import _thread
import ctypes
import signal
import threading
import time
from pathlib import Path

import numpy as np
import pytest

import rust_kernels
from rust_kernels import LaunchError, check, load, ops
from rust_kernels.errors import ArgumentError
from rust_kernels.families.batch_norm import backward as plans
from rust_kernels.kernels import BatchNorm2dNchwBackward, instances
from rust_kernels.registry import family

CASES = check.cases("host")
BACKWARD = family("batch_norm_2d_nchw_backward")
NAMES = ("dy", "x", "weight", "running_mean", "running_var")


def inputs(shape, dtype):
    data = BACKWARD.inputs(shape, dtype)
    return tuple(data[n] for n in NAMES)


@pytest.fixture(scope="module", autouse=True)
def _built(request):
    """The kernels of the cross-checks selected, built first in parallel (their 1 300 builds are most of this
    file's time)."""
    selected = [i for i in request.session.items if getattr(i, "originalname", "") == "test_host_cross_check"]
    check.build_for_host(i.callspec.params["plan"] for i in selected)


@pytest.mark.parametrize(("fam", "plan", "shape"), CASES, ids=[f"{p.label} {s}" for _, p, s in CASES])
def test_host_cross_check(fam, plan, shape):
    result = check.check_one(fam, plan, shape, "host")
    assert result.passed, result


def test_every_family_has_host_cases():
    assert {f.name for f, _, _ in CASES} == {f.name for f in rust_kernels.registry.families()}


@pytest.mark.parametrize("block_hw", [64, 128, 512])
def test_every_block_size_runs(block_hw):
    result = check.check_one(BACKWARD, plans.seed(2, block_hw, "f32"), (3, 2, 7, 9), "host")
    assert result.passed, result


def test_split_plan_in_every_mode_and_block():
    for kernel in instances():
        if kernel.name == "batch_norm_2d_nchw_backward_split" and kernel.dtype == "f32":
            k = kernel
            plan = plans.split(3, k.block_hw, k.vectorized, k.deterministic, k.dtype, k.param_dtype, 2)
            result = check.check_one(BACKWARD, plan, (2, 3, 4, 8), "host")
            assert result.passed, (kernel, result)


def test_split_results_are_bit_identical_run_to_run_when_deterministic():
    data = inputs((3, 4, 8, 8), "f32")
    k = plans.plan((3, 4, 8, 8), "f32", "f32", 16, 1, deterministic=True).kernel
    plan = plans.split(4, k.block_hw, k.vectorized, k.deterministic, "f32", "f32", 5)
    first = ops.batch_norm_2d_nchw_backward(*data, backend="host", plan=plan)
    again = ops.batch_norm_2d_nchw_backward(*data, backend="host", plan=plan)
    assert all(np.array_equal(a, b) for a, b in zip(first, again, strict=True))


@pytest.mark.parametrize("split", [1, 2, 5])
def test_the_grouped_kernel_takes_a_narrower_last_group_and_is_bit_identical_run_to_run(split):
    # 12 channels in groups of 8: the second group holds 4; 5 slices of 3 images leave two slices empty
    shape = (3, 12, 7, 7)
    plan = plans.grouped(shape, "f32", "f32", 1, split, cols=8)
    assert plan.grid == (2, split, 1)
    assert check.check_one(BACKWARD, plan, shape, "host").passed
    data = inputs(shape, "f32")
    first = ops.batch_norm_2d_nchw_backward(*data, backend="host", plan=plan)
    again = ops.batch_norm_2d_nchw_backward(*data, backend="host", plan=plan)
    assert all(np.array_equal(a, b) for a, b in zip(first, again, strict=True))


@pytest.mark.parametrize("dtype", ["f32", "bf16-f32"])
def test_the_add_relu_eval_backward_runs_the_grouped_kernel_after_its_mask(dtype):
    from rust_kernels.families.batch_norm import residual

    shape, storage = (3, 8, 7, 7), dtype.split("-")[0]
    plan = residual.through_mask(residual.mask(shape, storage, 16, 1), plans.grouped(shape, storage, "f32", 1, 2))
    result = check.check_one(family("batch_norm_2d_add_relu_eval_backward"), plan, shape, "host")
    assert result.passed, result


@pytest.mark.parametrize(("activation", "dtype"), [("relu", "bf16-f32"), ("silu", "f32"), ("relu6", "bf16-f32"),
                                                  ("hardswish", "f32")])  # fmt: skip
def test_the_act_eval_backward_runs_the_grouped_kernel_through_each_activation(activation, dtype):
    from rust_kernels.families.batch_norm import training

    # 24 channels in groups of 16: a narrower last group; 2 slices of 3 images
    shape, storage, code = (3, 24, 7, 7), dtype.split("-")[0], training.ACTIVATIONS[activation]
    plan = plans.grouped(shape, storage, "f32", 1, 2, cols=16, activation=code)
    assert (plan.kernel.name, plan.kernel.activation) == ("batch_norm_2d_frozen_backward_grouped_act", code)
    result = check.check_one(family("batch_norm_2d_act_eval_backward"), plan, shape, "host")
    assert result.passed, result


def test_op_returns_numpy_arrays_of_the_input_dtype():
    data = inputs((2, 3, 4, 5), "f64")
    dx, dweight, dbias = ops.batch_norm_2d_nchw_backward(*data, backend="host")
    assert (dx.dtype, dx.shape, dweight.shape, dbias.shape) == (np.float64, (2, 3, 4, 5), (3,), (3,))


def test_out_of_bounds_access_raises_naming_kernel_argument_and_index():
    kernel = BatchNorm2dNchwBackward(block_hw=32)
    dy, x, weight, mean, var = inputs((2, 3, 4, 5), "f32")
    dx = np.zeros(2 * 3 * 20 - 1, np.float32)  # one element short
    guard = np.full(8, 7.0, np.float32)
    dweight, dbias = np.zeros(3, np.float32), np.zeros(3, np.float32)
    args = (dy, x, dx, weight, mean, var, dweight, dbias, 2, 3, 20, 1e-5)
    with pytest.raises(LaunchError, match=r"batch_norm_2d_nchw_backward.*out-of-bounds write to dx_ptr at element 119"):
        load(kernel, backend="host").launch(3, 32, args)
    assert (guard == 7.0).all()


def test_a_library_for_another_kernel_is_refused():
    right = BatchNorm2dNchwBackward(block_hw=256)
    other = rust_kernels.compile(family("batch_norm_2d_nchw_forward_inference").plans("host", (1, 1, 1, 1), "f32")[0]
                                 .kernel, target="host")  # fmt: skip
    with pytest.raises(LaunchError, match="holds a kernel with parameters"):
        rust_kernels.host.HostKernel(right, library=other.entry.file("kernel.host.so"))


def test_shape_errors_come_before_any_launch():
    dy, x, weight, mean, var = inputs((2, 3, 4, 5), "f32")
    with pytest.raises(ValueError, match=r"weight: expected shape \(3,\), got \(4,\)"):
        ops.batch_norm_2d_nchw_backward(dy, x, np.ones(4, np.float32), mean, var, backend="host")
    with pytest.raises(ValueError, match=r"running_var: expected dtype f32 like weight, got f64"):
        ops.batch_norm_2d_nchw_backward(dy, x, weight, mean, var.astype(np.float64), backend="host")
    with pytest.raises(ValueError, match=r"x: expected an NCHW array"):
        ops.batch_norm_2d_nchw_backward(dy, x[0], weight, mean, var, backend="host")
    with pytest.raises(ArgumentError, match=r"backend: expected one of \['cuda', 'host'\], got 'gpu'"):
        ops.batch_norm_2d_nchw_backward(dy, x, weight, mean, var, backend="gpu")
    with pytest.raises(ArgumentError, match="deterministic: expected True or False, got 'no'"):
        ops.batch_norm_2d_nchw_backward(dy, x, weight, mean, var, backend="host", deterministic="no")
    with pytest.raises(ArgumentError, match="x: expected a floating dtype"):
        ops.batch_norm_2d_nchw_backward(*(a.astype(np.int32) for a in (dy, x, weight, mean, var)), backend="host")


def test_read_only_outputs_are_refused_before_launch(tmp_path):
    """Issue 9.1: a launch must never write into memory the caller marked read-only (a segfault for a read-only
    memmap, silent corruption for an array over bytes)."""
    kernel = BatchNorm2dNchwBackward(block_hw=32)
    dy, x, weight, mean, var = inputs((2, 3, 4, 5), "f32")
    frozen = np.frombuffer(bytes(dy.nbytes), np.float32).reshape(dy.shape)
    path = tmp_path / "dx.bin"
    path.write_bytes(bytes(dy.nbytes))
    mapped = np.memmap(path, np.float32, mode="r", shape=dy.shape)
    outs = (np.zeros(3, np.float32), np.zeros(3, np.float32))
    for dx in (frozen, mapped):
        with pytest.raises(ArgumentError, match=r"argument 2 \(dx_ptr: \*mut f32\).*read-only"):
            load(kernel, backend="host").launch(3, 32, (dy, x, dx, weight, mean, var, *outs, 2, 3, 20, 1e-5))
    assert not frozen.any() and not np.asarray(mapped).any()


def test_big_endian_arrays_are_refused():
    """Issue 9.3: '>f4' data read as f32 is garbage."""
    dy, x, weight, mean, var = inputs((2, 3, 4, 5), "f32")
    with pytest.raises(ArgumentError, match="big-endian float32"):
        ops.batch_norm_2d_nchw_backward(dy, x.astype(">f4"), weight, mean, var, backend="host")
    kernel = BatchNorm2dNchwBackward(block_hw=32)
    dx, dw, db = np.zeros_like(dy), np.zeros(3, np.float32), np.zeros(3, np.float32)
    with pytest.raises(ArgumentError, match="expected an array of f32, got big-endian float32"):
        load(kernel, backend="host").launch(3, 32, (dy.astype(">f4"), x, dx, weight, mean, var, dw, db, 2, 3, 20, 1e-5))


@pytest.mark.parametrize("shape", [(0, 3, 4, 5), (2, 3, 0, 5), (2, 3, 4, 0), (2, 0, 4, 5)])
def test_zero_size_inputs_give_pytorchs_empty_results(shape):
    """Issue 9.4: dx is empty, and dweight/dbias of an empty batch are zeros."""
    data = tuple(np.zeros(shape if i < 2 else (shape[1],), np.float32) for i in range(5))
    dx, dweight, dbias = ops.batch_norm_2d_nchw_backward(*data, backend="host")
    assert dx.shape == shape and dweight.shape == dbias.shape == (shape[1],)
    assert not dweight.any() and not dbias.any()
    y = ops.batch_norm_2d_nchw_forward_inference(data[1], *data[2:4], data[4], data[4], backend="host")
    assert y.shape == shape


@pytest.mark.parametrize("shared", [2**31, 2**40, 2**64, 232448 + 1])
def test_shared_memory_is_bounded_before_anything_is_allocated(shared):
    """Issue 9.2: 2**40 aborted the interpreter, 2**31 ran for seconds, 2**64 raised a raw OverflowError."""
    kernel = BatchNorm2dNchwBackward(block_hw=32)
    dy, x, weight, mean, var = inputs((2, 3, 4, 5), "f32")
    args = (
        dy,
        x,
        np.zeros_like(dy),
        weight,
        mean,
        var,
        np.zeros(3, np.float32),
        np.zeros(3, np.float32),
        2,
        3,
        20,
        1e-5,
    )
    start = time.perf_counter()
    with pytest.raises(ArgumentError, match=r"shared_mem: .* may use at most 232448 bytes per CTA"):
        load(kernel, backend="host").launch(3, 32, args, shared_mem=shared)
    assert time.perf_counter() - start < 1.0


def test_vectorized_plan_preconditions_are_checked():
    """Issue 9.9: H*W not a multiple of the pack left dx elements unwritten, silently."""
    dy, x, weight, mean, var = inputs((2, 3, 4, 6), "f32")  # HW = 24: 4-lane packs fit...
    kernel = plans.BatchNorm2dNchwBackwardSplit(128, 1, 1)
    dx = np.zeros_like(dy)
    ws, counters = np.zeros(3 * 2, np.float32), np.zeros(3, np.uint32)
    outs = (np.zeros(3, np.float32), np.zeros(3, np.float32))
    args = [dy, x, dx, weight, mean, var, *outs, ws, counters, 2, 3, 22, 1e-5, 1]  # ...but not HW = 22
    with pytest.raises(ArgumentError, match="VECTORIZED = 1 moves 16-byte packs"):
        load(kernel, backend="host").launch((3, 1), 128, args)
    misaligned = np.zeros(dy.size + 1, np.float32)[1:].reshape(dy.shape)  # 4-byte aligned, not 16
    args[2], args[12] = misaligned, 24
    with pytest.raises(ArgumentError, match="VECTORIZED = 1 moves 16-byte packs"):
        load(kernel, backend="host").launch((3, 1), 128, args)


def test_ctrl_c_interrupts_a_long_host_launch():
    """Issue 9.11: Ctrl-C during a launch is honoured while the launch runs, not when it ends."""
    program = rust_kernels.Program(Path(__file__).parent / "kernels")
    spin = rust_kernels.compile(program.kernel("spin"), target="host").get_kernel()
    x, out = np.ones(1, np.float32), np.zeros(1, np.float32)
    spin.launch(1, 32, (x, out, 1000))
    assert out[0] == 1000  # the kernel runs, and sums what it reads
    # SIGINT as Python sees it (interrupt_main: whatever signal mask other libraries left on this thread), with
    # Python's own handler; a watchdog cancels the launch if the interrupt is lost, so the test fails, never hangs.
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        threading.Timer(0.3, _thread.interrupt_main).start()
        watchdog = threading.Timer(10.0, spin.library.rk_host_cancel)
        watchdog.start()
        start = time.perf_counter()
        with pytest.raises(KeyboardInterrupt):
            spin.launch(1, 32, (x, out, 10**12))  # hours, uninterrupted
        watchdog.cancel()
    finally:
        signal.signal(signal.SIGINT, previous)
    assert time.perf_counter() - start < 3.0
    # The launch ended with the interrupt: none runs on in the background (it spun through the rest of CI once).
    assert not [t.name for t in threading.enumerate() if t.name.startswith("rust_kernels host launch")]
    spin.launch(1, 32, (x, out, 10))  # the library still launches afterwards
    assert out[0] == 10


def _free_pthread_keys() -> int:
    """How many more pthread keys this process could create (glibc allows 1 024 in all)."""
    libc = ctypes.CDLL(None)
    key, keys = ctypes.c_uint(), []
    while libc.pthread_key_create(ctypes.byref(key), None) == 0:
        keys.append(key.value)
    for k in keys:
        libc.pthread_key_delete(k)
    return len(keys)


def test_kernel_libraries_take_no_pthread_key(tmp_path):
    """Each kernel library links its own std, whose std::thread took a pthread key in the first launch: the process
    aborted ("fatal runtime error: out of TLS keys") once about a thousand distinct libraries had launched (CI ran
    the host cross-check into it). Launches now start bare threads."""
    spec = (Path(__file__).parent / "kernels" / "spin.toml").read_text()
    (tmp_path / "spin.rs.j2").write_text((Path(__file__).parent / "kernels" / "spin.rs.j2").read_text())
    names = ("spin_key_a", "spin_key_b")
    for name in names:  # libraries no other test loads
        (tmp_path / f"{name}.toml").write_text(spec.replace('name = "spin"', f'name = "{name}"'))
    program = rust_kernels.Program(tmp_path)
    kernels = [rust_kernels.compile(program.kernel(name), target="host").get_kernel() for name in names]
    x, out = np.ones(1, np.float32), np.zeros(1, np.float32)
    before = _free_pthread_keys()
    for kernel in kernels:
        kernel.launch(1, 32, (x, out, 3))
        assert out[0] == 3
    assert _free_pthread_keys() == before


def test_torch_native_signatures_in_eval_mode():
    """Issue 8.3: ops mirroring torch's native functions (training mode: tests/test_training.py)."""
    fwd = family("batch_norm_2d_nchw_forward_inference").inputs((2, 3, 4, 5), "bf16-f32")
    x, weight, bias, mean, var = (fwd[n] for n in ("x", "weight", "bias", "running_mean", "running_var"))
    y, save_mean, save_invstd = ops.batch_norm_2d_forward(x, weight, bias, mean, var, backend="host")
    want = ops.batch_norm_2d_nchw_forward_inference(x, weight, bias, mean, var, backend="host")
    assert np.array_equal(y, want) and y.dtype == x.dtype and save_mean.shape == save_invstd.shape == (0,)
    dy = x[::-1].copy()
    dx, dweight, dbias = ops.batch_norm_2d_backward(dy, x, weight, mean, var, save_mean, save_invstd, backend="host")
    assert dweight.dtype == dbias.dtype == np.float32 and dx.dtype == x.dtype  # the parameters' dtype, as torch
    with pytest.raises(ArgumentError, match=r"weight: expected dtype bf16 or f32 with x in bf16, got f64"):
        ops.batch_norm_2d_forward(x, weight.astype(np.float64), bias, mean, var, backend="host")
    with pytest.raises(ArgumentError, match=r"running_var: expected dtype f32 like weight, got bf16"):
        ops.batch_norm_2d_forward(x, weight, bias, mean, var.astype(x.dtype), backend="host")
