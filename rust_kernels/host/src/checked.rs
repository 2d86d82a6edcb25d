//! `CheckedLaunch`: a GPU launch that checks every argument against the kernel's schema, packs the parameters and
//! calls the driver's `cuLaunchKernel`, all in one native call. It checks exactly what `rust_kernels.args.pack` and
//! `rust_kernels.args.launch_config` check, in the same order, raising the same exception types with the same
//! messages, so `CudaKernel.launch` can hand its whole body to it.

use pyo3::exceptions::{PyAttributeError, PyTypeError, PyValueError};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyString, PyTuple, PyType};
use pyo3::{PyTraverseError, PyVisit};
use std::ffi::c_void;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::{enqueue, Context, Launcher};

/// Parameters packed on the stack; kernels with more take one heap allocation per call.
const INLINE: usize = 32;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Ptr,
    I32,
    U32,
    I64,
    U64,
    F32,
    F64,
}

impl Kind {
    fn scalar(name: &str) -> Option<Self> {
        Some(match name {
            "i32" => Self::I32,
            "u32" => Self::U32,
            "i64" => Self::I64,
            "u64" => Self::U64,
            "f32" => Self::F32,
            "f64" => Self::F64,
            _ => return None,
        })
    }

    fn name(self) -> &'static str {
        match self {
            Self::Ptr => "ptr",
            Self::I32 => "i32",
            Self::U32 => "u32",
            Self::I64 => "i64",
            Self::U64 => "u64",
            Self::F32 => "f32",
            Self::F64 => "f64",
        }
    }

    /// The inclusive range of an integer scalar (args.INT_RANGES).
    fn range(self) -> Option<(i128, i128)> {
        Some(match self {
            Self::I32 => (i32::MIN.into(), i32::MAX.into()),
            Self::U32 => (0, u32::MAX.into()),
            Self::I64 => (i64::MIN.into(), i64::MAX.into()),
            Self::U64 => (0, u64::MAX.into()),
            _ => return None,
        })
    }
}

/// One element type a pointer argument can point to.
struct Element {
    name: String,
    size: i128,
    /// The canonical Python string of `name`: the dtype and typestr caches map to these objects, so a hit compares
    /// by identity.
    object: Py<PyString>,
}

/// One kernel argument, in ABI order.
struct Param {
    kind: Kind,
    /// Index into `CheckedLaunch::elements` (pointer arguments only).
    element: usize,
    /// How errors name the argument: "kernel: argument i (name: type)".
    place: String,
}

#[derive(Clone, Copy)]
enum GridDim {
    Const(i128),
    /// Any size: the caller's choice (a spec's "*").
    Any,
    /// The value of the integer scalar argument at this ABI index.
    Arg(usize),
}

/// One launch dimension triple as `args._dim3` normalises it; `objects` keeps `int(d)` for messages.
struct Dim3<'py> {
    values: [i128; 3],
    objects: [Option<Bound<'py, PyAny>>; 3],
}

impl Dim3<'_> {
    fn show(&self) -> PyResult<String> {
        let mut parts = Vec::with_capacity(3);
        for object in &self.objects {
            parts.push(match object {
                Some(o) => format_value(o)?,
                None => "1".to_owned(),
            });
        }
        Ok(format!("({})", parts.join(", ")))
    }
}

/// `format(value, "")`, i.e. what an f-string's `{value}` shows.
fn format_value(value: &Bound<'_, PyAny>) -> PyResult<String> {
    // SAFETY: `value` is a live object; PyObject_Format takes a NULL spec as "".
    let formatted = unsafe {
        Bound::from_owned_ptr_or_err(
            value.py(),
            pyo3::ffi::PyObject_Format(value.as_ptr(), std::ptr::null_mut()),
        )?
    };
    Ok(formatted.downcast_into::<PyString>()?.to_str()?.to_owned())
}

/// `repr(value)`.
fn repr_value(value: &Bound<'_, PyAny>) -> PyResult<String> {
    Ok(value.repr()?.to_str()?.to_owned())
}

/// `type(value).__name__`.
fn type_name(value: &Bound<'_, PyAny>) -> PyResult<String> {
    format_value(&value.get_type().getattr(intern!(value.py(), "__name__"))?)
}

fn is_int(value: &Bound<'_, PyAny>) -> bool {
    // SAFETY: a type check on a live object.
    unsafe { pyo3::ffi::PyLong_Check(value.as_ptr()) != 0 }
}

fn is_python_bool(value: &Bound<'_, PyAny>) -> bool {
    // SAFETY: a type check on a live object.
    unsafe { pyo3::ffi::PyBool_Check(value.as_ptr()) != 0 }
}

/// The value of a Python int (`value` must be one, or an int subclass), saturated to i128: every range we compare
/// against lies within [-2**63, 2**64), so saturation never changes a comparison (messages show the object).
fn int_value(value: &Bound<'_, PyAny>) -> PyResult<i128> {
    let py = value.py();
    let mut overflow = 0;
    // SAFETY: `value` is an int; errors are taken from the interpreter right away.
    let small = unsafe { pyo3::ffi::PyLong_AsLongLongAndOverflow(value.as_ptr(), &mut overflow) };
    if overflow == 0 {
        if small == -1 {
            if let Some(err) = PyErr::take(py) {
                return Err(err);
            }
        }
        return Ok(small.into());
    }
    if overflow < 0 {
        return Ok(i128::MIN);
    }
    // SAFETY: as above.
    let large = unsafe { pyo3::ffi::PyLong_AsUnsignedLongLong(value.as_ptr()) };
    if large == u64::MAX && PyErr::take(py).is_some() {
        return Ok(i128::MAX); // beyond 64 bits
    }
    Ok(large.into())
}

