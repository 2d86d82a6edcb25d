"""The ops' fast path (rust_kernels.calls, the extension's FastCalls): on a fake driver, that a remembered launch is
replayed with the checked launch's bytes, fresh outputs and the current stream, and that anything that tells
signatures apart (shape, dtype, device, layout, alignment, scalars and their types, stream, array type) misses; on
the GPU that a repeated op call skips the checks yet gives the checked path's results, while any change of
signature is checked and decided afresh."""

import gc
import itertools
import math
import sys
import weakref

import numpy as np
import pytest

from fake_driver import CONTEXT, FUNCTION, FakeDriver, checked_launch
from rust_kernels import ArgumentError, arrays, calls, ops, registry
from rust_kernels import driver as kdriver
from rust_kernels.families.batch_norm import backward, common, forward
from rust_kernels.kernels import BatchNorm2dNchwBackwardSplit

_host = pytest.importorskip("rust_kernels._host")
torch = pytest.importorskip("torch", reason="the fast path is for PyTorch tensors")

BACKWARD = registry.family("batch_norm_2d_nchw_backward")
FORWARD = registry.family("batch_norm_2d_nchw_forward_inference")
SPLIT = BatchNorm2dNchwBackwardSplit(block_hw=128, vectorized=0, deterministic=1, dtype="bf16")  # 10 pointers
# The backward op's: its eight arrays (inputs by index, outputs as -1 - j), then tail values (None); outputs like x,
# weight and weight.
LAYOUT, LIKE = (0, 1, -1, 2, 3, 4, -2, -3, *(None,) * 7), ((1, None, None), (2, None, None), (2, None, None))
CURRENT = 0xC0FFEE  # the fake library's current stream


class Tensorish:
    """What the fast path reads of a tensor."""

    def __init__(self, shape=(2, 3, 4, 5), dtype="bfloat16", device=0, contiguous=True, address=0x7F00_0000_0000,
                 negated=False, strides=None):  # fmt: skip
        self.shape, self.dtype, self._device = shape, dtype, device
        self._contiguous, self._address, self._negated, self._strides = contiguous, address, negated, strides

    def is_neg(self):
        return self._negated

    def new_empty(self, shape, dtype=None):
        return Tensorish(shape, dtype or self.dtype, self._device, True, self._address + 0x10_0000)

    def stride(self):
        if self._strides is not None:
            return self._strides
        return tuple(math.prod(self.shape[i + 1 :]) for i in range(len(self.shape)))

    def get_device(self):
        return self._device

    def is_contiguous(self):
        return self._contiguous

    def data_ptr(self):
        return self._address


class SubTensorish(Tensorish):
    pass


class Library:
    """The fake array library: empty_like hands out fresh addresses (or `misaligned` ones), current_stream CURRENT."""

    def __init__(self):
        self.addresses = itertools.count(0x7A00_0000_0000, 0x1000)
        self.misaligned = False
        self.streams_asked = []

    def empty_like(self, a, dtype=None):
        address = next(self.addresses) + (4 if self.misaligned else 0)
        return Tensorish(a.shape, dtype or a.dtype, a._device, True, address)

    def current_stream(self, device):
        self.streams_asked.append(device)
        return CURRENT

    def resolve(self):
        return (Tensorish,), self.empty_like, self.current_stream


@pytest.fixture(scope="module")
def driver(tmp_path_factory) -> FakeDriver:
    return FakeDriver(tmp_path_factory.mktemp("fake_driver"))


def inputs(**changes):
    """(dy, x, weight, running_mean, running_var); `changes` maps an index to the Tensorish settings it replaces."""
    base = [
        {"address": 0x7F00_0000_0000},
        {"address": 0x7F00_0001_0000},
        *({"shape": (3,), "dtype": "float32", "address": 0x7F00_0002_0000 + 0x100 * i} for i in range(3)),
    ]
    for index, settings in changes.items():
        base[int(index[1:])] |= settings
    return tuple(Tensorish(**settings) for settings in base)


SCALARS = (1e-5, None, True)
TAIL = (Tensorish((24,), "float32", address=0x7C00_0000_0000), Tensorish((3,), "uint32", address=0x7D00_0000_0000))
TAIL += (2, 3, 20, 1e-5, 4)  # workspace, batches, channels, H*W, eps, split


