//! Atomics let the other threads of the CTA run after them where those are fibers, so that a thread polling with an
//! atomic for another's write (a spin-wait) lets that one run.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering::Relaxed};

macro_rules! float_fetch_add {
    ($($name:ident: $float:ty as $atomic:ty),*) => {$(
        #[doc = concat!("`atom.add.", stringify!($float), "` as a compare-and-swap loop.")]
        ///
        /// # Safety
        /// `ptr` must be valid and aligned, and every concurrent access to it atomic.
        pub unsafe fn $name(ptr: *mut $float, value: $float) -> $float {
            let atomic = unsafe { <$atomic>::from_ptr(ptr.cast()) };
            let mut old = atomic.load(Relaxed);
            loop {
                let new = (<$float>::from_bits(old) + value).to_bits();
                match atomic.compare_exchange_weak(old, new, Relaxed, Relaxed) {
                    Ok(_) => {
                        super::context::let_others_run();
                        return <$float>::from_bits(old);
                    }
                    Err(seen) => old = seen,
                }
            }
        }
    )*};
}

float_fetch_add!(fetch_add_f32: f32 as AtomicU32, fetch_add_f64: f64 as AtomicU64);

/// `atom.add.u32`.
///
/// # Safety
/// `ptr` must be valid and aligned, and every concurrent access to it atomic.
pub unsafe fn fetch_add_u32(ptr: *mut u32, value: u32) -> u32 {
    let old = unsafe { AtomicU32::from_ptr(ptr) }.fetch_add(value, Relaxed);
    super::context::let_others_run();
    old
}

/// `fence.acq_rel.gpu`: emulated threads share one address space, so a sequentially consistent fence suffices.
pub fn fence_device() {
    std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
}
