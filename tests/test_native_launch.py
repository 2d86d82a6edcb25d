"""The extension's CudaLaunch, driven through a stand-in for cuLaunchKernel and the fake driver's context calls (no
GPU needed)."""

import ctypes

import pytest

from fake_driver import FakeDriver

_host = pytest.importorskip("rust_kernels._host")

PROTOTYPE = ctypes.CFUNCTYPE(
    ctypes.c_int, ctypes.c_void_p, *[ctypes.c_uint] * 7, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p
)
CONTEXT = 0xC1C1


@pytest.fixture(scope="module")
def driver(tmp_path_factory) -> FakeDriver:
    return FakeDriver(tmp_path_factory.mktemp("fake_driver"))


def stand_in(driver: FakeDriver, result: int, seen: list):
    def cu_launch_kernel(function, gx, gy, gz, bx, by, bz, shared, stream, params, extra):
        seen.append((function, (gx, gy, gz, bx, by, bz, shared), stream, params, extra, driver.current))
        return result

    callback = PROTOTYPE(cu_launch_kernel)
    return callback, ctypes.cast(callback, ctypes.c_void_p).value


def test_calls_the_driver_entry_with_the_prepared_arguments_in_the_kernels_context(driver):
    seen: list = []
    callback, entry = stand_in(driver, 0, seen)
    params = (ctypes.c_void_p * 2)()
    context = driver.context(CONTEXT)
    address = ctypes.addressof(params)
    launch = _host.CudaLaunch(entry, context, 0x1234, (1, 2, 3, 4, 5, 6, 7), 99, address, params, print)
    driver.set_current(0xD1D1)  # another device's context is current: pushed over for the launch, then back
    launch()
    assert driver.current == 0xD1D1
    driver.set_current(CONTEXT)
    launch()
    driver.set_current(0)
    assert seen == [(0x1234, (1, 2, 3, 4, 5, 6, 7), 99, address, None, CONTEXT)] * 2
    assert callback  # kept alive to here


COOPERATIVE = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, *[ctypes.c_uint] * 7, ctypes.c_void_p, ctypes.c_void_p)


def test_a_cooperative_launch_calls_cuLaunchCooperativeKernels_signature(driver):
    """With `cooperative`, the entry is cuLaunchCooperativeKernel's: the same arguments but no `extra`."""
    seen: list = []

    def cu_launch_cooperative_kernel(function, gx, gy, gz, bx, by, bz, shared, stream, params):
        seen.append((function, (gx, gy, gz, bx, by, bz, shared), stream, params, driver.current))
        return 0

    callback = COOPERATIVE(cu_launch_cooperative_kernel)
    entry = ctypes.cast(callback, ctypes.c_void_p).value
    params = (ctypes.c_void_p * 2)()
    address = ctypes.addressof(params)
    launch = _host.CudaLaunch(entry, driver.context(CONTEXT), 0x77, (8, 2, 1, 256, 1, 1, 64), 5, address, params, print,
                              True)  # fmt: skip
    launch()
    driver.set_current(0)
    assert seen == [(0x77, (8, 2, 1, 256, 1, 1, 64), 5, address, CONTEXT)]


def test_a_failed_launch_raises_through_on_error(driver):
    seen: list = []
    callback, entry = stand_in(driver, 700, seen)
    params = (ctypes.c_void_p * 1)()

    def on_error(code):
        raise RuntimeError(f"launch failed: {code}")

    context = driver.context(CONTEXT)
    address = ctypes.addressof(params)
    launch = _host.CudaLaunch(entry, context, 0x1, (1, 1, 1, 32, 1, 1, 0), 0, address, params, on_error)
    with pytest.raises(RuntimeError, match="launch failed: 700"):
        launch()
    assert callback and len(seen) == 1 and driver.current == 0


def test_null_pointers_are_refused(driver):
    with pytest.raises(TypeError, match="non-null"):
        _host.CudaLaunch(0, driver.context(CONTEXT), 1, (1, 1, 1, 1, 1, 1, 0), 0, 1, None, print)
    with pytest.raises(TypeError, match="non-null"):
        _host.CudaLaunch(1, driver.context(0), 1, (1, 1, 1, 1, 1, 1, 0), 0, 1, None, print)
