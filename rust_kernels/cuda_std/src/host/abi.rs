//! The C ABI of a host-kernel library: what [`export_host_launch!`](crate::export_host_launch) exports, which
//! documents it. The exported functions are thin wrappers of the functions here.

use super::kernel::{ArgValue, HostKernel, Param};
use super::launch::{self, panic_message, Arg, LaunchConfig, LaunchErrorKind, MAX_SHARED_MEM_BYTES};
use std::ffi::{c_char, CString};
use std::panic::{self, AssertUnwindSafe};
use std::ptr;
use std::sync::OnceLock;

/// `rk_host_abi_version()`: bumped on any change of the exported functions or of [`RawArg`].
pub const ABI_VERSION: u32 = 2;

/// `rk_host_launch`'s flags: bounds-check every element access.
pub const FLAG_CHECKED: u32 = 1;
/// `rk_host_launch`'s flags: run every CTA at once (`grid::sync`).
pub const FLAG_COOPERATIVE: u32 = 2;

/// [`RawArg::kind`] of a pointer: `bits` is the address, `bytes` the extent of the buffer behind it.
pub const KIND_PTR: u32 = 0;
pub const KIND_I32: u32 = 1;
pub const KIND_U32: u32 = 2;
pub const KIND_I64: u32 = 3;
pub const KIND_U64: u32 = 4;
pub const KIND_F32: u32 = 5;
pub const KIND_F64: u32 = 6;

/// `rk_host_launch` succeeded.
pub const OK: i32 = 0;
/// Refused before anything ran: the arguments, the dimensions, the shared-memory size or `flags` do not fit.
pub const INVALID: i32 = 1;
/// Kernel code failed while running (out-of-bounds or misaligned access, threads that never meet at a barrier, a
/// panic in kernel code, a thread that could not start). Buffers may be partly written.
pub const FAILED: i32 = 2;
/// `rk_host_cancel()` was called during the launch. Buffers may be partly written.
pub const INTERRUPTED: i32 = 3;
/// A panic in the emulator outside kernel code (a bug in `cuda_std`), caught at the C boundary.
pub const PANICKED: i32 = 4;

/// One kernel argument as C passes it (24 bytes: `u32`, 4 bytes of padding, `u64`, `u64`).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RawArg {
    /// One of the `KIND_*` codes.
    pub kind: u32,
    /// Pointers: the extent in bytes of the buffer behind the pointer (checked launches bound every access by it).
    /// Scalars: 0.
    pub bytes: u64,
    /// Pointers: the address. Scalars: the value's bit pattern, zero-extended (an `i32` -1 is `0xFFFF_FFFF`, an
    /// `f32` is its `to_bits()`).
    pub bits: u64,
}

type Failure = (i32, String);

/// `rk_host_launch`: converts the arguments, launches `kernel` and reports the outcome (see the macro's docs).
///
/// # Safety
/// As documented for `rk_host_launch` in [`export_host_launch!`](crate::export_host_launch).
#[allow(clippy::too_many_arguments)]
pub unsafe fn launch(
    kernel: &HostKernel,
    args: *const RawArg,
    n_args: usize,
    dims: *const u32,
    shared_mem_bytes: u64,
    flags: u32,
    error: *mut u8,
    error_capacity: usize,
) -> i32 {
    unsafe {
        guarded(error, error_capacity, || {
            launch_raw(kernel, args, n_args, dims, shared_mem_bytes, flags)
        })
    }
}

/// Runs `body`, writes its error (or an empty string) into `error` and returns its code; a panic in `body`
/// becomes [`PANICKED`] with the panic's message instead of crossing the C boundary.
///
/// # Safety
/// `error` is null or writable for `error_capacity` bytes.
pub unsafe fn guarded(error: *mut u8, error_capacity: usize, body: impl FnOnce() -> Result<(), Failure>) -> i32 {
    let (code, message) = match panic::catch_unwind(AssertUnwindSafe(body)) {
        Ok(Ok(())) => (OK, String::new()),
        Ok(Err(failure)) => failure,
        Err(payload) => {
            let message = format!("cuda_std host launch: internal panic: {}", panic_message(&*payload));
            // Dropping a payload may itself panic; it is a few bytes, on a path that should never be taken.
            std::mem::forget(payload);
            (PANICKED, message)
        }
    };
    unsafe { write_message(error, error_capacity, &message) };
    code
}

/// Writes `message` NUL-terminated into `error`, truncated to `capacity - 1` bytes at a character boundary (so
/// the text stays valid UTF-8). Nothing is written when `error` is null or `capacity` is 0.
///
/// # Safety
/// `error` is null or writable for `capacity` bytes.
pub unsafe fn write_message(error: *mut u8, capacity: usize, message: &str) {
    if error.is_null() || capacity == 0 {
        return;
    }
    let mut len = message.len().min(capacity - 1);
    while !message.is_char_boundary(len) {
        len -= 1;
    }
    unsafe {
        ptr::copy_nonoverlapping(message.as_ptr(), error, len);
        error.add(len).write(0);
    }
}