def remembered(driver, library, capacity=8, **options):
    fast = _host.FastCalls(capacity, library.resolve)
    launch = checked_launch(SPLIT, driver, **options)
    assert fast.remember(inputs(), SCALARS, CURRENT, LIKE, [(launch, (3, 4, 1), LAYOUT, TAIL)])
    return fast, launch


def test_a_remembered_call_launches_the_checked_launchs_bytes_with_fresh_outputs(driver):
    library = Library()
    fast, launch = remembered(driver, library)
    calls_before = driver.calls
    outputs = fast(inputs(), SCALARS)
    assert driver.calls == calls_before + 1 and library.streams_asked == [0]  # the stream of device 0
    dx, dweight, dbias = outputs
    assert (dx.shape, dx.dtype, dweight.shape, dweight.dtype) == ((2, 3, 4, 5), "bfloat16", (3,), "float32")
    assert len({dx.data_ptr(), dweight.data_ptr(), dbias.data_ptr()}) == 3
    replayed = driver.last()
    dy, x, weight, mean, var = inputs()
    args = [dy, x, dx, weight, mean, var, dweight, dbias, *TAIL]
    launch((3, 4, 1), SPLIT.block_dim, [a.data_ptr() if isinstance(a, Tensorish) else a for a in args],
           stream=CURRENT)  # fmt: skip
    checked = driver.last()
    assert replayed == checked and checked["function"] == FUNCTION and checked["stream"] == CURRENT
    assert checked["dims"] == (3, 4, 1, *SPLIT.block_dim, SPLIT.shared_mem_bytes)
    # another call: other addresses in the same alignment class, an explicit stream
    moved = inputs(a0={"address": 0x6F00_0000_0010}, a1={"address": 0x6F00_0001_0020})
    assert fast(moved, SCALARS, CURRENT) is not None and driver.calls == calls_before + 3
    assert driver.last()["params"][:2] == [0x6F00_0000_0010, 0x6F00_0001_0020]
    assert library.streams_asked == [0]  # an explicit stream is not asked for


@pytest.mark.parametrize(
    ("arrays", "scalars", "stream"),
    [
        (inputs(a1={"shape": (2, 3, 4, 6)}), SCALARS, None),
        (inputs(a1={"shape": (2, 3, 20)}), SCALARS, None),
        (inputs(a0={"dtype": "float16"}), SCALARS, None),
        (inputs(a2={"dtype": "bfloat16"}), SCALARS, None),
        (inputs(a1={"device": 1}), SCALARS, None),
        (inputs(a1={"device": -1}), SCALARS, None),  # a CPU tensor
        (inputs(a1={"contiguous": False}), SCALARS, None),
        (inputs(a1={"negated": True}), SCALARS, None),  # a lazily negated view holds other values
        ((*inputs()[:4], None), SCALARS, None),  # an optional input left out
        (inputs(a1={"address": 0x7F00_0001_0004}), SCALARS, None),
        (inputs()[:4], SCALARS, None),
        (inputs(), (1e-6, None, True), None),
        (inputs(), (1e-5, 256, True), None),
        (inputs(), (1e-5, None, False), None),
        (inputs(), (1e-5, None, 1), None),  # True and 1 are different calls (the op refuses 1)
        (inputs(), (np.float64(1e-5), None, True), None),  # checked (and converted) by the op every time
        (inputs(), (1e-5, [1], True), None),
        (inputs(), (1e-5, 2**70, True), None),
        (inputs(), (1e-5, None), None),
        (inputs(), SCALARS, CURRENT + 1),
    ],
    ids=str,
)
def test_any_other_signature_misses(driver, arrays, scalars, stream):
    fast, _ = remembered(driver, Library())
    calls_before = driver.calls
    assert fast(arrays, scalars, stream) is None
    assert driver.calls == calls_before


