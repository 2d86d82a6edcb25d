//! 16-byte vectors of storage elements. The GPU moves 16 bytes per thread in one `ld.global.v4.b32` /
//! `st.global.v4.b32` only when the type is 16-byte aligned: a plain `[f32; 4]` is loaded as four scalars.
//! Kernels cast an element pointer to `*mut D::Pack` and use [`DevicePtr`](crate::mem::DevicePtr) on it; the
//! pointer must then be 16-byte aligned, which the host emulator checks.

/// `N` elements, aligned to 16 bytes (`N * size_of::<T>()` should be 16, which every [`Float::Pack`] is).
///
/// [`Float::Pack`]: crate::float::Float::Pack
#[repr(C, align(16))]
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Pack<T, const N: usize>(pub [T; N]);

/// A fixed number of elements read and written one lane at a time, so that kernels generic over the storage type
/// can loop over `0..LANES`.
pub trait Lanes: Copy {
    type Elem: Copy;
    const LANES: usize;
    /// Element `i`; panics (traps on the device) when `i >= LANES`.
    fn lane(&self, i: usize) -> Self::Elem;
    /// Replaces element `i`; panics (traps on the device) when `i >= LANES`.
    fn set_lane(&mut self, i: usize, value: Self::Elem);
}

impl<T: Copy, const N: usize> Lanes for Pack<T, N> {
    type Elem = T;
    const LANES: usize = N;
    #[inline(always)]
    fn lane(&self, i: usize) -> T {
        self.0[i]
    }
    #[inline(always)]
    fn set_lane(&mut self, i: usize, value: T) {
        self.0[i] = value;
    }
}