/// `int(value)` (PyNumber_Long).
fn to_int<'py>(value: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
    // SAFETY: a new reference or NULL with an exception set.
    unsafe { Bound::from_owned_ptr_or_err(value.py(), pyo3::ffi::PyNumber_Long(value.as_ptr())) }
}

/// A 64-bit address from an int-like object (`operator.index`), or None where it is none.
fn address(value: &Bound<'_, PyAny>) -> PyResult<Option<u64>> {
    let index = if is_int(value) {
        value.clone()
    } else {
        // SAFETY: a new reference or NULL with an exception set.
        match unsafe { Bound::from_owned_ptr_or_err(value.py(), pyo3::ffi::PyNumber_Index(value.as_ptr())) } {
            Ok(index) => index,
            Err(_) => return Ok(None),
        }
    };
    let v = int_value(&index)?;
    Ok(u64::try_from(v).ok())
}

/// Writes a parameter value at the start of its 8-byte slot, at its own width (the driver reads that many bytes).
fn store<T: Copy>(slot: &mut u64, value: T) {
    const { assert!(std::mem::size_of::<T>() <= 8) };
    // SAFETY: T fits in the slot; unaligned writes are allowed.
    unsafe { std::ptr::write_unaligned((slot as *mut u64).cast::<T>(), value) }
}

fn load<T: Copy>(slot: &u64) -> T {
    const { assert!(std::mem::size_of::<T>() <= 8) };
    // SAFETY: as `store`.
    unsafe { std::ptr::read_unaligned((slot as *const u64).cast::<T>()) }
}

/// Runs `f` on `n` values `fill`: on the stack for at most INLINE (every launch), on the heap past that.
pub(crate) fn with_buffer<T: Copy, R>(n: usize, fill: T, f: impl FnOnce(&mut [T]) -> R) -> R {
    let mut inline = [fill; INLINE];
    if n <= INLINE {
        f(&mut inline[..n])
    } else {
        f(&mut vec![fill; n])
    }
}

/// A checked GPU launch of one loaded kernel: calling it checks and packs the arguments by the kernel's schema and
/// calls the driver's `cuLaunchKernel`, in one native call. Nothing is launched when a check fails; no reference to
/// the arguments is kept after the call.
///
/// Constructor (keyword-only):
///
/// ```text
/// CheckedLaunch(*,
///     entry: int,            # address of the driver's cuLaunchKernel (ctypes.cast(fn, c_void_p).value), or of
///                            #   cuLaunchCooperativeKernel with cooperative=True
///     context: tuple[int, int, int, int],  # addresses of cuCtxGetCurrent, cuCtxPushCurrent, cuCtxPopCurrent and
///                            #   the device's primary CUcontext: launches run in it (pushed where another is current)
///     function: int,         # the CUfunction
///     name: str,             # kernel.name: prefix of the sequence / count / grid messages
///     kernel_id: str,        # kernel.id: prefix of the block / shared_mem messages
///     arg_names: Sequence[str],                # names of the arguments, ABI order (the count message)
///     schema: Sequence[tuple[bool, str, str]], # rust_kernels.args._schema(kernel): per argument (is_pointer,
///                                              #   pointee element name or scalar type, message prefix "where")
///     grid: Sequence[int],   # 3 entries x, y, z: a positive constant, 0: any size, or -(1 + i): the value of argument i (ABI
///                            #   index of an integer scalar)
///     block: Sequence[int],  # kernel.block_dim (3 positive ints)
///     min_shared: int,       # kernel.shared_mem_bytes: the default and the least shared_mem accepted
///     max_shared: int,       # the most dynamic shared memory a launch may ask for (<= 2**32 - 1)
///     device: int,           # the device ordinal tensors and memory must be on
///     element_sizes: dict[str, int],   # spec.ELEMENT_SIZES
///     elements: dict[str, str],        # spec.ELEMENTS: str(torch dtype) without "torch." -> element name
///     typestrs: dict[str, str],        # args.TYPESTRS: __cuda_array_interface__ typestr -> element name
///     tensor_type: type | None,        # torch.Tensor, or None: the fast test for tensors (see below)
///     argument_error: type,            # errors.ArgumentError
///     argument_type_error: type,       # errors.ArgumentTypeError
///     pointer_device: Callable[[int], int | None],  # cuda.pointer_device: owner of a __cuda_array_interface__
///                                                   #   pointer (called only for nonzero ones)
///     on_error: Callable[[int], None], # called with the CUresult of a failed launch (raises LaunchError)
///     stream_handle: Callable[[Any], int] | None = None,  # cuda.stream_handle: converts a stream that is neither
///                                                         #   None nor an int (without it: ArgumentTypeError,
///                                                         #   stream_handle's message)
///     allowed_shared: int | None = None,   # dynamic shared memory the function may use without opting in
///                                          #   (default max_shared; only read when allow_shared is given)
///     allow_shared: Callable[[int], None] | None = None,  # opts the function in to more: called (after every
///                                                         #   check, before the launch) when shared_mem >
///                                                         #   allowed_shared, which then becomes shared_mem
///     precheck: Callable[[list], None] | None = None,  # the spec's launch preconditions: called after every other
///                                                      #   check with the packed values (pointers as addresses)
///     cooperative: bool = False)   # a cooperative kernel (every CTA resident at once): entry is then
///                                  #   cuLaunchCooperativeKernel (rust_kernels.cuda refuses a grid the device
///                                  #   cannot hold at once before calling)
/// ```
///
/// Call: `launch(grid, block, args, shared_mem=None, stream=None)` -- the signature of `CudaKernel.launch`.
/// `stream` is None (0, the legacy default stream), an int handle, or anything `stream_handle` converts.
///
/// Checks and messages are those of `args.pack(kernel, args, "cuda", device)` then
/// `args.launch_config(kernel, grid, block, packed, shared_mem)`, then `shared_mem <= max_shared` ("shared_mem:
/// {kernel_id} may use at most {max_shared} bytes on this device, got {shared_mem!r}"), then the stream. Deliberate
/// differences, all on arguments the Python path mishandles: a tensor's `nbytes` is not read; a pointer from
/// `data_ptr()` or `__cuda_array_interface__["data"][0]` that is not an int in [0, 2**64) is an ArgumentError
/// (ctypes would wrap or raise TypeError); a stream handle outside [-2**63, 2**64) is an ArgumentError. An object
/// whose type is (a subclass of) `tensor_type` is taken as a tensor without the `hasattr(data_ptr)`,
/// `hasattr(is_contiguous)` probes, which still decide for every other object.
///
/// Safety contract: `entry` must be the address of the driver's cuLaunchKernel (cuLaunchCooperativeKernel where
/// `cooperative`), `context` the
/// addresses of the driver's context functions named there and a context that stays alive, and `function` a
/// CUfunction of that context that stays loaded while this object lives.
#[pyclass(frozen, module = "rust_kernels._host")]
pub struct CheckedLaunch {
    launch: Launcher,
    context: Context,
    function: usize,
    name: String,
    kernel_id: String,
    count_message: String,
    params: Vec<Param>,
    elements: Vec<Element>,
    grid: [GridDim; 3],
    block: [u32; 3],
    min_shared: u32,
    max_shared: u32,
    device: i64,
    device_object: PyObject,
    /// torch dtype -> canonical element string or None, filled as dtypes are seen (as args._torch_elements).
    dtype_cache: Py<PyDict>,
    element_names: Py<PyDict>,
    /// typestr -> canonical element string.
    typestrs: Py<PyDict>,
    tensor_type: Option<Py<PyType>>,
    np_bool: Option<PyObject>,
    np_integer: Option<PyObject>,
    np_floating: Option<PyObject>,
    sequence: PyObject,
    argument_error: Py<PyType>,
    argument_type_error: Py<PyType>,
    pointer_device: PyObject,
    on_error: PyObject,
    stream_handle: Option<PyObject>,
    allowed_shared: AtomicU64,
    allow_shared: Option<PyObject>,
    /// Called with the packed values (pointers as addresses) after every other check: the spec's preconditions.
    precheck: Option<PyObject>,
}

