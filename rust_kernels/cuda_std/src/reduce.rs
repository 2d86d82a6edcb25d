//! Warp and CTA reductions: sum, max, any associative operation, Welford statistics (count, mean, M2) and a softmax's
//! running maximum and sum of exponentials ([`MaxSum`]).
//!
//! The CTA versions are for one-dimensional CTAs (`block_dim_x()` threads, a multiple of 32, at most 1024) that
//! all reach the call, and give every thread the result. They combine in a fixed tree (deterministic, run to run),
//! take `scratch`: shared memory of one value per warp (two for `MaxSum`, three for Welford), e.g.
//! `shared::dynamic_shared_mem()` with `shared_accumulators_per_warp` set in the spec, and end with a barrier, so
//! the scratch may be reused at once. A CTA of one warp combines by shuffles alone: no shared memory, and a warp
//! barrier (`sync_warp`) in place of the CTA's.

use crate::float::{Accum, GpuFloat};
use crate::mem::DevicePtr;
use crate::pack::unroll;
use crate::thread;
use crate::warp::{sync_warp, warp_shuffle_xor, ShuffleValue};

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
    block_combine(
        warp_reduce(value, op),
        |partial| warp_reduce(partial, op),
        |warp, partial| unsafe { scratch.store(warp, partial) },
        |lane| unsafe { scratch.load(lane) },
        identity,
    )
}

/// The CTA's combination of each warp's `partial` (already combined over the warp): the warps' partials pass
/// through shared memory (`store(warp, partial)`, `load(warp)`) and are combined by the first warp's
/// `warp_combine`, `empty` standing in for absent warps. One warp: the partial itself.
#[inline(always)]
fn block_combine<T: Copy>(
    partial: T,
    warp_combine: impl Fn(T) -> T,
    store: impl Fn(usize, T),
    load: impl Fn(usize) -> T,
    empty: T,
) -> T {
    let tid = thread::thread_idx_x() as usize;
    let warps = thread::block_dim_x() as usize / 32;
    if warps == 1 {
        sync_warp(u32::MAX);
        return partial;
    }
    if tid.is_multiple_of(32) {
        store(tid / 32, partial);
    }
    thread::sync_threads();
    let lane = tid % 32;
    let total = warp_combine(if lane < warps { load(lane) } else { empty });
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
    pub fn warp_merge(self) -> Self {
        warp_merge(self)
    }

    /// Merged over the CTA (every thread gets the result).
    ///
    /// # Safety
    /// As [`block_reduce`], with three values per warp of scratch.
    #[inline(always)]
    pub unsafe fn block_merge(self, scratch: *mut T) -> Self {
        unsafe { block_merge(self, scratch) }
    }
}

impl<T: Accum> Parts<T> for Welford<T> {
    const PARTS: usize = 3;
    const NONE: Self = Self::EMPTY;
    #[inline(always)]
    fn part(self, i: usize) -> T {
        [self.count, self.mean, self.m2][i]
    }
    #[inline(always)]
    fn from_parts(part: impl Fn(usize) -> T) -> Self {
        Self {
            count: part(0),
            mean: part(1),
            m2: part(2),
        }
    }
    #[inline(always)]
    fn combine(self, other: Self) -> Self {
        self.merge(other)
    }
}

/// A softmax's statistics of a stream of values: their running maximum and the sum of exp(value - maximum), the
/// sum rescaled as the maximum grows (online softmax), merged pairwise likewise. A masked value (-inf) adds nothing;
/// a NaN makes the sum NaN. `FAST` takes `exp_fast` (PTX `ex2.approx`, within 4 ulps of f32) for every
/// exponential, otherwise the accurate `exp`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MaxSum<T, const FAST: bool> {
    pub max: T,
    pub sum: T,
}

impl<T: Accum, const FAST: bool> MaxSum<T, FAST> {
    pub const EMPTY: Self = Self {
        max: T::NEG_INFINITY,
        sum: T::ZERO,
    };

    /// exp(x), fast or accurate as `FAST` says.
    #[inline(always)]
    pub fn exp(x: T) -> T {
        if FAST {
            x.exp_fast()
        } else {
            x.exp()
        }
    }

    #[inline(always)]
    pub fn push(self, x: T) -> Self {
        let Self { mut max, mut sum } = self;
        if x > max {
            sum *= Self::exp(max - x);
            max = x;
        }
        if x != T::NEG_INFINITY {
            sum += Self::exp(x - max);
        }
        Self { max, sum }
    }