def test_string_scalars_are_part_of_the_signature_whole(driver):
    """A str scalar (an activation's name) keys the call by its whole text: equal strings hit, any other misses."""
    library = Library()
    fast = _host.FastCalls(8, library.resolve)
    launch = checked_launch(SPLIT, driver)
    long = "silu" * 5  # more than one 8-byte word
    for text in ("relu", long):
        assert fast.remember(inputs(), (1e-5, text), CURRENT, LIKE, [(launch, (3, 4, 1), LAYOUT, TAIL)])
    for text in ("relu", "".join(["si", "lu"]) * 5):  # equal, not identical, strings
        assert fast(inputs(), (1e-5, text)) is not None
    for other in ("relu\0", "rel", long[:-1], long + "u", "RELU", b"relu"):
        assert fast(inputs(), (1e-5, other)) is None, other


def test_subclasses_other_arrays_and_an_unimported_library_miss(driver):
    library = Library()
    fast, _ = remembered(driver, library)
    dy, *rest = inputs()
    sub = SubTensorish(dy.shape, dy.dtype, 0, True, dy.data_ptr())
    assert fast((sub, *rest), SCALARS) is None
    assert fast((np.zeros((2, 3, 4, 5)), *rest), SCALARS) is None
    unimported = _host.FastCalls(8, lambda: None)
    assert unimported(inputs(), SCALARS) is None
    launches = [(checked_launch(SPLIT, driver), (3, 4, 1), LAYOUT, TAIL)]
    assert not unimported.remember(inputs(), SCALARS, CURRENT, LIKE, launches)
    assert len(unimported) == 0


def test_misaligned_outputs_miss(driver):
    library = Library()
    fast, _ = remembered(driver, library)
    library.misaligned = True
    calls_before = driver.calls
    assert fast(inputs(), SCALARS) is None  # the op's checked path then runs, with a plan for them
    assert driver.calls == calls_before


def test_a_replayed_launch_runs_in_the_kernels_context(driver):
    fast, _ = remembered(driver, Library())
    driver.set_current(0xD1D1)  # another device's context is current (PyTorch's current device)
    try:
        assert fast(inputs(), SCALARS) is not None
        assert driver.last()["context"] == CONTEXT and driver.current == 0xD1D1
    finally:
        driver.set_current(0)


def test_the_calls_stay_bounded_and_keep_what_their_launches_use(driver):
    library = Library()
    fast, launch = remembered(driver, library, capacity=2)
    workspace = Tensorish((24,), "float32", address=0x7C00_0000_0000)
    kept = weakref.ref(workspace)
    other = inputs(a1={"address": 0x7F00_0001_0008})
    assert fast.remember(other, SCALARS, CURRENT, LIKE, [(launch, (3, 4, 1), LAYOUT, (workspace, *TAIL[1:]))])
    del workspace
    gc.collect()
    assert len(fast) == 2 and kept() is not None  # the entry launches with it
    third = inputs(a1={"address": 0x7F00_0001_000C})
    assert fast.remember(third, SCALARS, CURRENT, LIKE, [(launch, (3, 4, 1), LAYOUT, TAIL)])
    gc.collect()
    assert len(fast) == 1 and kept() is None  # past the bound: started afresh
    assert fast(inputs(), SCALARS) is None and fast(third, SCALARS) is not None
    fast.clear()
    assert len(fast) == 0


@pytest.mark.parametrize(
    ("layout", "like", "tail", "message"),
    [
        (LAYOUT[:-1], LIKE, TAIL, r"14 layout entries \(6 of them tail\) and 7 tail values for 15 parameters"),
        ((*LAYOUT[:7], 5, *LAYOUT[8:]), LIKE, TAIL, r"layout\[7\] = 5 is no array"),
        ((*LAYOUT[:7], -4, *LAYOUT[8:]), LIKE, TAIL, r"layout\[7\] = -4 is no array"),
        (LAYOUT, ((1, None, None), (2, None, None), (7, None, None)), TAIL, "no input 7 to allocate like"),
        ((*LAYOUT[:10], 0, 1, 2, None, None), LIKE, (*TAIL[:2], *TAIL[5:]), "parameter 10 is not a pointer"),
    ],
)
def test_remember_refuses_a_layout_that_does_not_fit_the_kernel(driver, layout, like, tail, message):
    fast = _host.FastCalls(8, Library().resolve)
    with pytest.raises(ValueError, match=message):
        fast.remember(inputs(), SCALARS, CURRENT, like, [(checked_launch(SPLIT, driver), (3, 4, 1), layout, tail)])
    assert len(fast) == 0


