/// The CTA's dynamic shared memory: a 16-byte aligned buffer of the launch's shared-memory size, reset to 0xFF bytes
/// when each CTA starts (each CTA of a cooperative launch has its own).
pub fn dynamic_shared_mem_base() -> *mut u8 {
    super::context::with_current("dynamic_shared_mem", |current| {
        std::ptr::with_exposed_provenance_mut(current.cta.shared)
    })
}
