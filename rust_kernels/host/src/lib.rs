//! `rust_kernels._host`, the package's native extension: `CheckedLaunch`, a checked GPU launch in one native call,
//! and `CudaLaunch`, a prepared one. (Kernels run in the host emulator from libraries built per kernel instance: see rust_kernels.host.)

use pyo3::exceptions::PyTypeError;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::PyTuple;
use std::ffi::c_void;

mod checked;

/// The driver's `cuLaunchKernel`.
type LaunchKernel =
    unsafe extern "C" fn(usize, u32, u32, u32, u32, u32, u32, u32, usize, *mut *mut c_void, *mut *mut c_void) -> i32;

/// Calls `launch` (cuLaunchKernel) for `function` with `dims` (grid x, y, z, block x, y, z, dynamic shared memory
/// bytes) on `stream`. A nonzero CUresult goes to `on_error`, which raises the package's LaunchError, or returns True
/// when it removed the cause (no context was current on this thread: it made the device's primary context current);
/// the launch is then retried, once.
///
/// # Safety
/// `launch` is cuLaunchKernel, `function` a CUfunction of the device's primary context, and `params` points at one
/// live pointer per kernel parameter for the duration of the call (the driver copies the values).
unsafe fn enqueue(
    py: Python<'_>,
    launch: LaunchKernel,
    function: usize,
    dims: [u32; 7],
    stream: usize,
    params: *mut *mut c_void,
    on_error: &PyObject,
) -> PyResult<()> {
    let [gx, gy, gz, bx, by, bz, shared] = dims;
    let send = || unsafe {
        launch(
            function,
            gx,
            gy,
            gz,
            bx,
            by,
            bz,
            shared,
            stream,
            params,
            std::ptr::null_mut(),
        )
    };
    let code = send();
    if code != 0 && on_error.call1(py, (code,))?.is_truthy(py)? {
        let code = send();
        if code != 0 {
            on_error.call1(py, (code,))?;
        }
    }
    Ok(())
}

/// One checked, packed GPU launch (rust_kernels.cuda builds it): calling it calls `cuLaunchKernel` directly, with no
/// argument conversion, which is what makes a prepared launch cheaper than ctypes or cuda.core.
#[pyclass(frozen)]
struct CudaLaunch {
    launch: LaunchKernel,
    function: usize,
    dims: [u32; 7],
    stream: usize,
    params: usize,
    /// The parameter storage `params` points into, kept alive with the launch.
    _keep: PyObject,
    /// Called with the CUresult of a failed launch; raises the package's LaunchError.
    on_error: PyObject,
}

#[pymethods]
impl CudaLaunch {
    /// `entry` is the address of the driver's cuLaunchKernel, `function` a CUfunction of the current context,
    /// `dims` grid x, y, z, block x, y, z and the dynamic shared-memory bytes, and `params` the address of the
    /// kernel's parameter array inside `keep`.
    #[new]
    fn new(
        entry: usize,
        function: usize,
        dims: [u32; 7],
        stream: usize,
        params: usize,
        keep: PyObject,
        on_error: PyObject,
    ) -> PyResult<Self> {
        if entry == 0 || function == 0 || params == 0 {
            return Err(PyTypeError::new_err(
                "CudaLaunch needs non-null entry, function and params",
            ));
        }
        // SAFETY: rust_kernels.cuda passes the address ctypes resolved for libcuda's cuLaunchKernel.
        let launch = unsafe { std::mem::transmute::<*const c_void, LaunchKernel>(entry as *const c_void) };
        Ok(Self {
            launch,
            function,
            dims,
            stream,
            params,
            _keep: keep,
            on_error,
        })
    }

    fn __call__(&self, py: Python<'_>) -> PyResult<()> {
        // SAFETY: the constructor's contract; `_keep` holds the parameter storage alive.
        unsafe {
            enqueue(
                py,
                self.launch,
                self.function,
                self.dims,
                self.stream,
                self.params as _,
                &self.on_error,
            )
        }
    }
}

/// `rust_kernels.calls.signature` in one native call, for the same result: the scalars (each of one of
/// `scalar_types`), then per array `(shape, dtype, get_device(), is_contiguous(), data_ptr() % 16)`; None where a
/// scalar or an array is of another type (`plain`: the array types) or an array is not on a CUDA device.
#[pyfunction]
fn signature<'py>(
    py: Python<'py>,
    arrays: &Bound<'py, PyTuple>,
    scalars: &Bound<'py, PyTuple>,
    plain: &Bound<'py, PyTuple>,
    scalar_types: &Bound<'py, PyTuple>,
) -> PyResult<Option<Bound<'py, PyTuple>>> {
    let among = |value: &Bound<'py, PyAny>, types: &Bound<'py, PyTuple>| {
        let kind = value.get_type();
        types.iter().any(|t| t.is(&kind))
    };
    let mut key = Vec::with_capacity(scalars.len() + arrays.len());
    for scalar in scalars.iter() {
        if !among(&scalar, scalar_types) {
            return Ok(None);
        }
        key.push(scalar);
    }
    for array in arrays.iter() {
        if !among(&array, plain) {
            return Ok(None);
        }
        let device = array.call_method0(intern!(py, "get_device"))?;
        if device.extract::<i64>()? < 0 {
            return Ok(None);
        }
        let address: u64 = array.call_method0(intern!(py, "data_ptr"))?.extract()?;
        let entry = [
            array.getattr(intern!(py, "shape"))?,
            array.getattr(intern!(py, "dtype"))?,
            device,
            array.call_method0(intern!(py, "is_contiguous"))?,
            (address % 16).into_pyobject(py)?.into_any(),
        ];
        key.push(PyTuple::new(py, entry)?.into_any());
    }
    Ok(Some(PyTuple::new(py, key)?))
}

#[pymodule]
fn _host(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(signature, m)?)?;
    m.add_class::<CudaLaunch>()?;
    m.add_class::<checked::CheckedLaunch>()?;
    Ok(())
}
