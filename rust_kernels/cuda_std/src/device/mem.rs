/// The address of element `i` (the host version checks bounds; the device trusts the kernel).
#[inline(always)]
pub unsafe fn element<T>(ptr: *mut T, i: usize, _access: &'static str) -> *mut T {
    unsafe { ptr.add(i) }
}
