use super::{atomic, thread};
use core::ptr::{read_volatile, write_volatile};

/// Barriers around [`arrive_and_wait`], which holds every branch: a call the compiler does not inline, so it cannot
/// copy the barriers into the branches there, where a warp would split between two copies of an aligned `bar.sync`.
#[inline(always)]
pub unsafe fn sync(state: *mut u32) {
    thread::sync_threads();
    unsafe { arrive_and_wait(state) };
    thread::sync_threads();
}

/// Thread (0, 0, 0) arrives for its CTA (an atomic count); the last CTA to arrive resets the count and moves the
/// generation on, which the others poll for. The fences order every thread's writes before the barrier against its
/// reads after it (with the CTA barriers around it for the CTA's other threads).
#[inline(never)]
unsafe fn arrive_and_wait(state: *mut u32) {
    if thread::thread_idx_x() | thread::thread_idx_y() | thread::thread_idx_z() != 0 {
        return;
    }
    let ctas = thread::grid_dim_x() * thread::grid_dim_y() * thread::grid_dim_z();
    unsafe {
        let generation = state.add(1);
        // Read before arriving: the generation cannot move on before this CTA has arrived.
        let seen = read_volatile(generation);
        atomic::fence_device();
        if atomic::fetch_add_u32(state, 1) == ctas - 1 {
            write_volatile(state, 0);
            atomic::fence_device();
            atomic::fetch_add_u32(generation, 1);
        } else {
            while read_volatile(generation) == seen {}
        }
    }
    atomic::fence_device();
}
