//! `grid::sync` over the launch's CTAs, which a cooperative launch runs at once. The barrier is the launch's own (so
//! a CTA that never arrives fails the launch instead of hanging it); `state`'s word is bounds-checked and left as the
//! GPU leaves it (its top bit flipped, its low bits as they were).

use super::context::{coords, with_current};
use super::thread::sync_threads;

/// # Safety
/// As [`crate::grid::sync`].
pub unsafe fn sync(state: *mut u32) {
    with_current("grid::sync", |current| {
        let launch = &current.cta.launch;
        if launch.checked {
            current.check_element(state.expose_provenance(), 0, 4, 4, "read");
        }
        if !launch.cooperative {
            current.fail(format!(
                "kernel {}: grid::sync in a launch that is not cooperative: its blocks run one after another, so \
                 block {} would wait forever (a kernel that syncs its grid needs `cooperative = true` in its spec)",
                launch.kernel,
                coords(current.cta.block_idx)
            ));
        }
    });
    sync_threads();
    with_current("grid::sync", |current| {
        if current.linear == 0 {
            current.cta.launch.grid_sync(current, state);
        }
    });
    sync_threads();
}