impl CheckedLaunch {
    fn error(&self, py: Python<'_>, kind: &Py<PyType>, message: String) -> PyErr {
        PyErr::from_type(kind.bind(py).clone(), message)
    }

    fn value_error(&self, py: Python<'_>, message: String) -> PyErr {
        self.error(py, &self.argument_error, message)
    }

    fn type_error(&self, py: Python<'_>, message: String) -> PyErr {
        self.error(py, &self.argument_type_error, message)
    }

    fn is_instance(value: &Bound<'_, PyAny>, kind: &Option<PyObject>) -> PyResult<bool> {
        match kind {
            Some(kind) => value.is_instance(kind.bind(value.py())),
            None => Ok(false),
        }
    }

    /// `isinstance(value, bool | np.bool_)`.
    fn is_bool(&self, value: &Bound<'_, PyAny>) -> PyResult<bool> {
        Ok(is_python_bool(value) || Self::is_instance(value, &self.np_bool)?)
    }

    /// args._scalar.
    fn scalar(&self, param: &Param, value: &Bound<'_, PyAny>, slot: &mut u64) -> PyResult<()> {
        let py = value.py();
        let kind = param.kind;
        let exact_int = value.is_exact_instance_of::<pyo3::types::PyInt>();
        if let Some((low, high)) = kind.range() {
            let v = if exact_int {
                int_value(value)?
            } else {
                if self.is_bool(value)? {
                    return Err(self.type_error(py, format!("{}: expected a number, got a bool", param.place)));
                }
                if !(is_int(value) || Self::is_instance(value, &self.np_integer)?) {
                    let got = type_name(value)?;
                    return Err(self.type_error(py, format!("{}: expected an integer, got {got}", param.place)));
                }
                int_value(&to_int(value)?)?
            };
            if !(low..=high).contains(&v) {
                let shown = format_value(value)?;
                let kind = kind.name();
                return Err(self.value_error(
                    py,
                    format!("{}: {shown} is out of the {kind} range [{low}, {high}]", param.place),
                ));
            }
            match kind {
                Kind::I32 => store(slot, v as i32),
                Kind::U32 => store(slot, v as u32),
                Kind::I64 => store(slot, v as i64),
                _ => store(slot, v as u64),
            }
            return Ok(());
        }
        let float = if value.is_exact_instance_of::<pyo3::types::PyFloat>() {
            value.clone()
        } else {
            if !exact_int && self.is_bool(value)? {
                return Err(self.type_error(py, format!("{}: expected a number, got a bool", param.place)));
            }
            let number = exact_int
                || is_int(value)
                || value.is_instance_of::<pyo3::types::PyFloat>()
                || Self::is_instance(value, &self.np_integer)?
                || Self::is_instance(value, &self.np_floating)?;
            if !number {
                let got = type_name(value)?;
                return Err(self.type_error(py, format!("{}: expected a float, got {got}", param.place)));
            }
            // SAFETY: a new reference or NULL with an exception set (float(value)).
            unsafe { Bound::from_owned_ptr_or_err(py, pyo3::ffi::PyNumber_Float(value.as_ptr()))? }
        };
        // SAFETY: `float` is a float.
        let v = unsafe { pyo3::ffi::PyFloat_AsDouble(float.as_ptr()) };
        if kind == Kind::F32 {
            if v.is_finite() && v.abs() > f64::from(f32::MAX) {
                let shown = format_value(&float)?;
                return Err(self.value_error(py, format!("{}: {shown} does not fit in an f32", param.place)));
            }
            store(slot, v as f32);
        } else {
            store(slot, v);
        }
        Ok(())
    }

