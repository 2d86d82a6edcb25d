//! Shared memory.

/// The CTA's dynamic shared memory (its size is the launch's shared-memory byte count); the same pointer on every
/// call, aligned to 16 bytes.
#[inline(always)]
pub fn dynamic_shared_mem<T>() -> *mut T {
    crate::arch::shared::dynamic_shared_mem_base().cast()
}
