"""The extension's CheckedLaunch (check + pack + cuLaunchKernel in one native call), driven through a fake
cuLaunchKernel compiled from C: it must accept and refuse exactly what rust_kernels.args accepts and refuses, with
the same exception types and messages, and pass the driver exactly the values the Python path packs."""

from __future__ import annotations

import collections.abc
import enum
import fractions
import gc
import struct
import weakref

import numpy as np
import pytest

import rust_kernels
from fake_driver import CONTEXT, DTYPES, ELEMENT_SIZES, FUNCTION, DeviceArray, FakeDriver, FakeTensor, checked_launch
from rust_kernels import args as kargs
from rust_kernels import cuda
from rust_kernels import driver as kdriver
from rust_kernels.dtypes import BY_NUMPY as ELEMENTS
from rust_kernels.dtypes import BY_TYPESTR
from rust_kernels.errors import ArgumentError, ArgumentTypeError
from rust_kernels.kernels import BatchNorm2dNchwBackward, BatchNorm2dNchwBackwardSplit, Kernel

_host = pytest.importorskip("rust_kernels._host")

K = BatchNorm2dNchwBackward(block_hw=256, dtype="f32")  # 8 pointers, B C HW (i32), eps (f32); grid (C, 1, 1)
SPLIT = BatchNorm2dNchwBackwardSplit(block_hw=128, vectorized=0, deterministic=1, dtype="bf16")  # grid (C, SPLIT)
# pointer -> owning device, as the fake pointer_device reports it (everything else: device 0)
OWNERS = {0x1000: 1, 0x2000: None}


@pytest.fixture(scope="module")
def driver(tmp_path_factory) -> FakeDriver:
    return FakeDriver(tmp_path_factory.mktemp("fake_driver"))


@pytest.fixture(autouse=True)
def fake_pointer_device(monkeypatch):
    monkeypatch.setattr(kdriver, "pointer_device", lambda ptr: OWNERS.get(ptr, 0))


def single(driver: FakeDriver, is_pointer: bool, kind: str, **options) -> tuple[_host.CheckedLaunch, str]:
    """A CheckedLaunch for a one-argument kernel (any scalar type or element, not only the catalogue's)."""
    where = f"probe: argument 0 (v: {'*mut ' if is_pointer else ''}{kind})"
    settings = {
        "entry": driver.entry,
        "context": driver.context(CONTEXT),
        "function": FUNCTION,
        "name": "probe",
        "kernel_id": "probe__x",
        "arg_names": ["v"],
        "schema": [(is_pointer, kind, where)],
        "grid": [1, 1, 1],
        "block": [32, 1, 1],
        "min_shared": 0,
        "max_shared": 1024,
        "device": 0,
        "element_sizes": ELEMENT_SIZES,
        "elements": ELEMENTS,
        "typestrs": BY_TYPESTR,
        "tensor_type": FakeTensor,
        "argument_error": ArgumentError,
        "argument_type_error": ArgumentTypeError,
        "pointer_device": lambda ptr: kdriver.pointer_device(ptr),
        "on_error": lambda code: pytest.fail(f"unexpected launch failure {code}"),
    }
    driver.set_kinds(["ptr" if is_pointer else kind])
    return _host.CheckedLaunch(**(settings | options)), where


def outcome(call):
    try:
        return "ok", call()
    except Exception as err:  # the type and the text are what is compared
        return type(err), str(err)


def good_args(kernel: Kernel = K) -> list:
    if kernel is K:
        return [FakeTensor(ptr=0x7F00_0000_0000 + 0x100 * i) for i in range(8)] + [2, 3, 20, 1e-5]
    tensors = [FakeTensor("bfloat16", ptr=0x7F00_0000_0000 + 0x100 * i) for i in range(8)]
    extra = [FakeTensor("float32", ptr=0x7E00_0000_0000), FakeTensor("uint32", ptr=0x7D00_0000_0000)]
    return [*tensors, *extra, 2, 3, 20, 1e-5, 4]


def python_launch(kernel: Kernel, grid, block, values, shared=None):
    """Today's checked path: args.pack + args.launch_config, and the bytes cuda.py hands the driver."""
    packed = kargs.pack(kernel, values, "cuda", 0)
    grid3, block3, shared = kargs.launch_config(kernel, grid, block, packed, shared)
    return (*grid3, *block3, shared), [bytes(cuda._ctype(p.type)(p.value)) for p in packed]


