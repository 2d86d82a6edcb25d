//! `FastCalls`: an op's fast path on PyTorch tensors. What an op call decides (its checks passed, the plan, the
//! loaded kernel, the grid, the kernel's scalar arguments) depends only on the call's *signature*: its scalar
//! arguments, the stream it launches on and, per array, its shape, dtype, device, contiguity and address modulo 16.
//! The op decides a signature once, through its checked path, and `remember`s its launches (one, or several in
//! order: a reduction then an elementwise pass); a later call of that signature is one native call here: the
//! signature, the output allocations (`empty_like`, or `new_empty` of a remembered shape and dtype), the packing
//! and cuLaunchKernel per launch, with no checks.

use pyo3::exceptions::PyValueError;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{IntoPyDict, PyBool, PyFloat, PyInt, PyString, PyTuple};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use crate::checked::{with_buffer, CheckedLaunch};

/// What the fast path calls in the array library (PyTorch's, or a test's stand-in).
struct Library {
    /// The array types that have signatures (exactly these types: subclasses take the checked path).
    plain: Py<PyTuple>,
    /// `empty_like(array)`: an output.
    empty_like: PyObject,
    /// `current_stream(device)`: the CUstream handle a call launches on when given none.
    current_stream: PyObject,
}

/// Where a kernel parameter's value comes from.
#[derive(Clone, Copy)]
enum Slot {
    Input(usize),
    Output(usize),
    /// Packed once, at `remember`.
    Value(u64),
}

/// One launch of a decided call.
struct Launch {
    launch: Py<CheckedLaunch>,
    grid: [u32; 3],
    slots: Vec<Slot>,
}

/// How an output is allocated: like input `input`, with `shape` and `dtype` where they differ from its.
struct Like {
    input: usize,
    shape: Option<Py<PyTuple>>,
    dtype: Option<PyObject>,
}

/// `remember`'s description of an output: (input, shape, dtype).
type LikeArg = (usize, Option<Py<PyTuple>>, Option<PyObject>);
/// `remember`'s description of a launch: (launch, grid, layout, tail).
type LaunchArg<'py> = (
    Py<CheckedLaunch>,
    (u32, u32, u32),
    Vec<Option<i64>>,
    Bound<'py, PyTuple>,
);

/// A decided call: its outputs and its launches, in order.
struct Entry {
    like: Vec<Like>,
    launches: Vec<Launch>,
    /// What the key and the packed values refer to (dtypes, workspaces): alive while the entry is.
    _keep: Vec<PyObject>,
}

/// A call's signature: the key, and per array its address.
struct Signature {
    key: Vec<u64>,
    addresses: Vec<u64>,
    dtypes: Vec<PyObject>,
    device: i64,
}

/// Scalar tags in a key: a value's type is part of it (True and 1 are different calls).
const NONE: u64 = 0;
const BOOL: u64 = 1;
const INT: u64 = 2;
const FLOAT: u64 = 3;
const STR: u64 = 4;

/// One op's decided launches by signature (at most `capacity`: a program cycling through more starts afresh).
///
/// ```text
/// FastCalls(capacity: int, library: Callable[[], tuple | None])
///     # library() -> (plain array types, empty_like, current_stream) once the array library is imported, else None
/// calls(arrays: tuple, scalars: tuple, stream: int | None = None) -> tuple | None
///     # the outputs of the launch decided for this signature, or None (no decision: take the checked path)
/// calls.remember(arrays, scalars, stream: int, like, launches) -> bool
///     # after the checked launches succeeded for this call: output j is empty_like(arrays[i]) for
///     # like[j] = (i, None, None), arrays[i].new_empty(shape, dtype=dtype) for (i, shape, dtype) (a None dtype:
///     # the input's); launches: [(launch: CheckedLaunch, grid, layout, tail)], run in order, parameter k of each
///     # input layout[k] (>= 0), output -1 - layout[k], or (None) the next of its `tail` values
/// ```
/// An array may be None (an optional input left out): it is part of the signature and binds no parameter. A
/// non-contiguous array's strides are part of its signature (channels_last and NCHW differ).
#[pyclass(frozen, module = "rust_kernels._host")]
pub struct FastCalls {
    capacity: usize,
    resolve: PyObject,
    library: OnceLock<Library>,
    entries: Mutex<HashMap<Vec<u64>, Arc<Entry>>>,
}

