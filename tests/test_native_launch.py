"""The extension's CudaLaunch, driven through a stand-in for cuLaunchKernel (no GPU needed)."""

import ctypes

import pytest

_host = pytest.importorskip("rust_kernels._host")

PROTOTYPE = ctypes.CFUNCTYPE(
    ctypes.c_int, ctypes.c_void_p, *[ctypes.c_uint] * 7, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p
)


def stand_in(result: int, seen: list):
    def cu_launch_kernel(function, gx, gy, gz, bx, by, bz, shared, stream, params, extra):
        seen.append((function, (gx, gy, gz, bx, by, bz, shared), stream, params, extra))
        return result

    callback = PROTOTYPE(cu_launch_kernel)
    return callback, ctypes.cast(callback, ctypes.c_void_p).value


def test_calls_the_driver_entry_with_the_prepared_arguments():
    seen: list = []
    callback, entry = stand_in(0, seen)
    params = (ctypes.c_void_p * 2)()
    launch = _host.CudaLaunch(entry, 0x1234, (1, 2, 3, 4, 5, 6, 7), 99, ctypes.addressof(params), params, print)
    launch()
    launch()
    assert seen == [(0x1234, (1, 2, 3, 4, 5, 6, 7), 99, ctypes.addressof(params), None)] * 2
    assert callback  # kept alive to here


def test_a_failed_launch_raises_through_on_error():
    seen: list = []
    callback, entry = stand_in(700, seen)
    params = (ctypes.c_void_p * 1)()

    def on_error(code):
        raise RuntimeError(f"launch failed: {code}")

    launch = _host.CudaLaunch(entry, 0x1, (1, 1, 1, 32, 1, 1, 0), 0, ctypes.addressof(params), params, on_error)
    with pytest.raises(RuntimeError, match="launch failed: 700"):
        launch()
    assert callback and len(seen) == 1


def test_null_pointers_are_refused():
    with pytest.raises(TypeError, match="non-null"):
        _host.CudaLaunch(0, 1, (1, 1, 1, 1, 1, 1, 0), 0, 1, None, print)