def native_launch(launch, driver: FakeDriver, grid, block, values, shared=None):
    calls = driver.calls
    launch(grid, block, values, shared)
    assert driver.calls == calls + 1
    last = driver.last()
    assert (last["function"], last["stream"], last["extra"]) == (FUNCTION, 0, 0)
    return last["dims"], last["raw"]


def test_packs_the_values_the_driver_reads(driver):
    launch = checked_launch(SPLIT, driver)
    values = good_args(SPLIT)
    launch((3, 4), 128, values, stream=0x5EED)
    last = driver.last()
    assert last["function"] == FUNCTION and last["stream"] == 0x5EED and last["extra"] == 0
    assert last["dims"] == (3, 4, 1, 128, 1, 1, SPLIT.shared_mem_bytes)
    pointers = [0x7F00_0000_0000 + 0x100 * i for i in range(8)] + [0x7E00_0000_0000, 0x7D00_0000_0000]
    assert last["params"] == [*pointers, 2, 3, 20, struct.unpack("<f", struct.pack("<f", 1e-5))[0], 4]
    assert [len(r) for r in last["raw"]] == [8] * 10 + [4] * 5  # i32 and f32 travel as 4 bytes
    assert last["raw"][13] == struct.pack("<f", 1e-5)


def test_the_same_bytes_as_the_python_path(driver):
    launch = checked_launch(SPLIT, driver)
    values = good_args(SPLIT)
    values[3] = DeviceArray((2, 3), typestr="<V2", ptr=0)  # no typestr for bf16: refused by both
    assert outcome(lambda: native_launch(launch, driver, (3, 4), 128, values)) == outcome(
        lambda: python_launch(SPLIT, (3, 4), 128, values)
    )
    values = good_args(SPLIT)
    values[8] = DeviceArray((5,), typestr="<f4", ptr=0x7C00_0000_0000)
    values[9] = 0x7B00_0000_0000
    values[10:] = [np.int32(7), 3, np.int64(9), np.float32(0.25), 2]
    assert native_launch(launch, driver, [3, 2], (128, 1, 1), values, 4096) == python_launch(
        SPLIT, [3, 2], (128, 1, 1), values, 4096
    )


class IntLike(enum.IntEnum):
    THREE = 3


class Args(collections.abc.Sequence):
    def __init__(self, items):
        self.items = list(items)

    def __getitem__(self, i):
        return self.items[i]

    def __len__(self):
        return len(self.items)


def _set(index, value):
    def change(values):
        values[index] = value
        return values

    return change


