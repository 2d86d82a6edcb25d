//! Float types. `Float` is a storage type (what pointers point to); `Accum` is the type a kernel computes and
//! accumulates in (f32 for f32, f64 for f64; the 16-bit storage types [`bf16`] and [`f16`] accumulate in f32).

use crate::pack::{Lanes, Pack, Pack8};
use crate::warp::ShuffleValue;
use core::ops::{Add, AddAssign, Div, Mul, MulAssign, Neg, Sub, SubAssign};

/// rust-cuda's `GpuFloat`: std-named math methods that also exist on the device.
pub trait GpuFloat: Copy {
    fn sqrt(self) -> Self;
    fn mul_add(self, a: Self, b: Self) -> Self;
    fn abs(self) -> Self;
    fn max(self, other: Self) -> Self;
    fn min(self, other: Self) -> Self;
}

/// An arithmetic float: the type kernels compute in.
pub trait Accum:
    GpuFloat
    + crate::atomic::AtomicAdd
    + ShuffleValue
    + PartialOrd
    + Add<Output = Self>
    + Sub<Output = Self>
    + Mul<Output = Self>
    + Div<Output = Self>
    + Neg<Output = Self>
    + AddAssign
    + SubAssign
    + MulAssign
    + 'static
{
    const ZERO: Self;
    const ONE: Self;
    fn from_f32(value: f32) -> Self;
}

/// A storage type of kernel data, with the type it is computed in.
pub trait Float: Copy + 'static {
    /// The accumulation type, itself a storage type that accumulates in itself: kernel parameters of type `D::Acc`
    /// (f32 statistics next to bf16 activations, as mixed precision has them) load and store like `D` ones.
    type Acc: Accum + Float<Acc = Self::Acc>;
    /// 16 bytes of this type, for one vector load or store (`ld.global.v4.b32`) instead of one per element.
    type Pack: Lanes<Elem = Self>;
    /// 8 bytes of this type (`ld.global.v2.b32`), for rows too short for 16-byte packs.
    type Pack8: Lanes<Elem = Self>;
    fn to_acc(self) -> Self::Acc;
    fn from_acc(value: Self::Acc) -> Self;
}

macro_rules! native_float {
    ($t:ident, $math:ident, $lanes8:literal) => {
        impl GpuFloat for $t {
            #[inline(always)]
            fn sqrt(self) -> Self {
                crate::arch::math::$math::sqrt(self)
            }
            #[inline(always)]
            fn mul_add(self, a: Self, b: Self) -> Self {
                crate::arch::math::$math::mul_add(self, a, b)
            }
            #[inline(always)]
            fn abs(self) -> Self {
                $t::abs(self)
            }
            #[inline(always)]
            fn max(self, other: Self) -> Self {
                $t::max(self, other)
            }
            #[inline(always)]
            fn min(self, other: Self) -> Self {
                $t::min(self, other)
            }
        }

        impl Accum for $t {
            const ZERO: Self = 0.0;
            const ONE: Self = 1.0;
            #[inline(always)]
            fn from_f32(value: f32) -> Self {
                value as $t
            }
        }

        impl Float for $t {
            type Acc = $t;
            type Pack = Pack<$t, { 2 * $lanes8 }>;
            type Pack8 = Pack8<$t, $lanes8>;
            #[inline(always)]
            fn to_acc(self) -> $t {
                self
            }
            #[inline(always)]
            fn from_acc(value: $t) -> Self {
                value
            }
        }
    };
}

native_float!(f32, f32, 2);
native_float!(f64, f64, 1);