def test_without_the_extension_no_call_has_a_fast_path(monkeypatch):
    monkeypatch.setitem(sys.modules, "rust_kernels._host", None)  # import fails, as where it is not built
    fast = calls.fast_calls()
    assert not isinstance(fast, _host.FastCalls)
    assert fast(inputs(), SCALARS) is None and fast(inputs(), SCALARS, CURRENT) is None
    # a call that would have had a fast path says why it has none (about 1 ms of host time a call, measured)
    with pytest.warns(RuntimeWarning, match=r"native extension \(rust_kernels._host\) is not built.*1 ms"):
        assert not fast.remember(inputs(), SCALARS, CURRENT, LIKE, [(None, (3, 4, 1), LAYOUT, TAIL)])
    assert len(fast) == 0


def test_an_output_of_another_shape_is_allocated_new_empty(driver):
    library = Library()
    fast = _host.FastCalls(8, library.resolve)
    launch = checked_launch(SPLIT, driver)
    like = ((1, None, None), (2, None, "float64"), (2, (0,), None))  # another dtype; an empty array of weight's
    assert fast.remember(inputs(), SCALARS, CURRENT, like, [(launch, (3, 4, 1), LAYOUT, TAIL)])
    dx, dweight, empty = fast(inputs(), SCALARS)
    assert (dx.shape, dweight.shape, dweight.dtype) == ((2, 3, 4, 5), (3,), "float64")
    assert (empty.shape, empty.dtype) == ((0,), "float32")


def test_several_launches_replay_in_order_with_the_same_outputs(driver):
    """A plan of two launches (a reduction, then an elementwise pass): both replayed, in order, each with its own
    grid and packed values, reading the same fresh outputs."""
    fast = _host.FastCalls(8, Library().resolve)
    first, second = checked_launch(SPLIT, driver), checked_launch(SPLIT, driver)
    other_tail = (*TAIL[:-1], 8)  # another split
    assert fast.remember(inputs(), SCALARS, CURRENT, LIKE,
                         [(first, (3, 4, 1), LAYOUT, TAIL), (second, (5, 1, 1), LAYOUT, other_tail)])  # fmt: skip
    calls_before = driver.calls
    dx, _, _ = fast(inputs(), SCALARS)
    assert driver.calls == calls_before + 2
    last = driver.last()  # the second launch
    assert last["dims"][:3] == (5, 1, 1) and last["params"][2] == dx.data_ptr() and last["params"][-1] == 8


def test_strides_tell_non_contiguous_signatures_apart(driver):
    """channels_last and NCHW views of one shape (neither contiguous, in this stand-in) are different calls."""
    fast, _ = remembered(driver, Library())
    nhwc = inputs(a0={"contiguous": False, "strides": (60, 1, 15, 3)})
    assert fast(nhwc, SCALARS) is None
    assert fast.remember(nhwc, SCALARS, CURRENT, LIKE, [(checked_launch(SPLIT, driver), (3, 4, 1), LAYOUT, TAIL)])
    assert fast(nhwc, SCALARS) is not None
    assert fast(inputs(a0={"contiguous": False, "strides": (60, 20, 5, 1)}), SCALARS) is None


def test_ops_use_the_extensions_fast_calls_and_torch_once_imported():
    assert isinstance(backward.NCHW._fast, _host.FastCalls) and isinstance(forward.NCHW._fast, _host.FastCalls)
    assert backward.NCHW._fast is not backward.NATIVE._fast  # one decision cache per op
    plain, empty_like, current_stream = calls.torch_library()
    assert plain == (torch.Tensor, torch.nn.Parameter) and empty_like is torch.empty_like
    assert current_stream is torch._C._cuda_getCurrentRawStream
    cpu = (torch.zeros(2, 3, 4, 5), *(torch.zeros(3) for _ in range(4)))
    assert backward.NCHW._fast(cpu, SCALARS) is None  # CPU tensors run the host emulator: checked every time
    meta = tuple(t.to("meta") for t in cpu)
    assert backward.NCHW._fast(meta, SCALARS) is None


# --- GPU ------------------------------------------------------------------------------------------------------------
def cuda_inputs(family, shape, key, seed=0):
    return {n: arrays.to_device(a) for n, a in family.inputs(shape, key, seed).items()}


