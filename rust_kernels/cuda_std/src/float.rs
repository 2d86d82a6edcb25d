//! Float types. `Float` is a storage type (what pointers point to); `Accum` is the type a kernel computes and
//! accumulates in (f32 for f32, f64 for f64; the 16-bit storage types [`bf16`] and [`f16`] accumulate in f32).

use crate::pack::{Lanes, Pack, Pack8};
use crate::warp::ShuffleValue;
use core::ops::{Add, AddAssign, Div, Mul, MulAssign, Neg, Sub, SubAssign};

/// rust-cuda's `GpuFloat`: std-named math methods that also exist on the device, on the types kernels compute in
/// (f32, f64; 16-bit data computes in f32 through [`Float::to_acc`]). The elementary functions are this crate's own
/// (src/math.rs): the device and the emulator give bit-identical results, within the ulp bounds of
/// docs/math.md. On a concrete f32 or f64 outside generic code, std's inherent methods of the same names shadow
/// these on the host: call them as `GpuFloat::exp(x)` there.
pub trait GpuFloat: Copy {
    fn sqrt(self) -> Self;
    fn mul_add(self, a: Self, b: Self) -> Self;
    fn abs(self) -> Self;
    fn max(self, other: Self) -> Self;
    fn min(self, other: Self) -> Self;
    /// Rounding to an integral value: down, up, half away from zero (as std), toward zero.
    fn floor(self) -> Self;
    fn ceil(self) -> Self;
    fn round(self) -> Self;
    fn trunc(self) -> Self;
    /// e^x, 2^x, e^x - 1 (accurate near 0).
    fn exp(self) -> Self;
    fn exp2(self) -> Self;
    fn exp_m1(self) -> Self;
    /// ln x, log2 x, ln(1 + x) (accurate near 0).
    fn ln(self) -> Self;
    fn log2(self) -> Self;
    fn ln_1p(self) -> Self;
    fn tanh(self) -> Self;
    fn sin(self) -> Self;
    fn cos(self) -> Self;
    /// x^y with C's (and std's) special cases.
    fn powf(self, y: Self) -> Self;
    /// The error function.
    fn erf(self) -> Self;
    /// 1 / (1 + e^-x).
    fn sigmoid(self) -> Self;
    /// 1 / sqrt(x), two correctly rounded operations.
    fn rsqrt(self) -> Self;
}

/// Fast approximations by the PTX `.approx` instructions (f32; subnormal inputs and results flushed to zero):
/// `exp_fast` is `ex2.approx` of x log2 e (corrected for the product's rounding), `ln_fast` `lg2.approx` times
/// ln 2, `erf_fast` two short polynomials and one `ex2.approx` (no flushing: tiny x gives 2x / sqrt(pi)). Their
/// errors are in docs/math.md; the
/// emulator computes the exact value rounded, so emulated results can differ from the device's by those errors.
/// On f64 (no such instructions) each is the accurate function.
pub trait FastMath: Copy {
    fn exp_fast(self) -> Self;
    fn exp2_fast(self) -> Self;
    fn ln_fast(self) -> Self;
    fn log2_fast(self) -> Self;
    fn tanh_fast(self) -> Self;
    fn sin_fast(self) -> Self;
    fn cos_fast(self) -> Self;
    fn rsqrt_fast(self) -> Self;
    fn recip_fast(self) -> Self;
    fn erf_fast(self) -> Self;
}

/// An arithmetic float: the type kernels compute in.
pub trait Accum:
    GpuFloat
    + FastMath
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
    /// std's constants, in this precision.
    const PI: Self;
    const E: Self;
    const LN_2: Self;
    const LOG2_E: Self;
    const SQRT_2: Self;
    const FRAC_1_SQRT_2: Self;
    const FRAC_2_SQRT_PI: Self;
    const INFINITY: Self;
    const NEG_INFINITY: Self;
    const NAN: Self;
    const EPSILON: Self;
    const MAX: Self;
    const MIN_POSITIVE: Self;
    /// Conversions as Rust's `as`: rounding to nearest, and to integers toward zero, saturating (NaN gives 0).
    fn from_f32(value: f32) -> Self;
    fn from_f64(value: f64) -> Self;
    fn from_i32(value: i32) -> Self;
    fn from_u32(value: u32) -> Self;
    fn from_usize(value: usize) -> Self;
    fn to_f32(self) -> f32;
    fn to_f64(self) -> f64;
    fn to_i32(self) -> i32;
    fn to_u32(self) -> u32;
    fn to_usize(self) -> usize;
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
    /// Lane `l` of a 16-byte pack in the accumulation type: `pack.lane(l).to_acc()`, or less where the type allows
    /// (bf16). `l` should be a constant (a lane of [`unroll`](crate::pack::unroll)).
    #[inline(always)]
    fn lane_acc(pack: &Self::Pack, l: usize) -> Self::Acc {
        pack.lane(l).to_acc()
    }
}

