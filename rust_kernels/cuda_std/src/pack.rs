//! 16- and 8-byte vectors of storage elements. The GPU moves 16 (8) bytes per thread in one `ld.global.v4.b32`
//! (`.v2.b32`) only when the type is that aligned: a plain `[f32; 4]` is loaded as four scalars. Kernels cast an
//! element pointer to `*mut D::Pack` (or `D::Pack8`) and use [`DevicePtr`](crate::mem::DevicePtr) on it; the
//! pointer must then be aligned to the pack, which the host emulator checks.

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

/// `N` elements, aligned to 8 bytes (`N * size_of::<T>()` should be 8, which every [`Float::Pack8`] is): for rows
/// whose length allows 8-byte packs but not 16-byte ones.
///
/// [`Float::Pack8`]: crate::float::Float::Pack8
#[repr(C, align(8))]
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Pack8<T, const N: usize>(pub [T; N]);

macro_rules! lanes {
    ($($pack:ident),*) => {$(
        impl<T: Copy, const N: usize> Lanes for $pack<T, N> {
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
    )*};
}

lanes!(Pack, Pack8);