    /// args._cuda_pointer.
    fn pointer(&self, param: &Param, value: &Bound<'_, PyAny>, slot: &mut u64) -> PyResult<()> {
        let py = value.py();
        let place = &param.place;
        if is_int(value) && !is_python_bool(value) {
            let v = int_value(value)?;
            let Ok(v) = u64::try_from(v) else {
                let shown = format_value(value)?;
                return Err(self.value_error(
                    py,
                    format!("{place}: a raw device pointer must be a non-negative 64-bit address, got {shown}"),
                ));
            };
            store(slot, v);
            return Ok(());
        }
        let tensor = match &self.tensor_type {
            Some(tensor_type)
                // SAFETY: type pointers of live objects.
                if unsafe { pyo3::ffi::PyType_IsSubtype(value.get_type_ptr(), tensor_type.as_ptr().cast()) } != 0 =>
            {
                true
            }
            _ => value.hasattr(intern!(py, "data_ptr"))? && value.hasattr(intern!(py, "is_contiguous"))?,
        };
        if tensor {
            return self.tensor(param, value, slot);
        }
        let interface = match value.getattr(intern!(py, "__cuda_array_interface__")) {
            Ok(interface) => interface,
            Err(err) if err.is_instance_of::<PyAttributeError>(py) => py.None().into_bound(py),
            Err(err) => return Err(err),
        };
        if interface.is_none() {
            let kind = if value.hasattr(intern!(py, "__array_interface__"))? {
                "a host (NumPy) array".to_owned()
            } else {
                type_name(value)?
            };
            return Err(self.type_error(
                py,
                format!(
                    "{place}: expected a device array (__cuda_array_interface__) or a raw device pointer, got {kind}"
                ),
            ));
        }
        let typestr = interface.get_item(intern!(py, "typestr"))?;
        let known = self.typestrs.bind(py).get_item(&typestr)?;
        let data = interface.get_item(intern!(py, "data"))?.get_item(0)?;
        let shape = interface.get_item(intern!(py, "shape"))?;
        let strides = interface.call_method1(intern!(py, "get"), (intern!(py, "strides"),))?;
        let element = &self.elements[param.element];
        let matches = match &known {
            Some(known) => known.is(&element.object),
            None => !typestr.ne(element.object.bind(py))?,
        };
        if !matches {
            let got = format_value(known.as_ref().unwrap_or(&typestr))?;
            return Err(self.value_error(py, format!("{place}: expected an array of {}, got {got}", element.name)));
        }
        if !self.contiguous(&shape, &strides, element.size)? {
            let tuple = PyTuple::new(py, strides.try_iter()?.collect::<PyResult<Vec<_>>>()?)?;
            let shown = format_value(tuple.as_any())?;
            return Err(self.value_error(
                py,
                format!("{place}: expected a C-contiguous array, got strides {shown}"),
            ));
        }
        let Some(pointer) = address(&data)? else {
            let shown = format_value(&data)?;
            return Err(self.value_error(
                py,
                format!("{place}: the __cuda_array_interface__ data pointer must be a 64-bit address, got {shown}"),
            ));
        };
        if pointer != 0 {
            let owner = self.pointer_device.bind(py).call1((pointer,))?;
            if owner.ne(self.device_object.bind(py))? {
                let shown = format_value(&owner)?;
                let device = self.device;
                return Err(self.value_error(
                    py,
                    format!("{place}: expected memory on device {device}, got memory on device {shown}"),
                ));
            }
        }
        store(slot, pointer);
        Ok(())
    }

    /// args._contiguous.
    fn contiguous(&self, shape: &Bound<'_, PyAny>, strides: &Bound<'_, PyAny>, itemsize: i128) -> PyResult<bool> {
        if strides.is_none() {
            return Ok(true);
        }
        let (ns, nt) = (shape.len()?, strides.len()?);
        let mut expected = itemsize;
        for k in 1..=ns.min(nt) {
            let size = int_value(&to_int(&shape.get_item(ns - k)?)?)?;
            let stride = int_value(&to_int(&strides.get_item(nt - k)?)?)?;
            if size != 1 && stride != expected {
                return Ok(false);
            }
            expected = expected.saturating_mul(size);
        }
        match ns.cmp(&nt) {
            std::cmp::Ordering::Equal => Ok(true),
            std::cmp::Ordering::Greater => Err(PyValueError::new_err("zip() argument 2 is shorter than argument 1")),
            std::cmp::Ordering::Less => Err(PyValueError::new_err("zip() argument 2 is longer than argument 1")),
        }
    }

