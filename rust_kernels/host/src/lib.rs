//! `rust_kernels._host`, the package's native extension: `CheckedLaunch`, a checked GPU launch in one native call,
//! `CudaLaunch`, a prepared one, and `FastCalls`, the ops' fast path (cooperative kernels through
//! `cuLaunchCooperativeKernel`). (Kernels run in the host emulator from libraries built per kernel instance: see rust_kernels.host.)

use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use std::ffi::c_void;

mod checked;
mod fast;

/// The driver's `cuLaunchKernel`.
type LaunchKernel =
    unsafe extern "C" fn(usize, u32, u32, u32, u32, u32, u32, u32, usize, *mut *mut c_void, *mut *mut c_void) -> i32;
/// The driver's `cuLaunchCooperativeKernel` (every CTA resident at once, for `grid::sync`): no `extra` argument.
type LaunchCooperativeKernel =
    unsafe extern "C" fn(usize, u32, u32, u32, u32, u32, u32, u32, usize, *mut *mut c_void) -> i32;

/// How a kernel is launched: `cuLaunchKernel`, or `cuLaunchCooperativeKernel` for a cooperative kernel.
#[derive(Clone, Copy)]
enum Launcher {
    Plain(LaunchKernel),
    Cooperative(LaunchCooperativeKernel),
}

impl Launcher {
    /// # Safety
    /// `entry` is the address of the driver's cuLaunchCooperativeKernel where `cooperative`, else of cuLaunchKernel.
    unsafe fn new(entry: usize, cooperative: bool) -> Self {
        let entry = entry as *const c_void;
        // SAFETY: the caller's contract: a function of that signature.
        unsafe {
            if cooperative {
                Self::Cooperative(std::mem::transmute::<*const c_void, LaunchCooperativeKernel>(entry))
            } else {
                Self::Plain(std::mem::transmute::<*const c_void, LaunchKernel>(entry))
            }
        }
    }
}

/// The driver's `cuCtxGetCurrent` and `cuCtxPopCurrent` (which write a CUcontext), and `cuCtxPushCurrent`.
type ContextOut = unsafe extern "C" fn(*mut usize) -> i32;
type ContextIn = unsafe extern "C" fn(usize) -> i32;

/// The context a launch runs in: the device's primary context, with the driver calls that make it current.
#[derive(Clone, Copy)]
struct Context {
    get: ContextOut,
    push: ContextIn,
    pop: ContextOut,
    context: usize,
}

impl Context {
    /// From (cuCtxGetCurrent, cuCtxPushCurrent, cuCtxPopCurrent, CUcontext), as rust_kernels.cuda gives them.
    fn new(entries: (usize, usize, usize, usize)) -> PyResult<Self> {
        let (get, push, pop, context) = entries;
        if get == 0 || push == 0 || pop == 0 || context == 0 {
            return Err(PyTypeError::new_err(
                "context: needs non-null driver entries and context",
            ));
        }
        // SAFETY: the callers pass the addresses ctypes resolved for these libcuda functions (the constructors'
        // contract).
        unsafe {
            Ok(Self {
                get: std::mem::transmute::<usize, ContextOut>(get),
                push: std::mem::transmute::<usize, ContextIn>(push),
                pop: std::mem::transmute::<usize, ContextOut>(pop),
                context,
            })
        }
    }

    /// Runs `send` (a driver call returning a CUresult) in this context: as things are where it is current already
    /// (one cuCtxGetCurrent), else pushed for the call and popped after, so the thread's current context (PyTorch's
    /// current device, or none) is left as it was.
    ///
    /// # Safety
    /// The entries are the driver's functions (Context::new's contract).
    unsafe fn within(&self, send: impl FnOnce() -> i32) -> i32 {
        let mut current = 0usize;
        // SAFETY: the driver writes one CUcontext.
        let code = unsafe { (self.get)(&mut current) };
        if code != 0 {
            return code;
        }
        if current == self.context {
            return send();
        }
        // SAFETY: a retained primary context; popped below.
        let code = unsafe { (self.push)(self.context) };
        if code != 0 {
            return code;
        }
        let sent = send();
        let mut popped = 0usize;
        // SAFETY: pops the context pushed above.
        let code = unsafe { (self.pop)(&mut popped) };
        if sent != 0 {
            sent
        } else {
            code
        }
    }
}

/// Calls `launch` (cuLaunchKernel or cuLaunchCooperativeKernel) for `function` with `dims` (grid x, y, z, block x, y,
/// z, dynamic shared memory bytes) on `stream`, in `context`. A nonzero CUresult goes to `on_error`, which raises the
/// package's LaunchError.
///
/// # Safety
/// `launch` holds the driver's function, `function` a CUfunction of `context`, and `params` points at one live
/// pointer per kernel parameter for the duration of the call (the driver copies the values).
#[allow(clippy::too_many_arguments)]
unsafe fn enqueue(
    py: Python<'_>,
    launch: Launcher,
    function: usize,
    dims: [u32; 7],
    stream: usize,
    params: *mut *mut c_void,
    context: &Context,
    on_error: &PyObject,
) -> PyResult<()> {
    let [gx, gy, gz, bx, by, bz, shared] = dims;
    // SAFETY: the caller's contract.
    let code = unsafe {
        context.within(|| match launch {
            Launcher::Plain(f) => f(
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
            ),
            Launcher::Cooperative(f) => f(function, gx, gy, gz, bx, by, bz, shared, stream, params),
        })
    };
    if code != 0 {
        on_error.call1(py, (code,))?;
    }
    Ok(())
}

/// One checked, packed GPU launch (rust_kernels.cuda builds it): calling it calls `cuLaunchKernel` directly, with no
/// argument conversion, which is what makes a prepared launch cheaper than ctypes or cuda.core.
#[pyclass(frozen)]
struct CudaLaunch {
    launch: Launcher,
    context: Context,
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
    /// `entry` is the address of the driver's cuLaunchKernel (cuLaunchCooperativeKernel where `cooperative`),
    /// `context` (cuCtxGetCurrent, cuCtxPushCurrent, cuCtxPopCurrent, the device's primary CUcontext) the addresses
    /// and context a launch runs in, `function` a CUfunction of that context, `dims` grid x, y, z, block x, y, z and
    /// the dynamic shared-memory bytes, and `params` the address of the kernel's parameter array inside `keep`.
    #[new]
    #[pyo3(signature = (entry, context, function, dims, stream, params, keep, on_error, cooperative = false))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        entry: usize,
        context: (usize, usize, usize, usize),
        function: usize,
        dims: [u32; 7],
        stream: usize,
        params: usize,
        keep: PyObject,
        on_error: PyObject,
        cooperative: bool,
    ) -> PyResult<Self> {
        if entry == 0 || function == 0 || params == 0 {
            return Err(PyTypeError::new_err(
                "CudaLaunch needs non-null entry, function and params",
            ));
        }
        // SAFETY: rust_kernels.cuda passes the address ctypes resolved for libcuda's cuLaunchKernel, or
        // cuLaunchCooperativeKernel with `cooperative`.
        let launch = unsafe { Launcher::new(entry, cooperative) };
        Ok(Self {
            launch,
            context: Context::new(context)?,
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
                &self.context,
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
