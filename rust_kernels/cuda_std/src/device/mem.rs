use core::arch::asm;

/// The address of element `i` (the host version checks bounds; the device trusts the kernel).
#[inline(always)]
pub unsafe fn element<T>(ptr: *mut T, i: usize, _access: &'static str) -> *mut T {
    unsafe { ptr.add(i) }
}

/// One 16-byte store (`st.v4.b32`, any state space) of `bits` at `ptr`, 16-byte aligned: a store the compiler cannot
/// split. (Written as its lanes, a pack's last store may be merged with an identical one on another path and the rest
/// split into 8-, 4- and 2-byte stores.)
#[inline(always)]
pub unsafe fn store_16(ptr: *mut [u32; 4], bits: [u32; 4]) {
    let [a, b, c, d] = bits;
    unsafe {
        asm!("st.v4.b32 [{ptr}], {{{a}, {b}, {c}, {d}}};", ptr = in(reg64) ptr, a = in(reg32) a, b = in(reg32) b,
             c = in(reg32) c, d = in(reg32) d, options(nostack))
    };
}