def refuse_checks(monkeypatch):
    """Makes the checked path fail the test: a call that still works took the fast path."""

    def checked(*_args, **_kwargs):
        pytest.fail("the op checked a call whose signature it had decided before")

    monkeypatch.setattr(common, "check_inputs", checked)


BACKWARD_NAMES = ("dy", "x", "weight", "running_mean", "running_var")
FORWARD_NAMES = ("x", "weight", "bias", "running_mean", "running_var")
# the warp, split (16-byte packs) and split-with-mixed-parameters plans, and an odd shape (single elements)
CASES = [((2, 3, 5, 7), "f32"), ((4, 8, 16, 16), "bf16"), ((4, 8, 16, 16), "bf16-f32"), ((3, 5, 1, 1031), "f16")]


@pytest.mark.gpu
@pytest.mark.parametrize(("shape", "key"), CASES, ids=str)
def test_gpu_a_repeated_call_skips_the_checks_and_gives_the_same_results(monkeypatch, shape, key):
    t = cuda_inputs(FORWARD, shape, key) | cuda_inputs(BACKWARD, shape, key)
    stream = torch.cuda.Stream()  # a signature is per stream: decided on this one, then replayed on it
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        first_bwd = ops.batch_norm_2d_nchw_backward(*(t[n] for n in BACKWARD_NAMES))
        first_fwd = ops.batch_norm_2d_nchw_forward_inference(*(t[n] for n in FORWARD_NAMES))
        plan = BACKWARD.choose(t, "cuda")
        forced = ops.batch_norm_2d_nchw_backward(*(t[n] for n in BACKWARD_NAMES), plan=plan)  # checked
        refuse_checks(monkeypatch)
        again_bwd = ops.batch_norm_2d_nchw_backward(*(t[n] for n in BACKWARD_NAMES))  # on the current stream
        again_fwd = ops.batch_norm_2d_nchw_forward_inference(*(t[n] for n in FORWARD_NAMES))
    explicit_bwd = ops.batch_norm_2d_nchw_backward(*(t[n] for n in BACKWARD_NAMES), stream=stream)
    explicit_fwd = ops.batch_norm_2d_nchw_forward_inference(*(t[n] for n in FORWARD_NAMES), stream=stream)
    stream.synchronize()
    for got in (again_bwd, explicit_bwd, forced):
        assert all(torch.equal(a, b) for a, b in zip(got, first_bwd, strict=True))
    assert torch.equal(again_fwd, first_fwd) and torch.equal(explicit_fwd, first_fwd)
    from cuda.bindings import driver as cu

    # a stream never used before (torch's are pooled, and other tests may have decided this signature on one)
    other = int(kdriver.check(cu.cuStreamCreate(0), "cuStreamCreate"))
    try:
        with pytest.raises(pytest.fail.Exception, match="checked a call whose signature it had decided"):
            ops.batch_norm_2d_nchw_backward(*(t[n] for n in BACKWARD_NAMES), stream=other)  # decided afresh
        kdriver.check(cu.cuStreamSynchronize(other), "cuStreamSynchronize")
    finally:
        cu.cuStreamDestroy(other)


@pytest.mark.gpu
def test_gpu_a_changed_signature_is_checked_again():
    shape = (4, 8, 16, 16)
    t = cuda_inputs(BACKWARD, shape, "f32")
    args = [t[n] for n in BACKWARD_NAMES]
    want = ops.batch_norm_2d_nchw_backward(*args)
    decided = len(backward.NCHW._fast)
    # another dtype for one argument: refused, as on the first call
    with pytest.raises(ArgumentError, match="weight: expected dtype f32 with x in f32, got f64"):
        ops.batch_norm_2d_nchw_backward(args[0], args[1], args[2].double(), *args[3:])
    # a non-contiguous x of the same shape and dtype: refused
    x_t = args[1].transpose(2, 3).contiguous().transpose(2, 3)
    with pytest.raises(ArgumentError, match="expected a contiguous"):
        ops.batch_norm_2d_nchw_backward(args[0], x_t, *args[2:])
    # x and dy 4 bytes past a 16-byte boundary: another plan (no 16-byte packs), the same results
    dy_off, x_off = (torch.empty(a.numel() + 1, device="cuda")[1:].view(shape).copy_(a) for a in args[:2])
    got = ops.batch_norm_2d_nchw_backward(dy_off, x_off, *args[2:])
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)  # another summation order
    assert len(backward.NCHW._fast) == decided + 1  # the misaligned signature, decided once; the refused ones not
    assert torch.equal(ops.batch_norm_2d_nchw_backward(dy_off, x_off, *args[2:])[0], got[0])


