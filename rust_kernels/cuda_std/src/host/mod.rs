//! Host emulation of the device API (every target but nvptx64), so that kernels run on the CPU.
//!
//! [`launch`] runs a kernel's CTAs one after another, or all at once in a cooperative launch (for `grid::sync`). Each
//! thread of a CTA is a fiber of the launching OS thread (on x86_64 Linux; an OS thread elsewhere), so `sync_threads`
//! and the warp operations are real rendezvous with PTX semantics; threads that have returned no longer take part, as
//! on the hardware. Shared memory starts as 0xFF bytes (NaN floats). A checked launch bounds-checks every element
//! access against the pointer arguments and shared memory. Out-of-bounds accesses, deadlocks and panics in kernel code
//! fail the launch with a [`LaunchError`] naming the kernel, instead of corrupting memory or hanging.
//! [`cancel_launches`] interrupts the launches in progress (Ctrl-C); a launch asks for at most [`MAX_SHARED_MEM_BYTES`]
//! of shared memory. [`abi`] is the C interface that [`export_host_launch!`](crate::export_host_launch) gives a kernel
//! library loaded from Python.

// `rk_emulator_threads` (set through RUSTFLAGS, by the tests alone) runs CTAs as OS threads on x86_64 Linux too.
#![allow(unexpected_cfgs)]

pub mod abi;
pub mod atomic;
pub mod float;
pub mod grid;
pub mod math;
pub mod mem;
pub mod shared;
pub mod thread;
pub mod warp;

mod context;
mod cta;
#[cfg(all(target_arch = "x86_64", target_os = "linux", not(rk_emulator_threads)))]
mod fiber;
mod kernel;
mod launch;
#[cfg(any(not(all(target_arch = "x86_64", target_os = "linux")), rk_emulator_threads))]
mod os_thread;

#[cfg(test)]
mod tests;

pub use context::cancel_launches;
pub use kernel::{ArgValue, FromArg, HostKernel, Param, PointerTarget};
pub use launch::{
    launch, Arg, LaunchConfig, LaunchError, LaunchErrorKind, MAX_COOPERATIVE_THREADS, MAX_SHARED_MEM_BYTES,
    MAX_THREADS_PER_BLOCK,
};
