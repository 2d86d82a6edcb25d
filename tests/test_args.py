import ctypes

import numpy as np
import pytest

from rust_kernels import args as kargs
from rust_kernels import cuda, driver
from rust_kernels.errors import ArgumentError, ArgumentTypeError
from rust_kernels.kernels import BatchNorm2dNchwBackward

K = BatchNorm2dNchwBackward(block_hw=256, dtype="f32")


class DeviceArray:
    """A stand-in device array: only __cuda_array_interface__, as CuPy or Numba expose it."""

    def __init__(self, shape, typestr="<f4", strides=None, ptr=0x7F0000000000):
        self.__cuda_array_interface__ = {
            "shape": shape,
            "typestr": typestr,
            "strides": strides,
            "data": (ptr, False),
            "version": 3,
        }


@pytest.fixture(autouse=True)
def on_device_zero(monkeypatch):
    monkeypatch.setattr(driver, "pointer_device", lambda ptr: 0)


def good_args(array=DeviceArray):
    return [array((2, 3, 4, 5)) for _ in range(8)] + [2, 3, 20, 1e-5]


def test_packs_by_schema():
    packed = kargs.pack(K, good_args(), "cuda")
    assert [p.type for p in packed] == ["ptr"] * 8 + ["i32", "i32", "i32", "f32"]
    assert packed[0].nbytes == 2 * 3 * 4 * 5 * 4
    assert packed[11].value == 1e-5


def test_a_python_float_travels_as_four_bytes():
    packed = kargs.pack(K, good_args(), "cuda")
    assert ctypes.sizeof(cuda._ctype(packed[11].type)) == 4
    assert ctypes.sizeof(cuda._ctype(packed[8].type)) == 4


def test_wrong_count():
    with pytest.raises(ArgumentError, match=r"takes 12 arguments \(dy_ptr, x_ptr, .*eps\), got 11"):
        kargs.pack(K, good_args()[:-1], "cuda")


def test_wrong_dtype_names_the_argument():
    values = good_args()
    values[2] = DeviceArray((2, 3, 4, 5), typestr="<f8")
    with pytest.raises(ArgumentError, match=r"argument 2 \(dx_ptr: \*mut f32\): expected an array of f32, got f64"):
        kargs.pack(K, values, "cuda")


def test_non_contiguous():
    values = good_args()
    values[1] = DeviceArray((2, 3), strides=(4, 8))
    with pytest.raises(ArgumentError, match=r"x_ptr.*C-contiguous"):
        kargs.pack(K, values, "cuda")


def test_contiguous_strides_are_accepted():
    values = good_args()
    values[1] = DeviceArray((2, 3), strides=(12, 4))
    assert kargs.pack(K, values, "cuda")[1].nbytes == 24


def test_wrong_device(monkeypatch):
    monkeypatch.setattr(driver, "pointer_device", lambda ptr: 1)
    with pytest.raises(ArgumentError, match=r"dy_ptr.*expected memory on device 0, got memory on device 1"):
        kargs.pack(K, good_args(), "cuda")


def test_host_array_for_a_device_pointer():
    values = good_args()
    values[0] = np.zeros(4, np.float32)
    with pytest.raises(ArgumentTypeError, match=r"dy_ptr.*got a host \(NumPy\) array"):
        kargs.pack(K, values, "cuda")


def test_raw_device_pointers_are_accepted():
    values = [0x7F0000001000 + i * 256 for i in range(8)] + [1, 1, 1, 0.5]
    assert [p.value for p in kargs.pack(K, values, "cuda")[:8]] == values[:8]


@pytest.mark.parametrize(
    ("index", "value", "error", "message"),
    [
        (8, 2**31, ArgumentError, r"argument 8 \(B: i32\): 2147483648 is out of the i32 range"),
        (9, 3.0, ArgumentTypeError, r"argument 9 \(C: i32\): expected an integer, got float"),
        (10, True, ArgumentTypeError, r"argument 10 \(HW: i32\): expected a number, got a bool"),
        (11, "1e-5", ArgumentTypeError, r"argument 11 \(eps: f32\): expected a float, got str"),
        (11, 1e39, ArgumentError, r"eps: f32\): 1e\+39 does not fit in an f32"),
        (0, [1.0], ArgumentTypeError, r"dy_ptr.*expected a device array"),
        (0, -1, ArgumentError, r"dy_ptr.*non-negative 64-bit address"),
    ],
)
def test_bad_values(index, value, error, message):
    values = good_args()
    values[index] = value
    with pytest.raises(error, match=message):
        kargs.pack(K, values, "cuda")


def test_host_backend_takes_numpy():
    values = good_args(lambda shape: np.zeros(shape, np.float32))
    packed = kargs.pack(K, values, "host")
    assert packed[0].value == values[0].ctypes.data and packed[0].nbytes == values[0].nbytes
    values[3] = DeviceArray((3,))
    with pytest.raises(ArgumentTypeError, match=r"weight_ptr.*host backend takes NumPy arrays"):
        kargs.pack(K, values, "host")
    values[3] = np.zeros((3, 2), np.float32)[:, 0]
    with pytest.raises(ArgumentError, match=r"weight_ptr.*C-contiguous"):
        kargs.pack(K, values, "host")


def test_launch_config_checks_block_grid_and_shared_memory():
    packed = kargs.pack(K, good_args(), "cuda")
    assert kargs.launch_config(K, 3, 256, packed, None) == ((3, 1, 1), (256, 1, 1), K.shared_mem_bytes)
    assert K.shared_mem_bytes == 2 * 8 * 4
    with pytest.raises(ArgumentError, match=r"block: .* written for a CTA of \(256, 1, 1\), got \(128, 1, 1\)"):
        kargs.launch_config(K, 3, 128, packed, None)
    with pytest.raises(ArgumentError, match=r"grid: .* expects \(3, 1, 1\) for these arguments, got \(4, 1, 1\)"):
        kargs.launch_config(K, (4,), 256, packed, None)
    with pytest.raises(ArgumentError, match=r"shared_mem: .* needs at least 64 bytes, got 8"):
        kargs.launch_config(K, 3, 256, packed, 8)
    with pytest.raises(ArgumentError, match=r"grid: expected an int or 1 to 3 ints"):
        kargs.launch_config(K, (1, 1, 1, 1), 256, packed, None)
    with pytest.raises(ArgumentError, match=r"grid: every dimension must be at least 1"):
        kargs.launch_config(K, 0, 256, packed, None)


def test_stream_handles():
    class TorchLike:
        cuda_stream = 1234

    class CudaCoreLike:
        def __cuda_stream__(self):
            return (0, 99)

    assert driver.stream_handle(None) == 0
    assert driver.stream_handle(7) == 7
    assert driver.stream_handle(TorchLike()) == 1234
    assert driver.stream_handle(CudaCoreLike()) == 99
    with pytest.raises(ArgumentTypeError, match="stream"):
        driver.stream_handle("default")
