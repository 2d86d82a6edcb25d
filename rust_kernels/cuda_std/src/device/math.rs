//! Rounding and fused multiply-add from core (single PTX instructions: `cvt.rmi`, `fma.rn`, ...), and the PTX
//! `.approx` instructions behind [`FastMath`](crate::float::FastMath).

use core::arch::asm;

macro_rules! core_math {
    ($t:ident) => {
        pub mod $t {
            #[inline(always)]
            pub fn sqrt(x: $t) -> $t {
                core::$t::math::sqrt(x)
            }
            #[inline(always)]
            pub fn mul_add(x: $t, a: $t, b: $t) -> $t {
                core::$t::math::mul_add(x, a, b)
            }
            #[inline(always)]
            pub fn floor(x: $t) -> $t {
                core::$t::math::floor(x)
            }
            #[inline(always)]
            pub fn ceil(x: $t) -> $t {
                core::$t::math::ceil(x)
            }
            #[inline(always)]
            pub fn round(x: $t) -> $t {
                core::$t::math::round(x)
            }
            #[inline(always)]
            pub fn trunc(x: $t) -> $t {
                core::$t::math::trunc(x)
            }
        }
    };
}

core_math!(f32);
core_math!(f64);

macro_rules! approx {
    ($($name:ident: $insn:literal;)*) => {$(
        #[inline(always)]
        pub fn $name(x: f32) -> f32 {
            let out: f32;
            unsafe {
                asm!(concat!($insn, " {out}, {x};"), out = out(reg32) out, x = in(reg32) x,
                     options(pure, nomem, nostack))
            };
            out
        }
    )*};
}

approx! {
    ex2_approx: "ex2.approx.ftz.f32";
    lg2_approx: "lg2.approx.ftz.f32";
    sin_approx: "sin.approx.ftz.f32";
    cos_approx: "cos.approx.ftz.f32";
    tanh_approx: "tanh.approx.f32";
    rsqrt_approx: "rsqrt.approx.ftz.f32";
    rcp_approx: "rcp.approx.ftz.f32";
}
