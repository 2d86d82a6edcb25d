use core::arch::{asm, global_asm};

// Stock rustc cannot place a `static` in shared memory: declare the dynamic shared array in PTX instead.
global_asm!(".extern .shared .align 16 .b8 __rust_kernels_dynamic_shared[];");

#[inline(always)]
pub fn dynamic_shared_mem_base() -> *mut u8 {
    let ptr: *mut u8;
    unsafe { asm!("cvta.shared.u64 {ptr}, __rust_kernels_dynamic_shared;", ptr = out(reg64) ptr) };
    ptr
}
