use super::{atomic, thread};
use core::ptr::read_volatile;

/// The barrier word's top bit: it flips once per `sync`, when the last CTA arrives.
const FLIP: u32 = 1 << 31;

/// Barriers around [`arrive_and_wait`], which holds every branch: a call the compiler does not inline, so it cannot
/// copy the barriers into the branches there, where a warp would split between two copies of an aligned `bar.sync`.
#[inline(always)]
pub unsafe fn sync(state: *mut u32) {
    thread::sync_threads();
    unsafe { arrive_and_wait(state) };
    thread::sync_threads();
}

/// Thread (0, 0, 0) arrives for its CTA with one atomic add: 1 from every CTA but the grid's first, which adds
/// FLIP - (CTAs - 1). The adds total FLIP, and no partial total reaches it, so the top bit flips exactly when the
/// last CTA arrives and the low bits end where they began (zero): every CTA polls for the flip. One atomic on the
/// path from the last arrival to the others' release (a count, a reset and a generation word took three in turn).
/// The fences order every thread's writes before the barrier against its reads after it (with the CTA barriers
/// around it for the CTA's other threads).
#[inline(never)]
unsafe fn arrive_and_wait(state: *mut u32) {
    if thread::thread_idx_x() | thread::thread_idx_y() | thread::thread_idx_z() != 0 {
        return;
    }
    let ctas = thread::grid_dim_x() * thread::grid_dim_y() * thread::grid_dim_z();
    let first = thread::block_idx_x() | thread::block_idx_y() | thread::block_idx_z() == 0;
    unsafe {
        atomic::fence_device();
        let before = atomic::fetch_add_u32(state, if first { FLIP - (ctas - 1) } else { 1 });
        while (read_volatile(state) ^ before) & FLIP == 0 {}
    }
    atomic::fence_device();
}
