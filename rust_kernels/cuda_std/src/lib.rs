//! The device-support crate: the subset of rust-cuda's `cuda_std` API that generated kernels use, for stock rustc.
//!
//! Every public function has two implementations selected by target: `device` (nvptx64: PTX special registers,
//! inline asm) and `host` (an emulator that runs each CTA's threads concurrently, with real barriers, grid
//! barriers, warp exchanges, per-CTA shared memory and bounds-checked memory access). Generated kernels contain no
//! asm and no target checks; those live here alone.
#![cfg_attr(target_arch = "nvptx64", no_std)]
#![cfg_attr(
    target_arch = "nvptx64",
    feature(stdarch_nvptx, asm_experimental_arch, core_float_math)
)]

#[doc(hidden)]
pub use cuda_std_macros::host_kernel_static as __host_kernel_static;
pub use cuda_std_macros::kernel;

// `#[kernel]` expands to `::cuda_std::...` paths; this lets the crate's own tests use it.
#[cfg(test)]
extern crate self as cuda_std;

mod export;

pub mod atomic;
pub mod float;
pub mod grid;
mod math;
pub mod mem;
pub mod pack;
pub mod reduce;
pub mod row;
pub mod shared;
pub mod thread;
pub mod warp;

#[cfg(target_arch = "nvptx64")]
mod device;
#[cfg(not(target_arch = "nvptx64"))]
pub mod host;

#[cfg(target_arch = "nvptx64")]
use device as arch;
#[cfg(not(target_arch = "nvptx64"))]
use host as arch;

pub mod prelude {
    pub use crate::float::{bf16, f16, Accum, FastMath, Float, GpuFloat};
    pub use crate::kernel;
    pub use crate::mem::{DevicePtr, StoreAcc};
    pub use crate::pack::{Lanes, Pack, Pack8};
    pub use crate::reduce::{self, MaxSum, Welford};
    pub use crate::{atomic, grid, pack, row, shared, thread, warp};
}
