//! Grid-wide synchronisation, for kernels launched cooperatively (a spec's `cooperative = true`): every CTA of such a
//! launch is resident at once, so one CTA may wait for all the others. The GPU launch refuses a grid larger than the
//! device holds at once; the emulator runs a cooperative launch's CTAs concurrently, and fails a `sync` in any other
//! launch instead of hanging.

/// Waits until every thread of every CTA of the grid has reached this call; what any thread wrote to global memory
/// before it is visible to every thread after it.
///
/// `state` points at two `u32` of global memory (an arrival count and a generation), zero before the first launch
/// that uses them; each `sync` leaves the count at zero, so the same words serve every later launch. Every thread of
/// every CTA must call `sync` the same number of times, and no thread may return before a `sync` the others reach.
///
/// # Safety
/// `state` must be valid for two `u32` for the whole launch and used by no other launch running meanwhile; the
/// launch must be cooperative.
#[inline(always)]
pub unsafe fn sync(state: *mut u32) {
    unsafe { crate::arch::grid::sync(state) }
}
