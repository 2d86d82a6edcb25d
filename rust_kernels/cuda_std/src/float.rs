//! Float types. `Float` is a storage type (what pointers point to); `Accum` is the type a kernel computes and
//! accumulates in (f32 for f32, f64 for f64; narrower storage types accumulate in f32).

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
    type Acc: Accum;
    fn to_acc(self) -> Self::Acc;
    fn from_acc(value: Self::Acc) -> Self;
}

macro_rules! native_float {
    ($t:ident, $math:ident) => {
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

native_float!(f32, f32);
native_float!(f64, f64);
