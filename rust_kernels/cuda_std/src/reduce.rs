//! Warp and CTA reductions: sum, max, any associative operation, and Welford statistics (count, mean, M2).
//!
//! The CTA versions are for one-dimensional CTAs (`block_dim_x()` threads, a multiple of 32, at most 1024) that
//! all reach the call, and give every thread the result. They combine in a fixed tree (deterministic, run to run),
//! take `scratch`: shared memory of one value per warp (three for Welford), e.g. `shared::dynamic_shared_mem()`
//! with `shared_accumulators_per_warp` set in the spec, and end with a barrier, so the scratch may be reused at once.

use crate::float::{Accum, GpuFloat};
use crate::mem::DevicePtr;
use crate::thread;
use crate::warp::{warp_shuffle_xor, ShuffleValue};

/// `value` combined over the warp's 32 lanes by `op` (a butterfly: every lane gets the result).
#[inline(always)]
pub fn warp_reduce<T: ShuffleValue>(mut value: T, op: impl Fn(T, T) -> T) -> T {
    let mut offset = 16;
    while offset > 0 {
        value = op(value, warp_shuffle_xor(u32::MAX, value, offset, 32).0);
        offset /= 2;
    }
    value
}

#[inline(always)]
pub fn warp_sum<T: Accum>(value: T) -> T {
    warp_reduce(value, |a, b| a + b)
}

#[inline(always)]
pub fn warp_max<T: Accum>(value: T) -> T {
    warp_reduce(value, GpuFloat::max)
}

/// `value` combined over the CTA by `op`, `identity` standing in for absent warps.
///
/// # Safety
/// `scratch` must point to shared memory of at least `block_dim_x() / 32` values, which no other code uses
/// during the call; every thread of the CTA must call it.
#[inline(always)]
pub unsafe fn block_reduce<T: ShuffleValue>(
    value: T,
    scratch: *mut T,
    identity: T,
    op: impl Fn(T, T) -> T + Copy,
) -> T {
    let tid = thread::thread_idx_x() as usize;
    let warps = thread::block_dim_x() as usize / 32;
    let partial = warp_reduce(value, op);
    if tid.is_multiple_of(32) {
        unsafe { scratch.store(tid / 32, partial) };
    }
    thread::sync_threads();
    let lane = tid % 32;
    let mine = if lane < warps {
        unsafe { scratch.load(lane) }
    } else {
        identity
    };
    let total = warp_reduce(mine, op);
    thread::sync_threads();
    total
}

/// The CTA's sum of `value`.
///
/// # Safety
/// As [`block_reduce`].
#[inline(always)]
pub unsafe fn block_sum<T: Accum>(value: T, scratch: *mut T) -> T {
    unsafe { block_reduce(value, scratch, T::ZERO, |a, b| a + b) }
}

/// The CTA's maximum of `value` (NaN-ignoring, as `max`).
///
/// # Safety
/// As [`block_reduce`].
#[inline(always)]
pub unsafe fn block_max<T: Accum>(value: T, scratch: *mut T) -> T {
    unsafe { block_reduce(value, scratch, T::NEG_INFINITY, GpuFloat::max) }
}

/// Running statistics of a stream of values: their count, mean and sum of squared deviations (M2), updated one
/// value at a time (Welford) and merged pairwise (Chan et al.), never as E[x^2] - E[x]^2.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Welford<T> {
    pub count: T,
    pub mean: T,
    pub m2: T,
}

impl<T: Accum> Welford<T> {
    pub const EMPTY: Self = Self {
        count: T::ZERO,
        mean: T::ZERO,
        m2: T::ZERO,
    };

    #[inline(always)]
    pub fn push(self, x: T) -> Self {
        let count = self.count + T::ONE;
        let delta = x - self.mean;
        let mean = self.mean + delta / count;
        Self {
            count,
            mean,
            m2: delta.mul_add(x - mean, self.m2),
        }
    }

    #[inline(always)]
    pub fn merge(self, other: Self) -> Self {
        if other.count == T::ZERO {
            return self;
        }
        if self.count == T::ZERO {
            return other;
        }
        let count = self.count + other.count;
        let delta = other.mean - self.mean;
        let share = other.count / count;
        let m2 = self.m2 + other.m2 + delta * delta * self.count * share;
        Self {
            count,
            mean: delta.mul_add(share, self.mean),
            m2,
        }
    }

    /// The population variance, M2 / count.
    #[inline(always)]
    pub fn variance(self) -> T {
        self.m2 / self.count
    }

    /// Merged over the warp's 32 lanes (every lane gets the result).
    #[inline(always)]
    pub fn warp_merge(mut self) -> Self {
        let mut offset = 16;
        while offset > 0 {
            let other = Self {
                count: warp_shuffle_xor(u32::MAX, self.count, offset, 32).0,
                mean: warp_shuffle_xor(u32::MAX, self.mean, offset, 32).0,
                m2: warp_shuffle_xor(u32::MAX, self.m2, offset, 32).0,
            };
            self = self.merge(other);
            offset /= 2;
        }
        self
    }

    /// Merged over the CTA (every thread gets the result).
    ///
    /// # Safety
    /// As [`block_reduce`], with three values per warp of scratch.
    #[inline(always)]
    pub unsafe fn block_merge(self, scratch: *mut T) -> Self {
        let tid = thread::thread_idx_x() as usize;
        let warps = thread::block_dim_x() as usize / 32;
        let partial = self.warp_merge();
        if tid.is_multiple_of(32) {
            unsafe {
                scratch.store(tid / 32, partial.count);
                scratch.store(warps + tid / 32, partial.mean);
                scratch.store(2 * warps + tid / 32, partial.m2);
            }
        }
        thread::sync_threads();
        let lane = tid % 32;
        let mine = if lane < warps {
            unsafe {
                Self {
                    count: scratch.load(lane),
                    mean: scratch.load(warps + lane),
                    m2: scratch.load(2 * warps + lane),
                }
            }
        } else {
            Self::EMPTY
        };
        let total = mine.warp_merge();
        thread::sync_threads();
        total
    }
}
