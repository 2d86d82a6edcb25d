//! `rust_kernels._host`, the package's native extension: every catalogue kernel instance compiled for the CPU,
//! launched through the device-support crate's host emulator (the Python side, rust_kernels.host, checks arguments
//! against the schema first); and `CudaLaunch`, a prepared GPU launch that costs one native call.

use cuda_std::host::{self, Arg, ArgValue, HostKernel, LaunchConfig};
use pyo3::create_exception;
use pyo3::exceptions::{PyKeyError, PyRuntimeError, PyTypeError};
use pyo3::prelude::*;
use std::ffi::c_void;

mod checked;

/// One compiled kernel instance.
pub struct Entry {
    pub id: &'static str,
    /// SHA-256 of the instance's `source`, so Python can refuse a stale build.
    pub source_sha256: &'static str,
    pub kernel: &'static HostKernel,
}

mod catalogue {
    include!(concat!(env!("OUT_DIR"), "/catalogue.rs"));
}

create_exception!(
    _host,
    KernelError,
    PyRuntimeError,
    "A launch in the host emulator failed."
);

type ParamList = Vec<(&'static str, &'static str)>;

/// (id, source SHA-256, [(parameter name, type)]) of every compiled instance.
#[pyfunction]
fn kernels() -> Vec<(&'static str, &'static str, ParamList)> {
    catalogue::CATALOGUE
        .iter()
        .map(|e| {
            (
                e.id,
                e.source_sha256,
                e.kernel.params.iter().map(|p| (p.name, p.ty)).collect(),
            )
        })
        .collect()
}

fn arg(kind: &str, value: &Bound<'_, PyAny>, bytes: usize) -> PyResult<Arg> {
    let value = match kind {
        "ptr" => ArgValue::Ptr(value.extract()?),
        "i32" => ArgValue::I32(value.extract()?),
        "u32" => ArgValue::U32(value.extract()?),
        "i64" => ArgValue::I64(value.extract()?),
        "u64" => ArgValue::U64(value.extract()?),
        "f32" => ArgValue::F32(value.extract()?),
        "f64" => ArgValue::F64(value.extract()?),
        other => return Err(PyTypeError::new_err(format!("unknown argument kind {other:?}"))),
    };
    Ok(Arg { value, bytes })
}

/// Runs kernel `id` to completion; `args` are (kind, value, bytes behind a pointer) triples.
#[pyfunction]
#[pyo3(signature = (id, grid, block, shared_mem, args, checked = true))]
fn launch(
    py: Python<'_>,
    id: &str,
    grid: [u32; 3],
    block: [u32; 3],
    shared_mem: usize,
    args: Vec<(String, Bound<'_, PyAny>, usize)>,
    checked: bool,
) -> PyResult<()> {
    let entry = catalogue::CATALOGUE
        .iter()
        .find(|e| e.id == id)
        .ok_or_else(|| PyKeyError::new_err(format!("no kernel {id:?} in the host catalogue")))?;
    let args = args
        .iter()
        .map(|(kind, value, bytes)| arg(kind, value, *bytes))
        .collect::<PyResult<Vec<_>>>()?;
    let config = LaunchConfig {
        grid,
        block,
        shared_mem_bytes: shared_mem,
        checked,
    };
    // SAFETY: rust_kernels.args checked each pointer argument against the NumPy array it came from, whose `bytes`
    // stay alive for this call (the caller holds the arrays); checked mode bounds-checks every access.
    py.allow_threads(|| unsafe { host::launch(entry.kernel, &config, &args) })
        .map_err(|err| KernelError::new_err(err.to_string()))
}

/// The driver's `cuLaunchKernel`.
type LaunchKernel =
    unsafe extern "C" fn(usize, u32, u32, u32, u32, u32, u32, u32, usize, *mut *mut c_void, *mut *mut c_void) -> i32;

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
        let [gx, gy, gz, bx, by, bz, shared] = self.dims;
        // SAFETY: the constructor's contract; `_keep` holds the parameter storage alive.
        let code = unsafe {
            (self.launch)(
                self.function,
                gx,
                gy,
                gz,
                bx,
                by,
                bz,
                shared,
                self.stream,
                self.params as _,
                std::ptr::null_mut(),
            )
        };
        if code != 0 {
            self.on_error.call1(py, (code,))?;
        }
        Ok(())
    }
}

#[pymodule]
fn _host(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(kernels, m)?)?;
    m.add_function(wrap_pyfunction!(launch, m)?)?;
    m.add_class::<CudaLaunch>()?;
    m.add_class::<checked::CheckedLaunch>()?;
    m.add("KernelError", m.py().get_type::<KernelError>())?;
    Ok(())
}