# (label, change to good_args(K), grid, block, shared_mem): every row must fail on the Python path
BAD = [
    ("args int", lambda v: 5, 3, 256, None),
    ("args str", lambda v: "x" * 12, 3, 256, None),
    ("args bytes", lambda v: b"x" * 12, 3, 256, None),
    ("args ndarray", lambda v: np.zeros(12), 3, 256, None),
    ("args dict", lambda v: dict(enumerate(v)), 3, 256, None),
    ("args generator", lambda v: (x for x in v), 3, 256, None),
    ("args range", lambda v: range(12), 3, 256, None),  # a sequence: checked, then the grid is wrong
    ("too few", lambda v: v[:-1], 3, 256, None),
    ("too many", lambda v: [*v, 1], 3, 256, None),
    ("too few, tuple", lambda v: tuple(v[:-1]), 3, 256, None),
    ("too few, sequence", lambda v: Args(v[:-1]), 3, 256, None),
    ("i32 too big", _set(8, 2**31), 3, 256, None),
    ("i32 too small", _set(8, -(2**31) - 1), 3, 256, None),
    ("i32 huge", _set(8, 10**30), 3, 256, None),
    ("i32 huge negative", _set(9, -(10**30)), 3, 256, None),
    ("i32 numpy too big", _set(8, np.int64(2**40)), 3, 256, None),
    ("i32 float", _set(9, 3.0), 3, 256, None),
    ("i32 numpy float", _set(9, np.float32(3.0)), 3, 256, None),
    ("i32 bool", _set(10, True), 3, 256, None),
    ("i32 numpy bool", _set(10, np.bool_(True)), 3, 256, None),
    ("i32 str", _set(10, "20"), 3, 256, None),
    ("i32 None", _set(10, None), 3, 256, None),
    ("f32 str", _set(11, "1e-5"), 3, 256, None),
    ("f32 overflow", _set(11, 1e39), 3, 256, None),
    ("f32 overflow negative", _set(11, -1e39), 3, 256, None),
    ("f32 numpy overflow", _set(11, np.float64(1e39)), 3, 256, None),
    ("f32 int overflow", _set(11, 10**39), 3, 256, None),
    ("f32 int beyond double", _set(11, 10**400), 3, 256, None),
    ("f32 bool", _set(11, False), 3, 256, None),
    ("f32 fraction", _set(11, fractions.Fraction(1, 3)), 3, 256, None),
    ("pointer negative", _set(0, -1), 3, 256, None),
    ("pointer 2**64", _set(0, 2**64), 3, 256, None),
    ("pointer bool", _set(0, True), 3, 256, None),
    ("pointer float", _set(1, 1.5), 3, 256, None),
    ("pointer None", _set(1, None), 3, 256, None),
    ("pointer list", _set(1, [1.0]), 3, 256, None),
    ("pointer host array", _set(2, np.zeros(4, np.float32)), 3, 256, None),
    ("pointer numpy scalar", _set(2, np.uint64(5)), 3, 256, None),
    ("tensor dtype", _set(3, FakeTensor("float64")), 3, 256, None),
    ("tensor unknown dtype", _set(3, FakeTensor("int8")), 3, 256, None),
    ("tensor device", _set(4, FakeTensor(device=1)), 3, 256, None),
    ("tensor on the cpu", _set(4, FakeTensor(device=-1)), 3, 256, None),
    ("tensor strided", _set(5, FakeTensor(contiguous=False, strides=(1, 4))), 3, 256, None),
    ("array typestr", _set(6, DeviceArray(typestr="<f8")), 3, 256, None),
    ("array big-endian", _set(6, DeviceArray(typestr=">f4")), 3, 256, None),
    ("array strided", _set(7, DeviceArray((2, 3), strides=(4, 8))), 3, 256, None),
    ("array strides too short", _set(7, DeviceArray((2, 3), strides=(4,))), 3, 256, None),
    ("array strides too long", _set(7, DeviceArray((3,), strides=(12, 4))), 3, 256, None),
    ("array on device 1", _set(7, DeviceArray(ptr=0x1000)), 3, 256, None),
    ("array of no device", _set(7, DeviceArray(ptr=0x2000)), 3, 256, None),
    ("interface None", _set(7, type("Odd", (), {"__cuda_array_interface__": None})()), 3, 256, None),
    ("grid wrong", None, 4, 256, None),
    ("grid 3 of 4", None, (3, 1, 2), 256, None),
    ("grid four dims", None, (3, 1, 1, 1), 256, None),
    ("grid empty", None, (), 256, None),
    ("grid zero", None, 0, 256, None),
    ("grid zero y", None, (3, 0), 256, None),
    ("grid bool", None, True, 256, None),
    ("grid bool in a list", None, [3, True], 256, None),
    ("grid float", None, 3.0, 256, None),
    ("grid str", None, "3", 256, None),
    ("grid huge", None, 10**30, 256, None),
    ("grid huge negative", None, (3, -(10**30)), 256, None),
    ("grid for a negative C", _set(9, -1), 1, 256, None),
    ("block wrong", None, 3, 128, None),
    ("block 2d", None, 3, (256, 2), None),
    ("block zero", None, 3, 0, None),
    ("block None", None, 3, None, None),
    ("shared too small", None, 3, 256, 8),
    ("shared negative", None, 3, 256, -1),
    ("shared bool", None, 3, 256, True),
    ("shared float", None, 3, 256, 64.0),
    ("shared str", None, 3, 256, "64"),
    ("the first error wins", lambda v: [*v[:8], 2**31, 3.0, True, "x"], 4, 128, 8),
]


@pytest.mark.parametrize("tensor_type", [FakeTensor, None], ids=["tensor_type", "duck-typed"])
@pytest.mark.parametrize(("label", "change", "grid", "block", "shared"), BAD, ids=[row[0] for row in BAD])
def test_refuses_what_the_python_path_refuses(driver, label, change, grid, block, shared, tensor_type):
    values = change(good_args()) if change else good_args()
    expected = outcome(lambda: python_launch(K, grid, block, values, shared))
    assert expected[0] != "ok", f"{label}: the Python path accepts it"
    launch = checked_launch(K, driver, tensor_type=tensor_type)
    calls = driver.calls
    assert outcome(lambda: launch(grid, block, values, shared)) == expected
    assert driver.calls == calls  # nothing launched


