use core::arch::asm;

#[inline(always)]
pub unsafe fn fetch_add_f32(ptr: *mut f32, value: f32) -> f32 {
    let old: f32;
    unsafe {
        asm!("atom.add.f32 {old}, [{ptr}], {value};", old = out(reg32) old, ptr = in(reg64) ptr, value = in(reg32) value)
    };
    old
}

#[inline(always)]
pub unsafe fn fetch_add_f64(ptr: *mut f64, value: f64) -> f64 {
    let old: f64;
    unsafe {
        asm!("atom.add.f64 {old}, [{ptr}], {value};", old = out(reg64) old, ptr = in(reg64) ptr, value = in(reg64) value)
    };
    old
}

#[inline(always)]
pub unsafe fn fetch_add_u32(ptr: *mut u32, value: u32) -> u32 {
    let old: u32;
    unsafe {
        asm!("atom.add.u32 {old}, [{ptr}], {value};", old = out(reg32) old, ptr = in(reg64) ptr, value = in(reg32) value)
    };
    old
}

#[inline(always)]
pub fn fence_device() {
    unsafe { asm!("fence.acq_rel.gpu;") };
}
