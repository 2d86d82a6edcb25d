//! Atomics and fences. rust-cuda's `atomic::mid` functions, plus `atomic_add` generic over the types that have a
//! device-wide atomic add, and a device-scope fence for publishing results to other CTAs. Atomic adds are relaxed
//! at device scope (what `atom.add` without qualifiers gives): pair them with `fence_device` to order other memory.

/// Types with a device-wide atomic add.
pub trait AtomicAdd: Copy {
    /// # Safety
    /// `ptr` must be valid and aligned, and every concurrent access to it atomic.
    unsafe fn fetch_add(ptr: *mut Self, value: Self) -> Self;
}

macro_rules! atomic_add_impl {
    ($($t:ty => $f:ident),*) => {$(
        impl AtomicAdd for $t {
            #[inline(always)]
            unsafe fn fetch_add(ptr: *mut Self, value: Self) -> Self {
                unsafe { crate::arch::atomic::$f(ptr, value) }
            }
        }
    )*};
}

atomic_add_impl!(f32 => fetch_add_f32, f64 => fetch_add_f64, u32 => fetch_add_u32);

/// Atomically adds `value` to `*ptr` (relaxed, device scope) and returns the previous value.
///
/// # Safety
/// `ptr` must point into global or shared memory valid for the launch.
#[inline(always)]
pub unsafe fn atomic_add<T: AtomicAdd>(ptr: *mut T, value: T) -> T {
    unsafe { T::fetch_add(crate::arch::mem::element(ptr, 0, "atomic add"), value) }
}

/// Orders this thread's memory accesses before and after it for every thread of the device (`fence.acq_rel.gpu`).
#[inline(always)]
pub fn fence_device() {
    crate::arch::atomic::fence_device()
}

pub mod mid {
    use core::sync::atomic::Ordering;

    /// Atomically adds `value` to `*ptr` and returns the previous value.
    ///
    /// # Safety
    /// `ptr` must point into global or shared memory valid for the launch.
    #[inline(always)]
    pub unsafe fn atomic_fetch_add_f32_device(ptr: *mut f32, order: Ordering, value: f32) -> f32 {
        debug_assert!(order == Ordering::Relaxed, "only Ordering::Relaxed is supported");
        unsafe { super::atomic_add(ptr, value) }
    }

    /// Atomically adds `value` to `*ptr` and returns the previous value.
    ///
    /// # Safety
    /// `ptr` must point into global or shared memory valid for the launch.
    #[inline(always)]
    pub unsafe fn atomic_fetch_add_f64_device(ptr: *mut f64, order: Ordering, value: f64) -> f64 {
        debug_assert!(order == Ordering::Relaxed, "only Ordering::Relaxed is supported");
        unsafe { super::atomic_add(ptr, value) }
    }
}