unsafe fn launch_raw(
    kernel: &HostKernel,
    args: *const RawArg,
    n_args: usize,
    dims: *const u32,
    shared_mem_bytes: u64,
    flags: u32,
) -> Result<(), Failure> {
    let name = kernel.name;
    let invalid = |message: String| (INVALID, format!("kernel {name}: {message}"));
    if n_args != kernel.params.len() {
        return Err((
            INVALID,
            format!(
                "kernel {name} takes {} arguments but {n_args} were passed",
                kernel.params.len()
            ),
        ));
    }
    if dims.is_null() {
        return Err(invalid(
            "dims is NULL (it must point to 6 u32: grid x, y, z, block x, y, z)".into(),
        ));
    }
    if n_args > 0 && args.is_null() {
        return Err(invalid(format!("args is NULL but n_args is {n_args}")));
    }
    let raw = if n_args == 0 {
        &[][..]
    } else {
        unsafe { std::slice::from_raw_parts(args, n_args) }
    };
    let args = raw
        .iter()
        .zip(kernel.params)
        .enumerate()
        .map(|(i, (raw, param))| convert(i, param, raw).map_err(&invalid))
        .collect::<Result<Vec<Arg>, Failure>>()?;
    let dims = unsafe { std::slice::from_raw_parts(dims, 6) };
    // A size beyond usize is beyond the limit too.
    let shared_mem_bytes = usize::try_from(shared_mem_bytes).unwrap_or(usize::MAX);
    if flags & !(FLAG_CHECKED | FLAG_COOPERATIVE) != 0 {
        return Err(invalid(format!(
            "flags is {flags:#x}; only bits 0 (checked) and 1 (cooperative) may be set"
        )));
    }
    let config = LaunchConfig {
        grid: [dims[0], dims[1], dims[2]],
        block: [dims[3], dims[4], dims[5]],
        shared_mem_bytes,
        checked: flags & FLAG_CHECKED != 0,
        cooperative: flags & FLAG_COOPERATIVE != 0,
    };
    // SAFETY: the caller vouches for the buffers (`rk_host_launch`'s contract).
    unsafe { launch::launch(kernel, &config, &args) }.map_err(|err| {
        let code = match err.kind() {
            LaunchErrorKind::Invalid => INVALID,
            LaunchErrorKind::Failed => FAILED,
            LaunchErrorKind::Interrupted => INTERRUPTED,
        };
        (code, err.to_string())
    })
}

/// Argument `i` as the emulator takes it. Types are checked by the launch, against the parameter's type.
fn convert(i: usize, param: &Param, raw: &RawArg) -> Result<Arg, String> {
    let what = || format!("argument {i} ({}, {})", param.name, param.ty);
    let narrow = |kind: &str| {
        u32::try_from(raw.bits).map_err(|_| {
            format!(
                "{}: bits {:#x} do not fit a {kind} (pass the value's bit pattern, zero-extended)",
                what(),
                raw.bits
            )
        })
    };
    if raw.kind != KIND_PTR && raw.bytes != 0 {
        return Err(format!("{}: bytes is {} for a scalar; it must be 0", what(), raw.bytes));
    }
    let value = match raw.kind {
        KIND_PTR => {
            let (Ok(addr), Ok(bytes)) = (usize::try_from(raw.bits), usize::try_from(raw.bytes)) else {
                return Err(format!(
                    "{}: address or extent beyond this machine's address space",
                    what()
                ));
            };
            if addr.checked_add(bytes).is_none() {
                return Err(format!(
                    "{}: {bytes} bytes at {addr:#x} wrap around the address space",
                    what()
                ));
            }
            if addr == 0 && bytes > 0 {
                return Err(format!("{}: a null pointer with an extent of {bytes} bytes", what()));
            }
            return Ok(Arg {
                value: ArgValue::Ptr(addr),
                bytes,
            });
        }
        KIND_I32 => ArgValue::I32(narrow("i32")? as i32),
        KIND_U32 => ArgValue::U32(narrow("u32")?),
        KIND_I64 => ArgValue::I64(raw.bits as i64),
        KIND_U64 => ArgValue::U64(raw.bits),
        KIND_F32 => ArgValue::F32(f32::from_bits(narrow("f32")?)),
        KIND_F64 => ArgValue::F64(f64::from_bits(raw.bits)),
        other => {
            return Err(format!(
                "{}: unknown kind {other} (0 ptr, 1 i32, 2 u32, 3 i64, 4 u64, 5 f32, 6 f64)",
                what()
            ))
        }
    };
    Ok(Arg { value, bytes: 0 })
}

/// `rk_host_max_shared_mem_bytes()`.
pub fn max_shared_mem_bytes() -> u64 {
    MAX_SHARED_MEM_BYTES as u64
}

/// The kernel's name and parameters as NUL-terminated strings, made on first use; one per exported kernel.
pub struct KernelStrings {
    strings: OnceLock<Strings>,
}

struct Strings {
    name: CString,
    params: Vec<(CString, CString)>,
}

/// A C string of `s` (which never holds a NUL: names are Rust identifiers and types).
fn c_string(s: &str) -> CString {
    CString::new(s.replace('\0', "?")).unwrap_or_default()
}

impl KernelStrings {
    #[allow(clippy::new_without_default)]
    pub const fn new() -> KernelStrings {
        KernelStrings {
            strings: OnceLock::new(),
        }
    }

    fn get(&self, kernel: &HostKernel) -> &Strings {
        self.strings.get_or_init(|| Strings {
            name: c_string(kernel.name),
            params: kernel
                .params
                .iter()
                .map(|param| (c_string(param.name), c_string(param.ty)))
                .collect(),
        })
    }

    /// `rk_host_kernel_name()`.
    pub fn kernel_name(&self, kernel: &HostKernel) -> *const c_char {
        self.get(kernel).name.as_ptr()
    }

    /// `rk_host_param_name(i)`: null when `i` is out of range.
    pub fn param_name(&self, kernel: &HostKernel, i: usize) -> *const c_char {
        self.get(kernel)
            .params
            .get(i)
            .map_or(ptr::null(), |(name, _)| name.as_ptr())
    }

    /// `rk_host_param_type(i)`: null when `i` is out of range.
    pub fn param_type(&self, kernel: &HostKernel, i: usize) -> *const c_char {
        self.get(kernel)
            .params
            .get(i)
            .map_or(ptr::null(), |(_, ty)| ty.as_ptr())
    }
}
