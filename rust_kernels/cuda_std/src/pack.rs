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
    /// Every element `value`.
    fn splat(value: Self::Elem) -> Self;
}

/// Calls `f(0)`, `f(1)`, ... `f(n - 1)` as straight-line code when `n` is a constant (a pack's `LANES`, a const
/// parameter): each call sees its index as a constant, so a pack's lane or an array's element it names stays in a
/// register. A loop over lanes around a large body (an `erf`) is left rolled by the compiler, and its dynamically
/// indexed pack then lives in local memory. `n` is at most [`UNROLL_MAX`].
#[inline(always)]
pub fn unroll(n: usize, mut f: impl FnMut(usize)) {
    assert!(n <= UNROLL_MAX, "unroll: n is above UNROLL_MAX");
    macro_rules! steps {
        ($($i:literal)*) => {$( if $i < n { f($i) } )*};
    }
    steps!(0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31
           32 33 34 35 36 37 38 39 40 41 42 43 44 45 46 47 48 49 50 51 52 53 54 55 56 57 58 59 60 61 62 63);
}

/// Writes `pack` as element `i` of `packs` in one 16-byte store. Written as its lanes, as `packs.store(i, pack)`
/// writes it, the compiler may split a pack's store into 8-, 4- and 2-byte ones: where another path writes the same
/// elements one by one (a misaligned row's), their last stores merge after the branch.
///
/// # Safety
/// As for `packs.store(i, pack)`; `P` must be a 16-byte pack.
#[inline(always)]
pub unsafe fn store_whole<P: Lanes>(packs: *mut P, i: usize, pack: P) {
    const { assert!(size_of::<P>() == 16 && align_of::<P>() == 16) };
    let bits: [u32; 4] = unsafe { core::mem::transmute_copy(&pack) };
    unsafe { crate::arch::mem::store_16(crate::arch::mem::element(packs, i, "write").cast(), bits) }
}

/// The most calls [`unroll`] makes.
pub const UNROLL_MAX: usize = 64;

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
            #[inline(always)]
            fn splat(value: T) -> Self {
                Self([value; N])
            }
        }
    )*};
}

lanes!(Pack, Pack8);
