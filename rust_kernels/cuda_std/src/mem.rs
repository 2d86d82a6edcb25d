//! Element access through raw pointers. Kernels read and write memory with these methods rather than `*p.add(i)`:
//! on the device they compile to a plain load or store, and on the host the emulator checks each access against
//! the bounds of the launch's arguments and of shared memory.

/// Indexed loads, stores and float atomics on `*mut T`.
pub trait DevicePtr<T: Copy> {
    /// Reads element `i`.
    ///
    /// # Safety
    /// Element `i` must lie inside the allocation `self` points into.
    unsafe fn load(self, i: usize) -> T;
    /// Writes element `i`.
    ///
    /// # Safety
    /// Element `i` must lie inside the allocation `self` points into.
    unsafe fn store(self, i: usize, value: T);
    /// Reads element `i` from memory, never from a cache another CTA's writes may not reach (the L1 cache):
    /// for data published by other CTAs of the same launch, after `atomic::fence_device`.
    ///
    /// # Safety
    /// Element `i` must lie inside the allocation `self` points into.
    unsafe fn load_volatile(self, i: usize) -> T;
}

impl<T: Copy> DevicePtr<T> for *mut T {
    #[inline(always)]
    unsafe fn load(self, i: usize) -> T {
        unsafe { crate::arch::mem::element(self, i, "read").read() }
    }

    #[inline(always)]
    unsafe fn store(self, i: usize, value: T) {
        unsafe { crate::arch::mem::element(self, i, "write").write(value) }
    }

    #[inline(always)]
    unsafe fn load_volatile(self, i: usize) -> T {
        unsafe { crate::arch::mem::element(self, i, "read").read_volatile() }
    }
}

/// Stores from the accumulation type, whatever the pointee: `*mut D` rounds to D, `*mut D::Acc` stores as is.
pub trait StoreAcc<A> {
    /// Writes `value`, converted to the pointee type, to element `i`.
    ///
    /// # Safety
    /// Element `i` must lie inside the allocation `self` points into.
    unsafe fn store_acc(self, i: usize, value: A);
}

impl<T: crate::float::Float> StoreAcc<T::Acc> for *mut T {
    #[inline(always)]
    unsafe fn store_acc(self, i: usize, value: T::Acc) {
        unsafe { self.store(i, T::from_acc(value)) }
    }
}
