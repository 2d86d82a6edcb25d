//! nvptx64 implementations: PTX special registers, `bar.sync`, `shfl.sync`, `atom`, dynamic shared memory.
//! This is the only place in the project that holds inline asm.

pub mod atomic;
pub mod float;
pub mod grid;
pub mod math;
pub mod mem;
pub mod shared;
pub mod thread;
pub mod warp;

#[panic_handler]
fn panic(_: &core::panic::PanicInfo) -> ! {
    unsafe { core::arch::nvptx::trap() }
}
