//! The type-erased kernel descriptor that `#[kernel]` emits on the host, and its arguments.

use crate::float::{bf16, f16};

/// A kernel parameter: its name (used in error messages and bounds checks) and its Rust type as written in
/// [`FromArg::TYPE`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Param {
    pub name: &'static str,
    pub ty: &'static str,
}

/// A kernel the emulator can launch: `call` runs the kernel body once, as the calling emulated thread. A thread that
/// fails the launch leaves the kernel by unwinding, so `call` and what it calls must be able to unwind (Rust or
/// `extern "C-unwind"` functions: unwinding out of an `extern "C"` function aborts the process).
pub struct HostKernel {
    pub name: &'static str,
    pub params: &'static [Param],
    pub call: unsafe fn(&[ArgValue]),
}

/// One kernel argument, type-erased. Pointers travel as addresses.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum ArgValue {
    Ptr(usize),
    I32(i32),
    U32(u32),
    I64(i64),
    U64(u64),
    F32(f32),
    F64(f64),
}

impl ArgValue {
    /// Whether this value may be passed for a parameter whose type is `ty` (a [`FromArg::TYPE`]).
    pub(crate) fn fits(&self, ty: &str) -> bool {
        match self {
            ArgValue::Ptr(_) => ty.starts_with("*mut ") || ty.starts_with("*const "),
            ArgValue::I32(_) => ty == "i32",
            ArgValue::U32(_) => ty == "u32",
            ArgValue::I64(_) => ty == "i64",
            ArgValue::U64(_) => ty == "u64",
            ArgValue::F32(_) => ty == "f32",
            ArgValue::F64(_) => ty == "f64",
        }
    }
}

/// A kernel parameter type: how it is named in [`Param::ty`] and how it is taken out of an [`ArgValue`].
pub trait FromArg: Copy {
    const TYPE: &'static str;
    /// Panics when `arg` is the wrong variant: `launch` checks every argument first, so that is a bug.
    fn from_arg(arg: &ArgValue) -> Self;
}

#[cold]
fn mismatch(ty: &str, arg: &ArgValue) -> ! {
    panic!("cuda_std::host: {arg:?} passed for a {ty} parameter (launch checks argument types first)")
}

macro_rules! scalar_args {
    ($($t:ident => $variant:ident),* $(,)?) => {$(
        impl FromArg for $t {
            const TYPE: &'static str = stringify!($t);
            fn from_arg(arg: &ArgValue) -> Self {
                match arg {
                    ArgValue::$variant(value) => *value,
                    _ => mismatch(Self::TYPE, arg),
                }
            }
        }
    )*};
}

scalar_args!(i32 => I32, u32 => U32, i64 => I64, u64 => U64, f32 => F32, f64 => F64);

/// An element type kernel pointers may point to, with the [`FromArg::TYPE`] strings of its pointer types.
pub trait PointerTarget {
    const MUT_PTR: &'static str;
    const CONST_PTR: &'static str;
}

macro_rules! pointer_targets {
    ($($t:ident),* $(,)?) => {$(
        impl PointerTarget for $t {
            const MUT_PTR: &'static str = concat!("*mut ", stringify!($t));
            const CONST_PTR: &'static str = concat!("*const ", stringify!($t));
        }
    )*};
}

pointer_targets!(f32, f64, bf16, f16, i32, u32, i64, u64, u8, u16);

// Addresses come from outside Rust (the caller's buffers), hence exposed provenance.
impl<T: PointerTarget> FromArg for *mut T {
    const TYPE: &'static str = T::MUT_PTR;
    fn from_arg(arg: &ArgValue) -> Self {
        match arg {
            ArgValue::Ptr(addr) => std::ptr::with_exposed_provenance_mut(*addr),
            _ => mismatch(Self::TYPE, arg),
        }
    }
}

impl<T: PointerTarget> FromArg for *const T {
    const TYPE: &'static str = T::CONST_PTR;
    fn from_arg(arg: &ArgValue) -> Self {
        match arg {
            ArgValue::Ptr(addr) => std::ptr::with_exposed_provenance(*addr),
            _ => mismatch(Self::TYPE, arg),
        }
    }
}
