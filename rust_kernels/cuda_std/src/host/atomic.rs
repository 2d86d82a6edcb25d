use std::sync::atomic::{AtomicU32, AtomicU64, Ordering::Relaxed};

/// `atom.add.f32` as a compare-and-swap loop.
///
/// # Safety
/// `ptr` must be valid and aligned, and every concurrent access to it atomic.
pub unsafe fn fetch_add_f32(ptr: *mut f32, value: f32) -> f32 {
    let atomic = unsafe { AtomicU32::from_ptr(ptr.cast()) };
    let mut old = atomic.load(Relaxed);
    loop {
        let new = (f32::from_bits(old) + value).to_bits();
        match atomic.compare_exchange_weak(old, new, Relaxed, Relaxed) {
            Ok(_) => return f32::from_bits(old),
            Err(seen) => old = seen,
        }
    }
}

/// `atom.add.f64` as a compare-and-swap loop.
///
/// # Safety
/// `ptr` must be valid and aligned, and every concurrent access to it atomic.
pub unsafe fn fetch_add_f64(ptr: *mut f64, value: f64) -> f64 {
    let atomic = unsafe { AtomicU64::from_ptr(ptr.cast()) };
    let mut old = atomic.load(Relaxed);
    loop {
        let new = (f64::from_bits(old) + value).to_bits();
        match atomic.compare_exchange_weak(old, new, Relaxed, Relaxed) {
            Ok(_) => return f64::from_bits(old),
            Err(seen) => old = seen,
        }
    }
}

/// `atom.add.u32`.
///
/// # Safety
/// `ptr` must be valid and aligned, and every concurrent access to it atomic.
pub unsafe fn fetch_add_u32(ptr: *mut u32, value: u32) -> u32 {
    unsafe { AtomicU32::from_ptr(ptr) }.fetch_add(value, Relaxed)
}

/// `fence.acq_rel.gpu`: emulated threads share one address space, so a sequentially consistent fence suffices.
pub fn fence_device() {
    std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
}