GOOD = [
    ("plain", None, 3, 256, None),
    ("tuple args", lambda v: tuple(v), 3, 256, None),
    ("sequence args", lambda v: Args(v), 3, 256, None),
    ("raw pointers", lambda v: [0x7F00_0000_1000 + 256 * i for i in range(8)] + v[8:], 3, 256, None),
    ("pointer 2**64 - 1", _set(0, 2**64 - 1), 3, 256, None),
    ("pointer 0", _set(0, 0), 3, 256, None),
    ("pointer int enum", _set(0, IntLike.THREE), 3, 256, None),
    ("array", _set(1, DeviceArray((2, 3))), 3, 256, None),
    ("array contiguous strides", _set(1, DeviceArray((2, 3), strides=(12, 4))), 3, 256, None),
    ("array size-1 dims", _set(1, DeviceArray((2, 1, 3), strides=(12, 999, 4))), 3, 256, None),
    ("array 0-d", _set(1, DeviceArray((), strides=())), 3, 256, None),
    ("array null, device unknown", _set(1, DeviceArray(ptr=0)), 3, 256, None),
    ("array typestr spelled as the element", _set(1, DeviceArray(typestr="f32")), 3, 256, None),
    ("numpy ints", lambda v: [*v[:8], np.int32(2), np.uint8(3), np.int64(20), v[11]], 3, 256, None),
    ("int enum scalar", _set(9, IntLike.THREE), 3, 256, None),
    ("i32 limits", lambda v: [*v[:8], 2**31 - 1, 3, -(2**31), v[11]], 3, 256, None),
    ("f32 from int", _set(11, 1), 3, 256, None),
    ("f32 from numpy", _set(11, np.float16(0.5)), 3, 256, None),
    ("f32 from float64", _set(11, np.float64(0.1)), 3, 256, None),
    ("f32 max", _set(11, float(np.finfo(np.float32).max)), 3, 256, None),
    ("f32 inf", _set(11, float("-inf")), 3, 256, None),
    ("f32 nan", _set(11, float("nan")), 3, 256, None),
    ("f32 rounds", _set(11, 1 / 3), 3, 256, None),
    ("grid tuple", None, (3,), 256, None),
    ("grid 2d", None, (3, 1), 256, None),
    ("grid list of numpy ints", None, [np.int64(3), np.int8(1)], 256, None),
    ("block list", None, 3, [256, 1, 1], None),
    ("shared explicit", None, 3, 256, 64),
    ("shared more", None, 3, 256, 4096),
]


@pytest.mark.parametrize("tensor_type", [FakeTensor, None], ids=["tensor_type", "duck-typed"])
@pytest.mark.parametrize(("label", "change", "grid", "block", "shared"), GOOD, ids=[row[0] for row in GOOD])
def test_accepts_what_the_python_path_accepts(driver, label, change, grid, block, shared, tensor_type):
    values = change(good_args()) if change else good_args()
    launch = checked_launch(K, driver, tensor_type=tensor_type)
    assert native_launch(launch, driver, grid, block, values, shared) == python_launch(K, grid, block, values, shared)


SCALARS = [0, 1, -1, 2**31 - 1, 2**31, -(2**31), -(2**31) - 1, 2**32 - 1, 2**32, 2**63 - 1, 2**63, -(2**63)]
SCALARS += [-(2**63) - 1, 2**64 - 1, 2**64, 10**30, -(10**30), 10**400, IntLike.THREE, True, np.bool_(False)]
SCALARS += [np.int8(-3), np.uint64(2**64 - 1), np.int64(-(2**63)), np.float32(3.5), np.float16(1.0), 1.5, -0.0]
SCALARS += [1e39, -1e39, float("inf"), float("nan"), 3.4028235e38, 3.4028236e38, 1e-46, 1e308, "1", None, [1]]
SCALARS += [fractions.Fraction(1, 3), np.array(2.0), np.float64(1e39)]


@pytest.mark.parametrize("kind", ["i32", "u32", "i64", "u64", "f32", "f64"])
def test_every_scalar_type_as_args_scalar(driver, kind):
    launch, where = single(driver, False, kind)
    for value in SCALARS:
        expected = outcome(lambda: bytes(cuda._ctype(kind)(kargs._scalar(where, value, kind).value)))  # noqa: B023
        calls = driver.calls
        got = outcome(lambda: launch(1, 32, [value]))  # noqa: B023
        if expected[0] == "ok":
            assert got == ("ok", None), value
            assert driver.calls == calls + 1 and driver.last()["raw"] == [expected[1]], value
        else:
            assert got == expected, value
            assert driver.calls == calls, value


