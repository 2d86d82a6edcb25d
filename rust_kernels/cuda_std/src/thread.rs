//! Thread, block and grid indices (all `u32`, as in rust-cuda) and CTA-wide barriers.

pub use crate::arch::thread::{
    block_dim_x, block_dim_y, block_dim_z, block_idx_x, block_idx_y, block_idx_z, grid_dim_x, grid_dim_y, grid_dim_z,
    sync_threads, sync_threads_and, sync_threads_count, sync_threads_or, thread_idx_x, thread_idx_y, thread_idx_z,
};

/// The global 1-D thread index: `block_idx_x() * block_dim_x() + thread_idx_x()`.
#[inline(always)]
pub fn index_1d() -> u32 {
    block_idx_x() * block_dim_x() + thread_idx_x()
}
