"""The ops' fast path (rust_kernels.calls): which calls have a signature, what tells signatures apart, and on the GPU
that a repeated call skips the checks yet gives the checked path's results, while any change of signature (dtype,
alignment, layout) is checked and decided afresh."""

import numpy as np
import pytest

from rust_kernels import ArgumentError, arrays, calls, registry
from rust_kernels.families.batch_norm import backward, common, forward

torch = pytest.importorskip("torch", reason="the fast path is for PyTorch tensors")

BACKWARD = registry.family("batch_norm_2d_nchw_backward")
FORWARD = registry.family("batch_norm_2d_nchw_forward_inference")


def test_only_plain_cuda_tensors_and_plain_scalars_have_signatures():
    cpu = torch.zeros(4)
    assert calls.signature((cpu,)) is None  # CPU tensors run the host emulator: checked every time
    assert calls.signature((np.zeros(4),)) is None
    assert calls.signature(()) == ()
    assert calls.signature((), (1e-5, None, True)) == (1e-5, None, True)
    assert calls.signature((), (np.float64(1e-5),)) is None  # checked (and converted) by the op every time
    assert calls.signature((), ([1],)) is None  # unhashable: no signature rather than a TypeError
    assert calls.signature((torch.zeros(4, device="meta"),)) is None


class Tensorish:
    """What a signature reads of a tensor."""

    def __init__(self, shape=(2, 3), dtype="float32", device=0, contiguous=True, address=0x7F00_0000_0000):
        self.shape, self.dtype, self._device = shape, dtype, device
        self._contiguous, self._address = contiguous, address

    def get_device(self):
        return self._device

    def is_contiguous(self):
        return self._contiguous

    def data_ptr(self):
        return self._address


@pytest.mark.parametrize(
    ("arrays", "scalars"),
    [
        ((Tensorish(), Tensorish((3,), "bfloat16", 1, False, 0x7F00_0000_0004)), (1e-5, None, True, 64, "x")),
        ((Tensorish(address=2**64 - 1),), ()),
        ((Tensorish(device=-1),), ()),  # a CPU tensor
        ((Tensorish(), object()), ()),  # another array type
        ((Tensorish(),), (np.float32(1.0),)),  # another scalar type
        ((), ()),
    ],
)
def test_the_native_signature_is_the_python_one(arrays, scalars):
    _host = pytest.importorskip("rust_kernels._host")
    want = calls.python_signature(arrays, scalars, (Tensorish,), calls.SCALARS)
    assert _host.signature(arrays, scalars, (Tensorish,), calls.SCALARS) == want
    if arrays:
        assert calls.signature(arrays, scalars) is None  # not torch tensors


def test_decisions_keep_no_none_key_and_stay_bounded(monkeypatch):
    monkeypatch.setattr(calls, "MAX_SIGNATURES", 3)
    decisions = calls.Decisions()
    decisions.put(None, "x")
    assert len(decisions) == 0 and decisions.get(None) is None
    for key in range(3):
        decisions.put(key, key)
    assert len(decisions) == 3 and decisions.get(2) == 2
    decisions.put(3, 3)  # past the bound: starts afresh
    assert len(decisions) == 1 and decisions.get(0) is None and decisions.get(3) == 3


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
    first_bwd = backward.batch_norm_2d_nchw_backward(*(t[n] for n in BACKWARD_NAMES))
    first_fwd = forward.batch_norm_2d_nchw_forward_inference(*(t[n] for n in FORWARD_NAMES))
    streamed = (t["dy"], t["x"], first_bwd[0])
    plan = backward.own_plan(shape, common.split_key(key)[0], streamed, "cuda", 0, mixed=key in common.MIXED)
    forced = backward.batch_norm_2d_nchw_backward(*(t[n] for n in BACKWARD_NAMES), plan=plan)  # checked, same plan
    refuse_checks(monkeypatch)
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):  # the fast path launches on the current stream too
        again_bwd = backward.batch_norm_2d_nchw_backward(*(t[n] for n in BACKWARD_NAMES))
        again_fwd = forward.batch_norm_2d_nchw_forward_inference(*(t[n] for n in FORWARD_NAMES))
    stream.synchronize()
    assert all(torch.equal(a, b) for a, b in zip(again_bwd, first_bwd, strict=True))
    assert all(torch.equal(a, b) for a, b in zip(forced, first_bwd, strict=True))
    assert torch.equal(again_fwd, first_fwd)


@pytest.mark.gpu
def test_gpu_a_changed_signature_is_checked_again():
    shape = (4, 8, 16, 16)
    t = cuda_inputs(BACKWARD, shape, "f32")
    args = [t[n] for n in BACKWARD_NAMES]
    want = backward.batch_norm_2d_nchw_backward(*args)
    decided = len(backward._decisions)
    # another dtype for one argument: refused, as on the first call
    with pytest.raises(ArgumentError, match="weight: expected dtype f32 with x in f32, got f64"):
        backward.batch_norm_2d_nchw_backward(args[0], args[1], args[2].double(), *args[3:])
    # a non-contiguous x of the same shape and dtype: refused
    x_t = args[1].transpose(2, 3).contiguous().transpose(2, 3)
    with pytest.raises(ArgumentError, match="expected a contiguous tensor"):
        backward.batch_norm_2d_nchw_backward(args[0], x_t, *args[2:])
    # x and dy 4 bytes past a 16-byte boundary: another plan (no 16-byte packs), the same results
    dy_off, x_off = (torch.empty(a.numel() + 1, device="cuda")[1:].view(shape).copy_(a) for a in args[:2])
    got = backward.batch_norm_2d_nchw_backward(dy_off, x_off, *args[2:])
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)  # another summation order
    assert len(backward._decisions) == decided + 1  # the misaligned signature, decided once; the refused ones not
    assert torch.equal(backward.batch_norm_2d_nchw_backward(dy_off, x_off, *args[2:])[0], got[0])


@pytest.mark.gpu
def test_gpu_ops_launch_from_a_thread_without_a_current_context():
    """PyTorch's autograd threads (and a user's) may have no CUDA context bound: loading and launching bind it."""
    import threading

    t = cuda_inputs(BACKWARD, (2, 8, 12, 12), "f16")
    args = [t[n] for n in BACKWARD_NAMES]
    want = backward.batch_norm_2d_nchw_backward(*args, block_hw=512)  # a kernel first loaded here, on this thread
    results = []

    def run():
        from cuda.bindings import driver as cu

        cu.cuCtxSetCurrent(None)  # as a fresh thread has it
        results.append(backward.batch_norm_2d_nchw_backward(*args))  # checked path, loads another kernel
        cu.cuCtxSetCurrent(None)
        results.append(backward.batch_norm_2d_nchw_backward(*args))  # the fast path
        torch.cuda.synchronize()

    thread = threading.Thread(target=run)
    thread.start()
    thread.join()
    assert len(results) == 2
    for got in results:
        torch.testing.assert_close(got, want, rtol=2e-3, atol=1e-2)  # f16 results of another plan