@pytest.mark.gpu
def test_gpu_ops_launch_from_a_thread_without_a_current_context():
    """PyTorch's autograd threads (and a user's) may have no CUDA context bound: loading and launching bind it."""
    import threading

    t = cuda_inputs(BACKWARD, (2, 8, 12, 12), "f16")
    args = [t[n] for n in BACKWARD_NAMES]
    want = ops.batch_norm_2d_nchw_backward(*args, block_hw=512)  # a kernel first loaded here, on this thread
    results = []

    def run():
        from cuda.bindings import driver as cu

        cu.cuCtxSetCurrent(None)  # as a fresh thread has it
        results.append(ops.batch_norm_2d_nchw_backward(*args))  # checked path, loads another kernel
        cu.cuCtxSetCurrent(None)
        results.append(ops.batch_norm_2d_nchw_backward(*args))  # the fast path
        torch.cuda.synchronize()

    thread = threading.Thread(target=run)
    thread.start()
    thread.join()
    assert len(results) == 2
    for got in results:
        torch.testing.assert_close(got, want, rtol=2e-3, atol=1e-2)  # f16 results of another plan


@pytest.mark.gpu
def test_gpu_ops_on_another_device_run_there_and_leave_the_current_device_alone():
    """With device 0 current (PyTorch's current device, its context current on the thread), ops on device 1 tensors
    load, run and replay on device 1, and device 0's context stays current (the launch pushes device 1's)."""
    if torch.cuda.device_count() < 2:
        pytest.skip("gpu test not run: needs two CUDA devices")
    from cuda.bindings import driver as cu

    import rust_kernels.torch as rk_torch
    from rust_kernels import driver

    torch.cuda.set_device(0)
    device0 = int(driver.context(0))

    def current() -> int:
        return int(driver.check(cu.cuCtxGetCurrent(), "cuCtxGetCurrent"))

    shape = (4, 8, 16, 16)
    t = cuda_inputs(FORWARD, shape, "f32") | cuda_inputs(BACKWARD, shape, "f32")
    on1 = {n: a.to("cuda:1") for n, a in t.items()}
    want_bwd = ops.batch_norm_2d_nchw_backward(*(t[n] for n in BACKWARD_NAMES))
    want_fwd = ops.batch_norm_2d_nchw_forward_inference(*(t[n] for n in FORWARD_NAMES))
    for _ in range(2):  # checked (loads the kernels for device 1), then the fast path
        cu.cuCtxSetCurrent(driver.context(0))  # as PyTorch's runtime has it with device 0 current
        got_bwd = ops.batch_norm_2d_nchw_backward(*(on1[n] for n in BACKWARD_NAMES))
        got_fwd = ops.batch_norm_2d_nchw_forward_inference(*(on1[n] for n in FORWARD_NAMES))
        assert current() == device0 and torch.cuda.current_device() == 0
        assert all(g.device == torch.device("cuda:1") for g in (*got_bwd, got_fwd))
        torch.cuda.synchronize(1)
        assert all(torch.equal(g.cpu(), w.cpu()) for g, w in zip(got_bwd, want_bwd, strict=True))  # the same plan
        assert torch.equal(got_fwd.cpu(), want_fwd.cpu())
    ours = rk_torch.convert(torch.nn.BatchNorm2d(8)).to("cuda:1").eval()
    theirs = torch.nn.BatchNorm2d(8).to("cuda:1").eval()
    x = on1["x"].clone().requires_grad_()
    for module in (ours, theirs):
        module(x).backward(on1["dy"])
    assert current() == device0 and torch.cuda.current_device() == 0
    torch.testing.assert_close(ours.weight.grad, theirs.weight.grad, rtol=1e-4, atol=1e-5)