impl FastCalls {
    fn library(&self, py: Python<'_>) -> PyResult<Option<&Library>> {
        if let Some(library) = self.library.get() {
            return Ok(Some(library));
        }
        let found = self.resolve.call0(py)?;
        if found.is_none(py) {
            return Ok(None);
        }
        let (plain, empty_like, current_stream): (Py<PyTuple>, PyObject, PyObject) = found.extract(py)?;
        let _ = self.library.set(Library {
            plain,
            empty_like,
            current_stream,
        });
        Ok(self.library.get())
    }

    /// The signature of a call, or None where it has no fast path: a scalar not None, bool, int (i64), float or
    /// str, an array not of a plain type or not on a CUDA device.
    fn signature(
        py: Python<'_>,
        library: &Library,
        arrays: &Bound<'_, PyTuple>,
        scalars: &Bound<'_, PyTuple>,
    ) -> PyResult<Option<Signature>> {
        let mut key = Vec::with_capacity(2 + 2 * scalars.len() + 10 * arrays.len());
        key.push(scalars.len() as u64);
        for scalar in scalars.iter() {
            let (tag, bits) = if scalar.is_none() {
                (NONE, 0)
            } else if scalar.is_exact_instance_of::<PyBool>() {
                (BOOL, u64::from(scalar.is_truthy()?))
            } else if scalar.is_exact_instance_of::<PyInt>() {
                match scalar.extract::<i64>() {
                    Ok(value) => (INT, value as u64),
                    Err(_) => return Ok(None),
                }
            } else if scalar.is_exact_instance_of::<PyFloat>() {
                (FLOAT, scalar.extract::<f64>()?.to_bits())
            } else if let Ok(text) = scalar.downcast_exact::<PyString>() {
                // Its length, then its bytes in 8-byte words: the key holds the whole string.
                let bytes = text.to_str()?.as_bytes();
                key.extend([STR, bytes.len() as u64]);
                key.extend(bytes.chunks(8).map(|chunk| {
                    let mut word = [0u8; 8];
                    word[..chunk.len()].copy_from_slice(chunk);
                    u64::from_le_bytes(word)
                }));
                continue;
            } else {
                return Ok(None);
            };
            key.extend([tag, bits]);
        }
        key.push(arrays.len() as u64);
        let plain = library.plain.bind(py);
        let mut addresses = Vec::with_capacity(arrays.len());
        let mut dtypes = Vec::with_capacity(arrays.len());
        let mut first_device = -1;
        for array in arrays.iter() {
            if array.is_none() {
                key.push(u64::MAX); // no device ordinal is this: an absent array
                addresses.push(0);
                continue;
            }
            let kind = array.get_type();
            if !plain.iter().any(|t| t.is(&kind)) {
                return Ok(None);
            }
            let device: i64 = array.call_method0(intern!(py, "get_device"))?.extract()?;
            if device < 0 {
                return Ok(None);
            }
            if first_device < 0 {
                first_device = device;
            }
            let address: u64 = array.call_method0(intern!(py, "data_ptr"))?.extract()?;
            let dtype = array.getattr(intern!(py, "dtype"))?;
            let contiguous = array.call_method0(intern!(py, "is_contiguous"))?.is_truthy()?;
            // A lazily negated view holds the un-negated values: it must never replay a plain tensor's launch.
            let negated = array.call_method0(intern!(py, "is_neg"))?.is_truthy()?;
            let shape = array.getattr(intern!(py, "shape"))?;
            let shape = shape.downcast::<PyTuple>()?;
            key.extend([
                device as u64,
                dtype.as_ptr() as u64, // kept alive by the entry: never another object's address while it is
                u64::from(contiguous) | u64::from(negated) << 1,
                address % 16,
                shape.len() as u64,
            ]);
            for extent in shape.iter() {
                key.push(extent.extract::<i64>()? as u64);
            }
            if !contiguous {
                let strides = array.call_method0(intern!(py, "stride"))?;
                for stride in strides.downcast::<PyTuple>()?.iter() {
                    key.push(stride.extract::<i64>()? as u64);
                }
            }
            addresses.push(address);
            dtypes.push(dtype.unbind());
        }
        Ok(Some(Signature {
            key,
            addresses,
            dtypes,
            device: first_device,
        }))
    }