POINTERS = [FakeTensor(name, ptr=0x7000 + i) for i, name in enumerate(DTYPES)]
POINTERS += [DeviceArray(typestr=t, ptr=0x8000 + i) for i, t in enumerate([*BY_TYPESTR, "<V2", "|u1"])]
POINTERS += [0x9000, 2**64 - 1]


@pytest.mark.parametrize("element", sorted(ELEMENT_SIZES))
def test_every_element_as_args_cuda_pointer(driver, element):
    launch, where = single(driver, True, element)
    for value in POINTERS:
        expected = outcome(lambda: kargs._cuda_pointer(where, value, element, 0).value)  # noqa: B023
        calls = driver.calls
        got = outcome(lambda: launch(1, 32, [value]))  # noqa: B023
        if expected[0] == "ok":
            assert got == ("ok", None), value
            assert driver.last()["params"] == [expected[1]], value
        else:
            assert got == expected, value
            assert driver.calls == calls, value


def test_shared_memory_has_an_upper_bound(driver):
    launch = checked_launch(K, driver, max_shared=1000)
    launch(3, 256, good_args(), 1000)
    assert driver.last()["dims"][6] == 1000
    calls = driver.calls
    with pytest.raises(ArgumentError) as err:
        launch(3, 256, good_args(), 1001)
    assert str(err.value) == f"shared_mem: {K.id} may use at most 1000 bytes on this device, got 1001"
    with pytest.raises(ArgumentError, match=r"may use at most 1000 bytes on this device, got 100000000000000000000"):
        launch(3, 256, good_args(), 10**20)
    assert driver.calls == calls


def test_opting_in_to_more_shared_memory(driver):
    asked = []
    launch = checked_launch(K, driver, max_shared=200_000, allowed_shared=48 * 1024, allow_shared=asked.append)
    launch(3, 256, good_args(), 48 * 1024)
    assert asked == []
    with pytest.raises(ArgumentError):  # a failed check opts in to nothing
        launch(4, 256, good_args(), 100_000)
    assert asked == []
    launch(3, 256, good_args(), 100_000)
    launch(3, 256, good_args(), 100_000)
    launch(3, 256, good_args(), 64_000)
    assert asked == [100_000]  # once: the function keeps the larger limit
    assert driver.last()["dims"][6] == 64_000

    def refuse(nbytes):
        raise RuntimeError(f"no {nbytes}")

    launch = checked_launch(K, driver, max_shared=200_000, allowed_shared=1024, allow_shared=refuse)
    calls = driver.calls
    with pytest.raises(RuntimeError, match="no 2048"):
        launch(3, 256, good_args(), 2048)
    assert driver.calls == calls


def test_streams(driver):
    class TorchLike:
        cuda_stream = 1234

    launch = checked_launch(K, driver)
    for stream, handle in [(None, 0), (7, 7), (2**64 - 1, 2**64 - 1), (-1, 2**64 - 1), (TorchLike(), 1234)]:
        launch(3, 256, good_args(), None, stream)
        assert driver.last()["stream"] == handle
    calls = driver.calls
    assert outcome(lambda: launch(3, 256, good_args(), None, "default")) == outcome(
        lambda: kdriver.stream_handle("default")
    )
    with pytest.raises(ArgumentError, match=r"stream: a CUstream handle must fit in 64 bits, got 18446744073709551616"):
        launch(3, 256, good_args(), None, 2**64)
    launch = checked_launch(K, driver, stream_handle=None)
    assert outcome(lambda: launch(3, 256, good_args(), None, TorchLike())) == outcome(
        lambda: kdriver.stream_handle(object.__new__(type("TorchLike", (), {})))
    )
    assert driver.calls == calls
    launch(grid=3, block=256, args=good_args(), stream=5)  # CudaKernel.launch's keywords
    assert driver.last()["stream"] == 5


def test_a_failed_launch_calls_on_error_with_the_code(driver):
    codes = []
    launch = checked_launch(K, driver, on_error=codes.append)
    driver.set_result(700)
    try:
        calls = driver.calls
        launch(3, 256, good_args())
        assert codes == [700] and driver.calls == calls + 1

        def raise_launch_error(code):
            raise rust_kernels.LaunchError(f"launching {K.id}: {code}")

        launch = checked_launch(K, driver, on_error=raise_launch_error)
        with pytest.raises(rust_kernels.LaunchError, match=f"launching {K.id}: 700"):
            launch(3, 256, good_args())
    finally:
        driver.set_result(0)
    launch(3, 256, good_args())
    assert codes == [700]