    #[inline(always)]
    pub fn merge(self, other: Self) -> Self {
        let max = self.max.max(other.max);
        if max == T::NEG_INFINITY {
            return Self::EMPTY;
        }
        Self {
            max,
            sum: self.rescaled(max) + other.rescaled(max),
        }
    }

    /// The sum relative to a maximum `max` at least this one's: sum * exp(self.max - max), 0 where nothing was
    /// pushed.
    #[inline(always)]
    pub fn rescaled(self, max: T) -> T {
        if self.max == max {
            self.sum
        } else if self.max == T::NEG_INFINITY {
            T::ZERO
        } else {
            self.sum * Self::exp(self.max - max)
        }
    }

    /// Merged over the warp's 32 lanes (every lane gets the result).
    #[inline(always)]
    pub fn warp_merge(self) -> Self {
        warp_merge(self)
    }

    /// Merged over the CTA (every thread gets the result).
    ///
    /// # Safety
    /// As [`block_reduce`], with two values per warp of scratch.
    #[inline(always)]
    pub unsafe fn block_merge(self, scratch: *mut T) -> Self {
        unsafe { block_merge(self, scratch) }
    }
}

impl<T: Accum, const FAST: bool> Parts<T> for MaxSum<T, FAST> {
    const PARTS: usize = 2;
    const NONE: Self = Self::EMPTY;
    #[inline(always)]
    fn part(self, i: usize) -> T {
        [self.max, self.sum][i]
    }
    #[inline(always)]
    fn from_parts(part: impl Fn(usize) -> T) -> Self {
        Self {
            max: part(0),
            sum: part(1),
        }
    }
    #[inline(always)]
    fn combine(self, other: Self) -> Self {
        self.merge(other)
    }
}

/// Statistics merged pairwise, as `PARTS` values of `T` (each passed through shuffles and shared memory).
trait Parts<T>: Copy {
    const PARTS: usize;
    const NONE: Self;
    fn part(self, i: usize) -> T;
    fn from_parts(part: impl Fn(usize) -> T) -> Self;
    fn combine(self, other: Self) -> Self;
}

/// `stats` merged over the warp's 32 lanes (a butterfly: every lane gets the result).
#[inline(always)]
fn warp_merge<T: ShuffleValue, S: Parts<T>>(mut stats: S) -> S {
    let mut offset = 16;
    while offset > 0 {
        let other = S::from_parts(|i| warp_shuffle_xor(u32::MAX, stats.part(i), offset, 32).0);
        stats = stats.combine(other);
        offset /= 2;
    }
    stats
}

/// `stats` merged over the CTA: part `i` of warp `w` in `scratch[i * warps + w]`.
#[inline(always)]
unsafe fn block_merge<T: ShuffleValue, S: Parts<T>>(stats: S, scratch: *mut T) -> S {
    let warps = thread::block_dim_x() as usize / 32;
    block_combine(
        warp_merge(stats),
        warp_merge,
        |warp, partial: S| {
            unroll(S::PARTS, |i| unsafe {
                scratch.store(i * warps + warp, partial.part(i))
            })
        },
        |lane| S::from_parts(|i| unsafe { scratch.load(i * warps + lane) }),
        S::NONE,
    )
}

#[cfg(test)]
mod tests {
    use super::MaxSum;

    type Stats = MaxSum<f64, false>;

    fn of(values: &[f64]) -> Stats {
        values.iter().fold(Stats::EMPTY, |s, &v| s.push(v))
    }

    #[test]
    fn max_sum_pushes_and_merges_as_the_softmax_denominator() {
        let values = [3.0, -1.0, f64::NEG_INFINITY, 7.5, 2.0];
        let want: f64 = [3.0f64, -1.0, 7.5, 2.0].iter().map(|v| (v - 7.5).exp()).sum();
        for split in 0..=values.len() {
            let (a, b) = values.split_at(split);
            for stats in [of(&values), of(a).merge(of(b)), of(b).merge(of(a))] {
                assert_eq!(stats.max, 7.5);
                assert!(
                    (stats.sum - want).abs() <= 1e-15 * want,
                    "{} vs {want} at {split}",
                    stats.sum
                );
            }
        }
        assert_eq!(of(&[f64::NEG_INFINITY; 3]), Stats::EMPTY, "only masked values: nothing");
        assert_eq!(Stats::EMPTY.merge(Stats::EMPTY), Stats::EMPTY);
        assert!(of(&[1.0, f64::NAN, 2.0]).sum.is_nan(), "a NaN propagates");
        assert_eq!(of(&[2.0]).rescaled(f64::INFINITY), 0.0);
    }
}
