//! Indices come from the calling emulated thread; barriers wait for every live thread of its CTA.

use super::context::with_current;

macro_rules! registers {
    ($($name:ident => |$current:ident| $value:expr),* $(,)?) => {$(
        pub fn $name() -> u32 {
            with_current(stringify!($name), |$current| $value)
        }
    )*};
}

registers! {
    thread_idx_x => |c| c.thread[0],
    thread_idx_y => |c| c.thread[1],
    thread_idx_z => |c| c.thread[2],
    block_idx_x => |c| c.cta.block_idx[0],
    block_idx_y => |c| c.cta.block_idx[1],
    block_idx_z => |c| c.cta.block_idx[2],
    block_dim_x => |c| c.cta.launch.block[0],
    block_dim_y => |c| c.cta.launch.block[1],
    block_dim_z => |c| c.cta.launch.block[2],
    grid_dim_x => |c| c.cta.launch.grid[0],
    grid_dim_y => |c| c.cta.launch.grid[1],
    grid_dim_z => |c| c.cta.launch.grid[2],
}

/// `(count, arrived)` of a barrier: threads with a non-zero predicate, and threads that took part.
fn barrier(what: &str, pred: u32) -> (u32, u32) {
    with_current(what, |c| c.cta.barrier(pred != 0))
}

pub fn sync_threads() {
    barrier("sync_threads", 0);
}

pub fn sync_threads_count(pred: u32) -> u32 {
    barrier("sync_threads_count", pred).0
}

pub fn sync_threads_and(pred: u32) -> u32 {
    let (count, arrived) = barrier("sync_threads_and", pred);
    u32::from(count == arrived)
}

pub fn sync_threads_or(pred: u32) -> u32 {
    u32::from(barrier("sync_threads_or", pred).0 > 0)
}
