use super::context::try_with_current;

/// The address of element `i`. In a checked launch the element must lie inside the argument buffer or the shared
/// memory `ptr` points into, or the launch fails; unchecked launches, and calls outside a launch, trust the caller.
/// In a launch, checked or not, the thread leaves the kernel if the launch was cancelled.
///
/// # Safety
/// As for `ptr.add(i)`.
#[inline]
pub unsafe fn element<T>(ptr: *mut T, i: usize, access: &'static str) -> *mut T {
    try_with_current(|current| {
        if let Some(current) = current {
            current.poll_cancel();
            if current.cta.launch.checked {
                let (size, align) = (size_of::<T>(), align_of::<T>());
                current.check_element(ptr.addr(), i, size, align, access);
            }
        }
    });
    ptr.wrapping_add(i)
}

/// The device's one 16-byte store (`ptr` from [`element`]).
///
/// # Safety
/// As for `ptr.write(bits)`.
#[inline]
pub unsafe fn store_16(ptr: *mut [u32; 4], bits: [u32; 4]) {
    unsafe { ptr.write(bits) }
}