    /// args._torch_pointer.
    fn tensor(&self, param: &Param, value: &Bound<'_, PyAny>, slot: &mut u64) -> PyResult<()> {
        let py = value.py();
        let place = &param.place;
        let element = &self.elements[param.element];
        let dtype = value.getattr(intern!(py, "dtype"))?;
        let cache = self.dtype_cache.bind(py);
        let got = match cache.get_item(&dtype)? {
            Some(got) => got,
            None => {
                let text = dtype.str()?;
                let text = text.to_str()?;
                let key = text.strip_prefix("torch.").unwrap_or(text);
                let got = match self.element_names.bind(py).get_item(key)? {
                    Some(name) => self.canonical(&name)?,
                    None => py.None().into_bound(py),
                };
                cache.set_item(&dtype, &got)?;
                got
            }
        };
        if !got.is(&element.object) {
            let shown = format_value(&dtype)?;
            return Err(self.value_error(
                py,
                format!("{place}: expected a tensor of {}, got dtype {shown}", element.name),
            ));
        }
        let on = value.call_method0(intern!(py, "get_device"))?;
        let same = if on.is_exact_instance_of::<pyo3::types::PyInt>() {
            int_value(&on)? == i128::from(self.device)
        } else {
            !on.ne(self.device_object.bind(py))?
        };
        if !same {
            let shown = format_value(&value.getattr(intern!(py, "device"))?)?;
            let device = self.device;
            return Err(self.value_error(
                py,
                format!("{place}: expected a tensor on cuda:{device}, got one on {shown}"),
            ));
        }
        if !value.call_method0(intern!(py, "is_contiguous"))?.is_truthy()? {
            let strides = value.call_method0(intern!(py, "stride"))?;
            let tuple = PyTuple::new(py, strides.try_iter()?.collect::<PyResult<Vec<_>>>()?)?;
            let shown = format_value(tuple.as_any())?;
            return Err(self.value_error(
                py,
                format!("{place}: expected a contiguous tensor, got strides {shown}"),
            ));
        }
        let pointer = value.call_method0(intern!(py, "data_ptr"))?;
        let Some(pointer) = address(&pointer)? else {
            let shown = format_value(&pointer)?;
            return Err(self.value_error(
                py,
                format!("{place}: data_ptr() returned {shown}, not a 64-bit address"),
            ));
        };
        store(slot, pointer);
        Ok(())
    }