    /// Where each parameter of `launch` comes from, checked against the kernel: `layout[k]` an input (>= 0, not
    /// None), an output (-1 - j) for a pointer parameter, or None for the next of the `tail` values (packed now).
    fn slots(
        arrays: &Bound<'_, PyTuple>,
        outputs: usize,
        launch: &CheckedLaunch,
        layout: &[Option<i64>],
        tail: &Bound<'_, PyTuple>,
    ) -> PyResult<Vec<Slot>> {
        let count = launch.param_count();
        let tails = layout.iter().filter(|source| source.is_none()).count();
        if layout.len() != count || tails != tail.len() {
            return Err(PyValueError::new_err(format!(
                "FastCalls.remember: {} layout entries ({tails} of them tail) and {} tail values for {count} \
                 parameters",
                layout.len(),
                tail.len()
            )));
        }
        let mut slots = Vec::with_capacity(count);
        let mut values = tail.iter();
        for (k, &source) in layout.iter().enumerate() {
            let Some(source) = source else {
                let value = values.next().expect("counted above");
                let mut bits = 0u64;
                launch.pack_unchecked(k, &value, &mut bits)?;
                slots.push(Slot::Value(bits));
                continue;
            };
            let slot = match usize::try_from(source) {
                Ok(i) if i < arrays.len() && !arrays.get_borrowed_item(i)?.is_none() => Slot::Input(i),
                Err(_) if ((-1 - source) as usize) < outputs => Slot::Output((-1 - source) as usize),
                _ => {
                    return Err(PyValueError::new_err(format!(
                        "FastCalls.remember: layout[{k}] = {source} is no array"
                    )))
                }
            };
            if !launch.is_pointer(k) {
                return Err(PyValueError::new_err(format!(
                    "FastCalls.remember: parameter {k} is not a pointer"
                )));
            }
            slots.push(slot);
        }
        Ok(slots)
    }

    /// The signature with the stream: the one given, or the library's current stream on the arrays' device.
    fn keyed(
        &self,
        py: Python<'_>,
        arrays: &Bound<'_, PyTuple>,
        scalars: &Bound<'_, PyTuple>,
        stream: Option<u64>,
    ) -> PyResult<Option<(Signature, u64)>> {
        let Some(library) = self.library(py)? else {
            return Ok(None);
        };
        let Some(mut signature) = Self::signature(py, library, arrays, scalars)? else {
            return Ok(None);
        };
        let stream = match stream {
            Some(stream) => stream,
            None if signature.device >= 0 => library.current_stream.call1(py, (signature.device,))?.extract(py)?,
            None => 0, // no arrays: the legacy default stream, as the checked path has it
        };
        signature.key.push(stream);
        Ok(Some((signature, stream)))
    }
}

#[pymethods]
impl FastCalls {
    #[new]
    fn new(capacity: usize, library: PyObject) -> PyResult<Self> {
        if capacity == 0 {
            return Err(PyValueError::new_err("FastCalls: capacity must be positive"));
        }
        Ok(Self {
            capacity,
            resolve: library,
            library: OnceLock::new(),
            entries: Mutex::new(HashMap::new()),
        })
    }

