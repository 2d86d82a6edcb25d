//! Float atomics (rust-cuda's `atomic::mid` functions). Only relaxed ordering at device scope is provided: it is
//! what reductions need, and what `atom.add` without qualifiers gives.

pub mod mid {
    use core::sync::atomic::Ordering;

    /// Atomically adds `value` to `*ptr` and returns the previous value.
    ///
    /// # Safety
    /// `ptr` must point into global or shared memory valid for the launch.
    #[inline(always)]
    pub unsafe fn atomic_fetch_add_f32_device(ptr: *mut f32, order: Ordering, value: f32) -> f32 {
        debug_assert!(order == Ordering::Relaxed, "only Ordering::Relaxed is supported");
        unsafe { crate::arch::atomic::fetch_add_f32(crate::arch::mem::element(ptr, 0, "atomic add"), value) }
    }

    /// Atomically adds `value` to `*ptr` and returns the previous value.
    ///
    /// # Safety
    /// `ptr` must point into global or shared memory valid for the launch.
    #[inline(always)]
    pub unsafe fn atomic_fetch_add_f64_device(ptr: *mut f64, order: Ordering, value: f64) -> f64 {
        debug_assert!(order == Ordering::Relaxed, "only Ordering::Relaxed is supported");
        unsafe { crate::arch::atomic::fetch_add_f64(crate::arch::mem::element(ptr, 0, "atomic add"), value) }
    }
}