    /// The canonical object of an element name, or the name itself where it is not one of ours.
    fn canonical<'py>(&self, name: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
        let py = name.py();
        if let Ok(text) = name.downcast::<PyString>() {
            let text = text.to_str()?;
            if let Some(element) = self.elements.iter().find(|e| e.name == text) {
                return Ok(element.object.bind(py).clone().into_any());
            }
        }
        Ok(name.clone())
    }

    fn check(&self, index: usize, value: &Bound<'_, PyAny>, slot: &mut u64) -> PyResult<()> {
        let param = &self.params[index];
        if param.kind == Kind::Ptr {
            self.pointer(param, value, slot)
        } else {
            self.scalar(param, value, slot)
        }
    }

    /// args.pack.
    fn pack(&self, args: &Bound<'_, PyAny>, slots: &mut [u64]) -> PyResult<()> {
        let py = args.py();
        let n = self.params.len();
        if let Ok(list) = args.downcast_exact::<PyList>() {
            self.check_count(py, list.len())?;
            for (i, slot) in slots.iter_mut().enumerate() {
                self.check(i, &list.get_item(i)?, slot)?;
            }
            return Ok(());
        }
        if let Ok(tuple) = args.downcast_exact::<PyTuple>() {
            self.check_count(py, tuple.len())?;
            for (i, slot) in slots.iter_mut().enumerate() {
                let value = tuple.get_borrowed_item(i)?;
                self.check(i, &value, slot)?;
            }
            return Ok(());
        }
        // SAFETY: type checks on a live object.
        let text =
            unsafe { pyo3::ffi::PyUnicode_Check(args.as_ptr()) != 0 || pyo3::ffi::PyBytes_Check(args.as_ptr()) != 0 };
        if text || !args.is_instance(self.sequence.bind(py))? {
            let got = type_name(args)?;
            return Err(self.type_error(py, format!("{}: args must be a sequence, got {got}", self.name)));
        }
        self.check_count(py, args.len()?)?;
        let mut values = args.try_iter()?;
        for (i, slot) in slots.iter_mut().enumerate() {
            match values.next() {
                Some(value) => self.check(i, &value?, slot)?,
                None => return Err(PyValueError::new_err("zip() argument 2 is shorter than argument 1")),
            }
        }
        if values.next().transpose()?.is_some() {
            return Err(PyValueError::new_err("zip() argument 2 is longer than argument 1"));
        }
        debug_assert_eq!(slots.len(), n);
        Ok(())
    }

    fn check_count(&self, py: Python<'_>, got: usize) -> PyResult<()> {
        if got != self.params.len() {
            return Err(self.value_error(py, format!("{}{got}", self.count_message)));
        }
        Ok(())
    }

    /// args._dim3.
    fn dim3<'py>(&self, what: &str, value: &Bound<'py, PyAny>) -> PyResult<Dim3<'py>> {
        let py = value.py();
        let invalid = || -> PyResult<PyErr> {
            let shown = repr_value(value)?;
            Ok(self.value_error(py, format!("{what}: expected an int or 1 to 3 ints, got {shown}")))
        };
        let mut out = Dim3 {
            values: [1; 3],
            objects: [None, None, None],
        };
        if is_int(value) || Self::is_instance(value, &self.np_integer)? {
            if is_python_bool(value) {
                return Err(invalid()?);
            }
            let int = if value.is_exact_instance_of::<pyo3::types::PyInt>() {
                value.clone()
            } else {
                to_int(value)?
            };
            out.values[0] = int_value(&int)?;
            out.objects[0] = Some(int);
        } else {
            let dims = match value.downcast_exact::<PyTuple>() {
                Ok(tuple) => tuple.clone(),
                // SAFETY: a new reference or NULL with an exception set (tuple(value)); what is no sequence is refused
                // like a wrong dimension (args._dim3).
                Err(_) => {
                    match unsafe { Bound::from_owned_ptr_or_err(py, pyo3::ffi::PySequence_Tuple(value.as_ptr())) } {
                        Ok(tuple) => unsafe { tuple.downcast_into_unchecked::<PyTuple>() },
                        Err(_) => return Err(invalid()?),
                    }
                }
            };
            if !(1..=3).contains(&dims.len()) {
                return Err(invalid()?);
            }
            for d in dims.iter() {
                if is_python_bool(&d) || !(is_int(&d) || Self::is_instance(&d, &self.np_integer)?) {
                    return Err(invalid()?);
                }
            }
            for (k, d) in dims.iter().enumerate() {
                let int = if d.is_exact_instance_of::<pyo3::types::PyInt>() {
                    d
                } else {
                    to_int(&d)?
                };
                out.values[k] = int_value(&int)?;
                out.objects[k] = Some(int);
            }
        }
        if out.values.iter().any(|&v| v < 1) {
            let shown = repr_value(value)?;
            return Err(self.value_error(py, format!("{what}: every dimension must be at least 1, got {shown}")));
        }
        Ok(out)
    }

    /// The value of integer scalar argument `index`, read back from its slot.
    fn scalar_value(&self, index: usize, slots: &[u64]) -> i128 {
        let slot = &slots[index];
        match self.params[index].kind {
            Kind::I32 => load::<i32>(slot).into(),
            Kind::U32 => load::<u32>(slot).into(),
            Kind::I64 => load::<i64>(slot).into(),
            _ => load::<u64>(slot).into(),
        }
    }

    /// args.launch_config, then the upper bound of shared memory; returns (grid, block, shared) for the driver.
    fn config(
        &self,
        grid: &Bound<'_, PyAny>,
        block: &Bound<'_, PyAny>,
        shared_mem: Option<&Bound<'_, PyAny>>,
        slots: &[u64],
    ) -> PyResult<([u32; 3], u32)> {
        let py = grid.py();
        let grid3 = self.dim3("grid", grid)?;
        let block3 = self.dim3("block", block)?;
        if block3.values != self.block.map(i128::from) {
            let [x, y, z] = self.block;
            return Err(self.value_error(
                py,
                format!(
                    "block: {} is written for a CTA of ({x}, {y}, {z}), got {}",
                    self.kernel_id,
                    block3.show()?
                ),
            ));
        }
        let expected = self.grid.map(|d| match d {
            GridDim::Const(v) => Some(v),
            GridDim::Arg(i) => Some(self.scalar_value(i, slots)),
            GridDim::Any => None,
        });
        if expected
            .iter()
            .zip(grid3.values)
            .any(|(e, g)| e.is_some_and(|e| e != g))
        {
            let [x, y, z] = expected.map(|e| e.map_or("any".to_string(), |e| e.to_string()));
            return Err(self.value_error(
                py,
                format!(
                    "grid: {} expects ({x}, {y}, {z}) for these arguments, got {}",
                    self.name,
                    grid3.show()?
                ),
            ));
        }
        let shared = match shared_mem {
            None => self.min_shared,
            Some(value) => {
                let (min, max) = (self.min_shared, self.max_shared);
                let v = if (is_int(value) || Self::is_instance(value, &self.np_integer)?) && !is_python_bool(value) {
                    Some(int_value(&to_int(value)?)?)
                } else {
                    None
                };
                match v {
                    Some(v) if v >= i128::from(min) && v <= i128::from(max) => v as u32,
                    Some(v) if v > i128::from(max) => {
                        let shown = repr_value(value)?;
                        let id = &self.kernel_id;
                        let message =
                            format!("shared_mem: {id} may use at most {max} bytes on this device, got {shown}");
                        return Err(self.value_error(py, message));
                    }
                    _ => {
                        let shown = repr_value(value)?;
                        let id = &self.kernel_id;
                        let message = format!("shared_mem: {id} needs at least {min} bytes, got {shown}");
                        return Err(self.value_error(py, message));
                    }
                }
            }
        };
        // Both equal values that passed the checks: positive, and the grid's come from 32-bit scalars or constants.
        let dims = grid3.values.map(|v| u32::try_from(v).unwrap_or(u32::MAX));
        Ok((dims, shared))
    }

    /// cuda.stream_handle.
    fn stream(&self, stream: Option<&Bound<'_, PyAny>>) -> PyResult<usize> {
        let Some(stream) = stream else { return Ok(0) };
        let py = stream.py();
        let handle = if is_int(stream) && !is_python_bool(stream) {
            stream.clone()
        } else if let Some(convert) = &self.stream_handle {
            let handle = convert.bind(py).call1((stream,))?;
            if !is_int(&handle) {
                let got = type_name(&handle)?;
                return Err(PyTypeError::new_err(format!(
                    "stream: stream_handle returned {got}, not an int"
                )));
            }
            handle
        } else {
            let got = type_name(stream)?;
            return Err(self.type_error(
                py,
                format!("stream: expected None, an int handle or a CUDA stream object, got {got}"),
            ));
        };
        let v = int_value(&handle)?;
        if let Ok(v) = u64::try_from(v) {
            return Ok(v as usize);
        }
        if let Ok(v) = i64::try_from(v) {
            return Ok(v as u64 as usize); // as ctypes.c_void_p wraps a negative handle
        }
        let shown = format_value(&handle)?;
        Err(self.value_error(
            py,
            format!("stream: a CUstream handle must fit in 64 bits, got {shown}"),
        ))
    }
}