    #[pyo3(signature = (arrays, scalars, stream = None))]
    fn __call__<'py>(
        &self,
        py: Python<'py>,
        arrays: &Bound<'py, PyTuple>,
        scalars: &Bound<'py, PyTuple>,
        stream: Option<u64>,
    ) -> PyResult<Option<Bound<'py, PyTuple>>> {
        let Some((signature, stream)) = self.keyed(py, arrays, scalars, stream)? else {
            return Ok(None);
        };
        let Some(entry) = self.entries.lock().unwrap().get(&signature.key).cloned() else {
            return Ok(None);
        };
        let library = self.library.get().expect("resolved by keyed");
        let mut outputs = Vec::with_capacity(entry.like.len());
        let mut addresses = Vec::with_capacity(entry.like.len());
        for Like { input, shape, dtype } in &entry.like {
            let like = arrays.get_borrowed_item(*input)?;
            let output = match (shape, dtype) {
                (None, None) => library.empty_like.bind(py).call1((like,))?,
                (None, Some(dtype)) => {
                    let options = [(intern!(py, "dtype"), dtype.bind(py))].into_py_dict(py)?;
                    library.empty_like.bind(py).call((like,), Some(&options))?
                }
                (Some(shape), None) => like.call_method1(intern!(py, "new_empty"), (shape.bind(py),))?,
                (Some(shape), Some(dtype)) => {
                    let options = [(intern!(py, "dtype"), dtype.bind(py))].into_py_dict(py)?;
                    like.call_method(intern!(py, "new_empty"), (shape.bind(py),), Some(&options))?
                }
            };
            let address: u64 = output.call_method0(intern!(py, "data_ptr"))?.extract()?;
            if !address.is_multiple_of(16) {
                return Ok(None); // the plan assumed 16-byte aligned outputs (a pluggable allocator may give less)
            }
            outputs.push(output);
            addresses.push(address);
        }
        for launch in &entry.launches {
            with_buffer(launch.slots.len(), 0u64, |values| {
                for (value, slot) in values.iter_mut().zip(&launch.slots) {
                    *value = match *slot {
                        Slot::Input(i) => signature.addresses[i],
                        Slot::Output(j) => addresses[j],
                        Slot::Value(bits) => bits,
                    };
                }
                launch
                    .launch
                    .get()
                    .send_unchecked(py, launch.grid, stream as usize, values)
            })?;
        }
        Ok(Some(PyTuple::new(py, outputs)?))
    }

    /// See the class doc. Returns whether the call was kept (a call with no signature is not).
    fn remember(
        &self,
        py: Python<'_>,
        arrays: &Bound<'_, PyTuple>,
        scalars: &Bound<'_, PyTuple>,
        stream: u64,
        like: Vec<LikeArg>,
        launches: Vec<LaunchArg<'_>>,
    ) -> PyResult<bool> {
        if let Some((input, ..)) = like
            .iter()
            .find(|(i, ..)| *i >= arrays.len() || arrays.get_borrowed_item(*i).is_ok_and(|a| a.is_none()))
        {
            return Err(PyValueError::new_err(format!(
                "FastCalls.remember: no input {input} to allocate like"
            )));
        }
        if launches.is_empty() {
            return Err(PyValueError::new_err("FastCalls.remember: no launch"));
        }
        let mut decided = Vec::with_capacity(launches.len());
        let mut keep = Vec::new();
        for (launch, grid, layout, tail) in launches {
            let slots = Self::slots(arrays, like.len(), launch.get(), &layout, &tail)?;
            keep.push(tail.into_any().unbind());
            decided.push(Launch {
                launch,
                grid: [grid.0, grid.1, grid.2],
                slots,
            });
        }
        let Some((signature, _)) = self.keyed(py, arrays, scalars, Some(stream))? else {
            return Ok(false);
        };
        keep.extend(signature.dtypes);
        let like = like
            .into_iter()
            .map(|(input, shape, dtype)| Like { input, shape, dtype })
            .collect();
        let entry = Arc::new(Entry {
            like,
            launches: decided,
            _keep: keep,
        });
        let forgotten = {
            let mut entries = self.entries.lock().unwrap();
            let full = entries.len() >= self.capacity;
            let forgotten = if full {
                std::mem::take(&mut *entries)
            } else {
                HashMap::new()
            };
            entries.insert(signature.key, entry);
            forgotten
        };
        drop(forgotten); // outside the lock: dropping may run Python code
        Ok(true)
    }

    fn __len__(&self) -> usize {
        self.entries.lock().unwrap().len()
    }

    /// Forgets every decision.
    fn clear(&self) {
        let forgotten = std::mem::take(&mut *self.entries.lock().unwrap());
        drop(forgotten); // outside the lock: dropping may run Python code
    }
}