def test_a_launch_runs_in_its_context_and_leaves_the_threads_current_one(driver):
    """Launches run in the kernel's device context: where another device's context (or none) is current, it is
    pushed for the launch and popped after, so PyTorch's current device stays as it was."""
    launch = checked_launch(K, driver)
    try:
        for current, pushed in ((CONTEXT, 0), (0xD1D1, 1), (0, 1)):
            driver.set_current(current)
            pushes = driver.pushes
            launch(3, 256, good_args())
            assert driver.last()["context"] == CONTEXT and driver.current == current
            assert driver.pushes == pushes + pushed
        driver.set_result(700)
        driver.set_current(0xD1D1)
        with pytest.raises(AssertionError, match="unexpected launch failure 700"):
            launch(3, 256, good_args())
        assert driver.current == 0xD1D1  # popped after a failed launch too
    finally:
        driver.set_result(0)
        driver.set_current(0)


def test_keeps_no_reference_to_the_arguments(driver):
    launch = checked_launch(K, driver)
    values = good_args()
    refs = [weakref.ref(v) for v in values[:8]]
    launch(3, 256, values)
    values[8] = 2**31
    with pytest.raises(ArgumentError):
        launch(3, 256, values)
    del values
    gc.collect()
    assert all(ref() is None for ref in refs)


def test_a_cycle_through_the_launch_is_collected(driver):
    class Owner:  # as CudaKernel, whose launch calls back into it (allow_shared, on_error)
        def failed(self, code):
            pass

        def allow(self, nbytes):
            pass

    owner = Owner()
    owner.launch = checked_launch(K, driver, on_error=owner.failed, allow_shared=owner.allow)
    ref = weakref.ref(owner)
    del owner
    gc.collect()
    assert ref() is None


def test_kernels_of_many_arguments(driver):
    n = 40  # more than are packed on the stack
    schema = [(False, "u64" if i % 2 else "i32", f"wide: argument {i}") for i in range(n)]
    launch = checked_launch(
        K, driver, name="wide", arg_names=[f"a{i}" for i in range(n)], schema=schema, grid=[-1, 1, 1]
    )
    driver.set_kinds([kind for _, kind, _ in schema])
    values = [3] + [i * 1000 + (2**40 if i % 2 else 0) for i in range(1, n)]
    launch(3, 256, values)
    assert driver.last()["params"] == values
    with pytest.raises(ArgumentError, match=r"wide takes 40 arguments \(a0, a1, .*a39\), got 39"):
        launch(3, 256, values[:-1])
    with pytest.raises(ArgumentError, match="wide: argument 39: -1 is out of the u64 range"):
        launch(3, 256, [*values[:-1], -1])


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"entry": 0}, "non-null"),
        ({"function": 0}, "non-null"),
        ({"arg_names": ["a"]}, "1 argument names for 12 schema entries"),
        ({"schema": [(True, "f8", "k: argument 0")] * 12}, 'k: argument 0: unknown element "f8"'),
        ({"schema": [(False, "usize", "k: argument 0")] * 12}, 'k: argument 0: unknown scalar type "usize"'),
        ({"grid": [-12, 1, 1]}, "grid entry -12 names no integer scalar argument"),  # eps, an f32
        ({"grid": [-1, 1, 1]}, "grid entry -1 names no integer scalar argument"),  # dy_ptr
        ({"grid": [1, 1]}, "grid must have 3 entries"),
        ({"block": [0, 1, 1]}, "block entry 0"),
        ({"min_shared": 10, "max_shared": 5}, "min_shared 10 > max_shared 5"),
    ],
)
def test_constructor_refuses_a_malformed_description(driver, options, message):
    with pytest.raises((TypeError, ValueError), match=message):
        checked_launch(K, driver, **options)


def test_numpy_integers_are_accepted_for_grid_and_shared_memory(driver):
    """Issue 9.10: NumPy integers are integers (both paths)."""
    values = good_args()
    python_launch(K, np.int64(3), 256, values, np.int64(K.shared_mem_bytes))
    before = driver.calls
    checked_launch(K, driver)(np.int64(3), 256, values, np.int64(K.shared_mem_bytes))
    assert driver.calls == before + 1