fn extract_dims(what: &str, value: &Bound<'_, PyAny>) -> PyResult<Vec<i64>> {
    let dims: Vec<i64> = value.extract()?;
    if dims.len() != 3 {
        let message = format!("CheckedLaunch: {what} must have 3 entries, got {}", dims.len());
        return Err(PyValueError::new_err(message));
    }
    Ok(dims)
}

#[pymethods]
impl CheckedLaunch {
    #[new]
    #[pyo3(signature = (
        *, entry, context, function, name, kernel_id, arg_names, schema, grid, block, min_shared, max_shared, device,
        element_sizes, elements, typestrs, tensor_type, argument_error, argument_type_error, pointer_device, on_error,
        stream_handle = None, allowed_shared = None, allow_shared = None, precheck = None, cooperative = false
    ))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        entry: usize,
        context: (usize, usize, usize, usize),
        function: usize,
        name: String,
        kernel_id: String,
        arg_names: Vec<String>,
        schema: Vec<(bool, String, String)>,
        grid: &Bound<'_, PyAny>,
        block: &Bound<'_, PyAny>,
        min_shared: u32,
        max_shared: u32,
        device: i64,
        element_sizes: &Bound<'_, PyDict>,
        elements: &Bound<'_, PyDict>,
        typestrs: &Bound<'_, PyDict>,
        tensor_type: Option<Bound<'_, PyType>>,
        argument_error: Bound<'_, PyType>,
        argument_type_error: Bound<'_, PyType>,
        pointer_device: PyObject,
        on_error: PyObject,
        stream_handle: Option<PyObject>,
        allowed_shared: Option<u32>,
        allow_shared: Option<PyObject>,
        precheck: Option<PyObject>,
        cooperative: bool,
    ) -> PyResult<Self> {
        let bad = |message: String| PyValueError::new_err(format!("CheckedLaunch: {message}"));
        if entry == 0 || function == 0 {
            return Err(PyTypeError::new_err("CheckedLaunch needs non-null entry and function"));
        }
        if arg_names.len() != schema.len() {
            return Err(bad(format!(
                "{} argument names for {} schema entries",
                arg_names.len(),
                schema.len()
            )));
        }
        if min_shared > max_shared {
            return Err(bad(format!("min_shared {min_shared} > max_shared {max_shared}")));
        }
        let mut table = Vec::new();
        for (key, size) in element_sizes.iter() {
            let key: String = key.extract()?;
            let size: i128 = size.extract()?;
            if size < 1 {
                return Err(bad(format!("element {key} has size {size}")));
            }
            let object = PyString::intern(py, &key).unbind();
            table.push(Element {
                name: key,
                size,
                object,
            });
        }
        let mut params = Vec::with_capacity(schema.len());
        for (is_pointer, ty, place) in schema {
            let (kind, element) = if is_pointer {
                let element = table
                    .iter()
                    .position(|e| e.name == ty)
                    .ok_or_else(|| bad(format!("{place}: unknown element {ty:?}")))?;
                (Kind::Ptr, element)
            } else {
                let kind = Kind::scalar(&ty).ok_or_else(|| bad(format!("{place}: unknown scalar type {ty:?}")))?;
                (kind, 0)
            };
            params.push(Param { kind, element, place });
        }
        let grid_entries = extract_dims("grid", grid)?;
        let mut grid_dims = [GridDim::Const(1); 3];
        for (slot, &d) in grid_dims.iter_mut().zip(&grid_entries) {
            *slot = if d >= 1 {
                GridDim::Const(d.into())
            } else if d == 0 {
                GridDim::Any
            } else {
                let index = usize::try_from(-(d + 1)).map_err(|_| bad(format!("grid entry {d}")))?;
                let ok = params
                    .get(index)
                    .is_some_and(|p| matches!(p.kind, Kind::I32 | Kind::U32 | Kind::I64 | Kind::U64));
                if !ok {
                    return Err(bad(format!("grid entry {d} names no integer scalar argument")));
                }
                GridDim::Arg(index)
            };
        }
        let block_entries = extract_dims("block", block)?;
        let mut block_dims = [1u32; 3];
        for (slot, &d) in block_dims.iter_mut().zip(&block_entries) {
            *slot = u32::try_from(d)
                .ok()
                .filter(|&d| d >= 1)
                .ok_or_else(|| bad(format!("block entry {d}")))?;
        }
        let this = Self {
            // SAFETY: the caller passes the address of cuLaunchKernel, or of cuLaunchCooperativeKernel with
            // `cooperative` (the constructor's contract).
            launch: unsafe { Launcher::new(entry, cooperative) },
            context: Context::new(context)?,
            function,
            count_message: format!(
                "{name} takes {} arguments ({}), got ",
                params.len(),
                arg_names.join(", ")
            ),
            name,
            kernel_id,
            params,
            elements: table,
            grid: grid_dims,
            block: block_dims,
            min_shared,
            max_shared,
            device,
            device_object: device.into_pyobject(py)?.into_any().unbind(),
            dtype_cache: PyDict::new(py).unbind(),
            element_names: elements.copy()?.unbind(),
            typestrs: PyDict::new(py).unbind(),
            tensor_type: tensor_type.map(Bound::unbind),
            np_bool: None,
            np_integer: None,
            np_floating: None,
            sequence: py.import("collections.abc")?.getattr("Sequence")?.unbind(),
            argument_error: argument_error.unbind(),
            argument_type_error: argument_type_error.unbind(),
            pointer_device,
            on_error,
            stream_handle,
            allowed_shared: AtomicU64::new(allowed_shared.unwrap_or(max_shared).into()),
            allow_shared,
            precheck,
        };
        let this = match py.import("numpy") {
            Ok(np) => Self {
                np_bool: Some(np.getattr("bool_")?.unbind()),
                np_integer: Some(np.getattr("integer")?.unbind()),
                np_floating: Some(np.getattr("floating")?.unbind()),
                ..this
            },
            Err(_) => this,
        };
        let cache = this.typestrs.bind(py);
        for (key, value) in typestrs.iter() {
            cache.set_item(key, this.canonical(&value)?)?;
        }
        Ok(this)
    }

    /// The Python objects held (callbacks may refer back to an owner of this launch): for the cycle collector.
    fn __traverse__(&self, visit: PyVisit<'_>) -> Result<(), PyTraverseError> {
        for object in [
            &self.device_object,
            &self.sequence,
            &self.pointer_device,
            &self.on_error,
        ] {
            visit.call(object)?;
        }
        for object in [
            &self.np_bool,
            &self.np_integer,
            &self.np_floating,
            &self.stream_handle,
            &self.allow_shared,
            &self.precheck,
        ] {
            visit.call(object)?;
        }
        visit.call(&self.dtype_cache)?;
        visit.call(&self.element_names)?;
        visit.call(&self.typestrs)?;
        visit.call(&self.tensor_type)?;
        visit.call(&self.argument_error)?;
        visit.call(&self.argument_type_error)?;
        for element in &self.elements {
            visit.call(&element.object)?;
        }
        Ok(())
    }

    /// Checks and packs the launch, then enqueues it on `stream` (no synchronisation). See the class doc.
    #[pyo3(signature = (grid, block, args, shared_mem = None, stream = None))]
    fn __call__(
        &self,
        py: Python<'_>,
        grid: &Bound<'_, PyAny>,
        block: &Bound<'_, PyAny>,
        args: &Bound<'_, PyAny>,
        shared_mem: Option<&Bound<'_, PyAny>>,
        stream: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<()> {
        with_buffer(self.params.len(), 0u64, |slots| {
            self.pack(args, slots)?;
            let (grid3, shared) = self.config(grid, block, shared_mem, slots)?;
            let stream = self.stream(stream)?;
            if let Some(precheck) = &self.precheck {
                let values = PyList::empty(py);
                for (index, (param, slot)) in self.params.iter().zip(slots.iter()).enumerate() {
                    match param.kind {
                        Kind::F32 => values.append(load::<f32>(slot))?,
                        Kind::F64 => values.append(load::<f64>(slot))?,
                        Kind::Ptr => values.append(*slot)?,
                        _ => values.append(self.scalar_value(index, slots))?,
                    }
                }
                precheck.bind(py).call1((values,))?;
            }
            if let Some(allow) = &self.allow_shared {
                if u64::from(shared) > self.allowed_shared.load(Ordering::Acquire) {
                    allow.bind(py).call1((shared,))?;
                    self.allowed_shared.fetch_max(shared.into(), Ordering::AcqRel);
                }
            }
            self.send(py, grid3, shared, stream, slots)
        })
    }
}

