//! `rust_kernels._host`, the package's native extension: `CheckedLaunch`, a checked GPU launch in one native call,
//! `CudaLaunch`, a prepared one, and `FastCalls`, the ops' fast path. (Kernels run in the host emulator from libraries built per kernel instance: see rust_kernels.host.)

use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use std::ffi::c_void;

mod checked;
mod fast;

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

#[pymodule]
fn _host(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<CudaLaunch>()?;
    m.add_class::<checked::CheckedLaunch>()?;
    m.add_class::<fast::FastCalls>()?;
    Ok(())
}