macro_rules! forward {
    ($($name:ident),*) => {$(
        #[inline(always)]
        fn $name(self) -> Self {
            crate::math::$name(self)
        }
    )*};
}

macro_rules! rounding {
    ($math:ident: $($name:ident),*) => {$(
        #[inline(always)]
        fn $name(self) -> Self {
            crate::arch::math::$math::$name(self)
        }
    )*};
}

macro_rules! native_float {
    ($t:ident, $math:ident, $lanes8:literal) => {
        impl GpuFloat for $t {
            rounding!($math: sqrt, floor, ceil, round, trunc);
            forward!(exp, exp2, exp_m1, ln, log2, ln_1p, tanh, sin, cos, erf, sigmoid);
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
            #[inline(always)]
            fn powf(self, y: Self) -> Self {
                crate::math::powf(self, y)
            }
            #[inline(always)]
            fn rsqrt(self) -> Self {
                1.0 / crate::arch::math::$math::sqrt(self)
            }
        }

        impl Accum for $t {
            const ZERO: Self = 0.0;
            const ONE: Self = 1.0;
            const PI: Self = core::$t::consts::PI;
            const E: Self = core::$t::consts::E;
            const LN_2: Self = core::$t::consts::LN_2;
            const LOG2_E: Self = core::$t::consts::LOG2_E;
            const SQRT_2: Self = core::$t::consts::SQRT_2;
            const FRAC_1_SQRT_2: Self = core::$t::consts::FRAC_1_SQRT_2;
            const FRAC_2_SQRT_PI: Self = core::$t::consts::FRAC_2_SQRT_PI;
            const INFINITY: Self = $t::INFINITY;
            const NEG_INFINITY: Self = $t::NEG_INFINITY;
            const NAN: Self = $t::NAN;
            const EPSILON: Self = $t::EPSILON;
            const MAX: Self = $t::MAX;
            const MIN_POSITIVE: Self = $t::MIN_POSITIVE;
            conversions!($t: from_f32 f32, from_f64 f64, from_i32 i32, from_u32 u32, from_usize usize;
                         to_f32 f32, to_f64 f64, to_i32 i32, to_u32 u32, to_usize usize);
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

macro_rules! conversions {
    ($t:ident: $($from:ident $a:ty),*; $($to:ident $b:ty),*) => {
        $(
            #[inline(always)]
            fn $from(value: $a) -> Self {
                value as $t
            }
        )*
        $(
            #[inline(always)]
            fn $to(self) -> $b {
                self as $b
            }
        )*
    };
}

/// log2 e minus its f32 value.
const LOG2_E_LO: f32 = 1.925_963e-8;

impl FastMath for f32 {
    #[inline(always)]
    fn exp_fast(self) -> f32 {
        // x log2 e in two parts, the low one applied as 2^lo = 1 + lo ln 2: ex2.approx's error at every x, not
        // one growing with |x| from rounding the product.
        let t = self * core::f32::consts::LOG2_E;
        let lo = self.mul_add(core::f32::consts::LOG2_E, -t) + self * LOG2_E_LO;
        let e = crate::arch::math::ex2_approx(t);
        let r = e.mul_add(lo * core::f32::consts::LN_2, e);
        // NaN only where 2^t alone is the answer: t infinite (lo = inf - inf), or 2^t overflowing with lo < 0
        // (inf - inf); 0 or inf then, and a NaN x's NaN.
        if r.is_nan() {
            e
        } else {
            r
        }
    }
    #[inline(always)]
    fn exp2_fast(self) -> f32 {
        crate::arch::math::ex2_approx(self)
    }
    #[inline(always)]
    fn ln_fast(self) -> f32 {
        crate::arch::math::lg2_approx(self) * core::f32::consts::LN_2
    }
    #[inline(always)]
    fn log2_fast(self) -> f32 {
        crate::arch::math::lg2_approx(self)
    }
    #[inline(always)]
    fn tanh_fast(self) -> f32 {
        crate::arch::math::tanh_approx(self)
    }
    #[inline(always)]
    fn sin_fast(self) -> f32 {
        crate::arch::math::sin_approx(self)
    }
    #[inline(always)]
    fn cos_fast(self) -> f32 {
        crate::arch::math::cos_approx(self)
    }
    #[inline(always)]
    fn rsqrt_fast(self) -> f32 {
        crate::arch::math::rsqrt_approx(self)
    }
    #[inline(always)]
    fn recip_fast(self) -> f32 {
        crate::arch::math::rcp_approx(self)
    }
    #[inline(always)]
    fn erf_fast(self) -> f32 {
        crate::math::erf_fast_f32(self)
    }
}

impl FastMath for f64 {
    #[inline(always)]
    fn exp_fast(self) -> f64 {
        GpuFloat::exp(self)
    }
    #[inline(always)]
    fn exp2_fast(self) -> f64 {
        GpuFloat::exp2(self)
    }
    #[inline(always)]
    fn ln_fast(self) -> f64 {
        GpuFloat::ln(self)
    }
    #[inline(always)]
    fn log2_fast(self) -> f64 {
        GpuFloat::log2(self)
    }
    #[inline(always)]
    fn tanh_fast(self) -> f64 {
        GpuFloat::tanh(self)
    }
    #[inline(always)]
    fn sin_fast(self) -> f64 {
        GpuFloat::sin(self)
    }
    #[inline(always)]
    fn cos_fast(self) -> f64 {
        GpuFloat::cos(self)
    }
    #[inline(always)]
    fn rsqrt_fast(self) -> f64 {
        GpuFloat::rsqrt(self)
    }
    #[inline(always)]
    fn recip_fast(self) -> f64 {
        1.0 / self
    }
    #[inline(always)]
    fn erf_fast(self) -> f64 {
        GpuFloat::erf(self)
    }
}

native_float!(f32, f32, 2);
native_float!(f64, f64, 1);

macro_rules! half_float {
    ($(#[$doc:meta])* $t:ident, $to_f32:ident, $from_f32:ident $(, $lane_acc:item)?) => {
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
            $($lane_acc)?
        }
    };
}

half_float!(
    /// bfloat16 (8 exponent bits, 7 mantissa bits), stored as its bits and computed in f32. Equality compares bits.
    bf16,
    bf16_to_f32,
    f32_to_bf16,
    // A bf16 is the upper half of its f32, and a pack's 32-bit words hold two lanes: an even lane widens by one
    // shift, an odd one by one mask (taking the half out first and shifting it back is two instructions).
    #[inline(always)]
    fn lane_acc(pack: &Pack<bf16, 8>, l: usize) -> f32 {
        // SAFETY: 16 bytes either way, every bit pattern valid.
        let words: [u32; 4] = unsafe { core::mem::transmute(*pack) };
        let word = words[l / 2];
        f32::from_bits(if l.is_multiple_of(2) { word << 16 } else { word & 0xffff_0000 })
    }
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
    use super::{bf16, f16, FastMath, Float};

    fn to_bf16(value: f32) -> u16 {
        bf16::from_acc(value).to_bits()
    }

    fn to_f16(value: f32) -> u16 {
        f16::from_acc(value).to_bits()
    }

    #[test]
    fn a_packs_lanes_widen_as_their_elements_do() {
        use crate::pack::{Lanes, Pack};
        for high in 0..=u16::MAX {
            // Every pattern in an even and an odd lane of each word, beside a varying neighbour.
            let low = high.rotate_left(7) ^ 0x5a5a;
            let pack = Pack([low, high, high, low, low, high, high, low].map(bf16::from_bits));
            for l in 0..8 {
                let (got, want) = (bf16::lane_acc(&pack, l), pack.lane(l).to_acc());
                assert!(
                    got.to_bits() == want.to_bits() || got.is_nan() && want.is_nan(),
                    "{l} {high:#x}"
                );
            }
        }
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

    #[test]
    fn fast_exp_takes_its_limits_at_infinities() {
        // In the emulator, whose ex2.approx stand-in is exact: the limits come from exp_fast's own arithmetic.
        let inf = f32::INFINITY;
        assert_eq!(inf.exp_fast(), inf);
        assert_eq!((-inf).exp_fast().to_bits(), 0);
        assert_eq!(3e38f32.exp_fast(), inf, "x log2 e overflowing");
        assert_eq!((-3e38f32).exp_fast(), 0.0);
        assert!(f32::NAN.exp_fast().is_nan());
        assert_eq!(0.0f32.exp_fast(), 1.0);
        // 2^t overflowing where the low part is negative: 89 log2 e rounds up in f32.
        let x = (1..1000).map(|i| 88.8 + i as f32 * 1e-3).find(|x| {
            let t = x * core::f32::consts::LOG2_E;
            x.mul_add(core::f32::consts::LOG2_E, -t) < 0.0
        });
        assert_eq!(x.expect("such an x").exp_fast(), inf);
        assert_eq!(inf.exp2_fast(), inf);
        assert_eq!((-inf).exp2_fast(), 0.0);
    }
}