/// What the ops' fast path (crate::fast) uses: packing one value without checks, and launching packed slots.
impl CheckedLaunch {
    pub(crate) fn param_count(&self) -> usize {
        self.params.len()
    }

    pub(crate) fn is_pointer(&self, index: usize) -> bool {
        self.params[index].kind == Kind::Ptr
    }

    /// Packs `value` as parameter `index` *without checking it*: a tensor (`data_ptr()`) or an int for a pointer, a
    /// Python number for a scalar.
    pub(crate) fn pack_unchecked(&self, index: usize, value: &Bound<'_, PyAny>, slot: &mut u64) -> PyResult<()> {
        match self.params[index].kind {
            Kind::Ptr if value.is_exact_instance_of::<pyo3::types::PyInt>() => store(slot, value.extract::<u64>()?),
            Kind::Ptr => store(
                slot,
                value.call_method0(intern!(value.py(), "data_ptr"))?.extract::<u64>()?,
            ),
            Kind::I32 => store(slot, value.extract::<i32>()?),
            Kind::U32 => store(slot, value.extract::<u32>()?),
            Kind::I64 => store(slot, value.extract::<i64>()?),
            Kind::U64 => store(slot, value.extract::<u64>()?),
            Kind::F32 => store(slot, value.extract::<f64>()? as f32),
            Kind::F64 => store(slot, value.extract::<f64>()?),
        }
        Ok(())
    }

    /// Enqueues the launch of packed `slots` (one per parameter) on `stream` with the kernel's default shared memory,
    /// *without checking anything*.
    pub(crate) fn send_unchecked(
        &self,
        py: Python<'_>,
        grid: [u32; 3],
        stream: usize,
        slots: &mut [u64],
    ) -> PyResult<()> {
        debug_assert_eq!(slots.len(), self.params.len());
        self.send(py, grid, self.min_shared, stream, slots)
    }

    /// cuLaunchKernel with the packed `slots`.
    fn send(&self, py: Python<'_>, grid: [u32; 3], shared: u32, stream: usize, slots: &mut [u64]) -> PyResult<()> {
        with_buffer(slots.len(), std::ptr::null_mut::<c_void>(), |params| {
            for (param, slot) in params.iter_mut().zip(slots.iter_mut()) {
                *param = (slot as *mut u64).cast();
            }
            let [gx, gy, gz] = grid;
            let [bx, by, bz] = self.block;
            // SAFETY: the constructor's contract; `params` points at one live slot per parameter for the duration of
            // the call, and the driver copies the values before returning.
            unsafe {
                enqueue(
                    py,
                    self.launch,
                    self.function,
                    [gx, gy, gz, bx, by, bz, shared],
                    stream,
                    params.as_mut_ptr(),
                    &self.context,
                    &self.on_error,
                )
            }
        })
    }
}