macro_rules! half_float {
    ($(#[$doc:meta])* $t:ident, $to_f32:ident, $from_f32:ident) => {
        $(#[$doc])*
        #[allow(non_camel_case_types)]
        #[repr(transparent)]
        #[derive(Clone, Copy, Debug, PartialEq, Default)]
        pub struct $t(u16);

        impl $t {
            #[inline(always)]
            pub const fn from_bits(bits: u16) -> Self {
                Self(bits)
            }
            #[inline(always)]
            pub const fn to_bits(self) -> u16 {
                self.0
            }
        }

        /// Widening is exact (a NaN stays a NaN); narrowing rounds to nearest even, keeps NaN a NaN and overflows to
        /// infinity.
        impl Float for $t {
            type Acc = f32;
            type Pack = Pack<$t, 8>;
            type Pack8 = Pack8<$t, 4>;
            #[inline(always)]
            fn to_acc(self) -> f32 {
                crate::arch::float::$to_f32(self.0)
            }
            #[inline(always)]
            fn from_acc(value: f32) -> Self {
                Self(crate::arch::float::$from_f32(value))
            }
        }
    };
}

half_float!(
    /// bfloat16 (8 exponent bits, 7 mantissa bits), stored as its bits and computed in f32. Equality compares bits.
    bf16,
    bf16_to_f32,
    f32_to_bf16
);
half_float!(
    /// IEEE binary16 (5 exponent bits, 10 mantissa bits), stored as its bits and computed in f32. Equality compares
    /// bits.
    f16,
    f16_to_f32,
    f32_to_f16
);

#[cfg(test)]
mod tests {
    use super::{bf16, f16, Float};

    fn to_bf16(value: f32) -> u16 {
        bf16::from_acc(value).to_bits()
    }

    fn to_f16(value: f32) -> u16 {
        f16::from_acc(value).to_bits()
    }

    #[test]
    fn every_bf16_widens_exactly_and_round_trips() {
        for bits in 0..=u16::MAX {
            let wide = bf16::from_bits(bits).to_acc();
            // bf16 is the upper half of an f32 (a signalling NaN may come out quieted).
            let exact = f32::from_bits(u32::from(bits) << 16);
            if exact.is_nan() {
                assert!(wide.is_nan() && bf16::from_acc(wide).to_acc().is_nan());
            } else {
                assert_eq!(wide.to_bits(), exact.to_bits());
                assert_eq!(to_bf16(wide), bits);
            }
        }
    }

    #[test]
    fn every_f16_round_trips() {
        for bits in 0..=u16::MAX {
            let wide = f16::from_bits(bits).to_acc();
            // An all-ones exponent is inf or NaN; anything else is finite.
            assert_eq!(bits & 0x7c00 == 0x7c00, !wide.is_finite(), "{bits:#06x}");
            if wide.is_nan() {
                assert!(f16::from_acc(wide).to_acc().is_nan());
            } else {
                assert_eq!(to_f16(wide), bits);
            }
        }
        assert_eq!(f16::from_bits(0x3c00).to_acc(), 1.0);
        assert_eq!(f16::from_bits(0x7bff).to_acc(), 65504.0);
        assert_eq!(f16::from_bits(0x0001).to_acc(), 2f32.powi(-24));
        assert_eq!(f16::from_bits(0xc000).to_acc(), -2.0);
    }

    #[test]
    fn narrowing_rounds_to_nearest_even() {
        let (bf16_ulp, f16_ulp) = (2f32.powi(-7), 2f32.powi(-10));
        // 1 + ulp/2 ties to 1.0 (even); 1 + 3ulp/2 ties to 1 + 2ulp (even); just above a tie rounds up.
        assert_eq!(to_bf16(1.0 + bf16_ulp / 2.0), 0x3f80);
        assert_eq!(to_bf16(1.0 + 3.0 * bf16_ulp / 2.0), 0x3f82);
        assert_eq!(to_bf16(1.0 + bf16_ulp / 2.0 + 2f32.powi(-20)), 0x3f81);
        assert_eq!(to_bf16(-(1.0 + 3.0 * bf16_ulp / 2.0)), 0xbf82);
        assert_eq!(to_f16(1.0 + f16_ulp / 2.0), 0x3c00);
        assert_eq!(to_f16(1.0 + 3.0 * f16_ulp / 2.0), 0x3c02);
        assert_eq!(to_f16(1.0 + f16_ulp / 2.0 + 2f32.powi(-20)), 0x3c01);
        // f16 subnormals: half the smallest one ties to 0, one and a half of it to two.
        assert_eq!(to_f16(2f32.powi(-25)), 0x0000);
        assert_eq!(to_f16(3.0 * 2f32.powi(-25)), 0x0002);
        assert_eq!(to_f16(-0.0), 0x8000);
    }

    #[test]
    fn nan_stays_nan_and_overflow_gives_infinity() {
        // A NaN whose payload lies only in the low 16 bits would become infinity if the bits were truncated.
        for nan in [
            f32::NAN,
            -f32::NAN,
            f32::from_bits(0x7f80_0001),
            f32::from_bits(0xff80_0001),
        ] {
            assert!(bf16::from_acc(nan).to_acc().is_nan(), "{:#x}", nan.to_bits());
            assert!(f16::from_acc(nan).to_acc().is_nan(), "{:#x}", nan.to_bits());
        }
        assert_eq!(to_bf16(f32::MAX), 0x7f80);
        assert_eq!(to_bf16(f32::MIN), 0xff80);
        assert_eq!(to_bf16(f32::INFINITY), 0x7f80);
        // 65520 is halfway between f16::MAX (65504) and 65536 and ties to the even neighbour: infinity.
        assert_eq!(to_f16(65519.0), 0x7bff);
        assert_eq!(to_f16(65520.0), 0x7c00);
        assert_eq!(to_f16(-1e6), 0xfc00);
        assert_eq!(to_f16(f32::INFINITY), 0x7c00);
    }
}
