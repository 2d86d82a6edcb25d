//! Elementary functions of f32 and f64, written once in plain arithmetic (fused multiply-add, floor, bit
//! operations, IEEE division), so the device and the host emulator compute bit-identical results. Kernels call
//! them as the std-named methods of [`GpuFloat`](crate::float::GpuFloat) (`x.exp()`, `x.tanh()`, ...).
//!
//! Every function reduces its argument exactly or nearly so (Cody-Waite with two or three constant parts, the
//! exponent split off a logarithm's argument) and evaluates a short polynomial on the reduced range: Taylor series
//! where they converge fast enough, and for erf's tail a Chebyshev fit of erfc(x) e^(x^2) x (fitted offline to
//! 2^-27 relative error for f32, 2^-55 for f64, by scripts/fit_erfc.py). The errors, measured against mpmath, are
//! in docs/math.md. sin and cos reduce by pi/2 in three parts: accurate for |x| up to 2^16 (f32) / 2^28 (f64);
//! beyond, results stay in [-1, 1] but lose accuracy.

use core::ops::{Add, Div, Mul, Neg, Sub};

/// What the functions need of a binary float format.
pub(crate) trait Ieee:
    Copy
    + PartialOrd
    + Add<Output = Self>
    + Sub<Output = Self>
    + Mul<Output = Self>
    + Div<Output = Self>
    + Neg<Output = Self>
{
    /// Stored mantissa bits and the exponent bias.
    const MANT: u32;
    const BIAS: i32;
    const MIN_NORMAL: f64;
    /// ln 2 and pi/2 split into parts whose multiples by small integers are exact enough.
    const LN2: [f64; 2];
    /// log2 e minus its value in this format.
    const LOG2E_LO: f64;
    const PIO2: [f64; 3];
    /// Taylor terms kept: e^r on |r| <= ln2/2, ln's atanh series in s^2 <= 0.0295, sin/cos on |r| <= pi/4, erf on
    /// |x| < 1. Each drops terms below half an ulp.
    const EXP_TERMS: usize;
    const LOG_TERMS: usize;
    const SIN_TERMS: usize;
    const COS_TERMS: usize;
    const ERF_TERMS: usize;
    /// e^x is infinite above, zero below; tanh is +-1 and erf +-1 (rounded) beyond these.
    const EXP_OVER: f64;
    const EXP_UNDER: f64;
    const TANH_ONE: f64;
    const ERF_ONE: f64;
    /// erfc(x) e^(x^2) x on [1, ERF_ONE], a polynomial in u = t * ERF_MAP[0] + ERF_MAP[1], t = 1/x, u in [-1, 1].
    const ERF_MAP: [f64; 2];
    const ERFC_FIT: &'static [f64];

    fn c(value: f64) -> Self;
    fn to_bits64(self) -> u64;
    fn from_bits64(bits: u64) -> Self;
    fn fma(self, a: Self, b: Self) -> Self;
    fn floor(self) -> Self;
    fn to_i32(self) -> i32;
    fn from_i32(value: i32) -> Self;
}

const fn inverse_factorials<const N: usize>(scale: f64) -> [f64; N] {
    // scale^k / k!
    let mut t = [1.0; N];
    let mut k = 1;
    while k < N {
        t[k] = t[k - 1] * scale / k as f64;
        k += 1;
    }
    t
}

/// 1/k!, and ln2^k/k! (e^(r ln 2) = 2^r).
const EXP: [f64; 16] = inverse_factorials(1.0);
const EXP2: [f64; 16] = inverse_factorials(core::f64::consts::LN_2);

/// sum c[k] x^k over the first `n` coefficients, by Horner's rule with fused multiply-adds.
#[inline(always)]
fn poly<T: Ieee>(x: T, c: &[f64], n: usize) -> T {
    let mut acc = T::c(c[n - 1]);
    let mut k = n - 1;
    while k > 0 {
        k -= 1;
        acc = acc.fma(x, T::c(c[k]));
    }
    acc
}

#[inline(always)]
fn abs<T: Ieee>(x: T) -> T {
    T::from_bits64(x.to_bits64() & !sign_bit::<T>())
}

#[inline(always)]
fn sign_bit<T: Ieee>() -> u64 {
    1 << (T::MANT + exponent_bits::<T>())
}

#[inline(always)]
fn exponent_bits<T: Ieee>() -> u32 {
    if T::MANT == 23 {
        8
    } else {
        11
    }
}

/// |magnitude| with the sign of `sign`.
#[inline(always)]
fn with_sign<T: Ieee>(magnitude: T, sign: T) -> T {
    T::from_bits64(magnitude.to_bits64() | (sign.to_bits64() & sign_bit::<T>()))
}

#[inline(always)]
fn is_nan<T: Ieee>(x: T) -> bool {
    x.partial_cmp(&x).is_none()
}

/// 2^n for n in the normal exponent range.
#[inline(always)]
fn pow2<T: Ieee>(n: i32) -> T {
    T::from_bits64(((n + T::BIAS) as u64) << T::MANT)
}

/// x 2^n for n in twice the normal range: two exact steps, so an underflowing result is rounded once.
#[inline(always)]
fn scale<T: Ieee>(x: T, n: i32) -> T {
    let half = n >> 1;
    x * pow2::<T>(half) * pow2::<T>(n - half)
}

/// x = n ln2 + r with |r| <= ln2/2 (n rounded, r by two fused steps).
#[inline(always)]
fn reduce_ln2<T: Ieee>(x: T) -> (T, i32) {
    let n = (x * T::c(core::f64::consts::LOG2_E) + T::c(0.5)).floor();
    let r = (-n).fma(T::c(T::LN2[0]), x);
    ((-n).fma(T::c(T::LN2[1]), r), n.to_i32())
}

pub(crate) fn exp<T: Ieee>(x: T) -> T {
    if x > T::c(T::EXP_OVER) {
        return T::c(f64::INFINITY);
    }
    if x < T::c(T::EXP_UNDER) {
        return T::c(0.0);
    }
    let (r, n) = reduce_ln2(x);
    scale(poly(r, &EXP, T::EXP_TERMS), n)
}

pub(crate) fn exp2<T: Ieee>(x: T) -> T {
    let over = T::EXP_OVER * core::f64::consts::LOG2_E;
    if x > T::c(over) {
        return T::c(f64::INFINITY);
    }
    if x < T::c(T::EXP_UNDER * core::f64::consts::LOG2_E) {
        return T::c(0.0);
    }
    let n = (x + T::c(0.5)).floor();
    scale(poly(x - n, &EXP2, T::EXP_TERMS), n.to_i32())
}

/// e^r - 1 for |r| <= ln2/2: r + r^2 (1/2 + r/6 + ...), the leading term exact.
#[inline(always)]
fn exp_m1_reduced<T: Ieee>(r: T) -> T {
    (r * r).fma(poly(r, &EXP[2..], T::EXP_TERMS - 1), r)
}

pub(crate) fn exp_m1<T: Ieee>(x: T) -> T {
    if x == T::c(0.0) {
        return x; // -0 keeps its sign, which the polynomial loses
    }
    if abs(x) <= T::c(core::f64::consts::LN_2 / 2.0) {
        return exp_m1_reduced(x);
    }
    // Below, e^x is under half an ulp of 1; above, 2^n - 1 is no longer exact and e^x - 1 rounds as well.
    if x < T::c(-((T::MANT + 2) as f64) * core::f64::consts::LN_2) {
        return T::c(-1.0);
    }
    if x > T::c(T::MANT as f64 * core::f64::consts::LN_2) {
        return exp(x) - T::c(1.0);
    }
    // e^x - 1 = 2^n (e^r - 1) + (2^n - 1), the second term exact.
    let (r, n) = reduce_ln2(x);
    let two_n = pow2::<T>(n);
    two_n.fma(exp_m1_reduced(r), two_n - T::c(1.0))
}

/// A positive finite x = 2^e m, m in [sqrt(1/2), sqrt(2)], f = m - 1 (exact), s = f / (2 + f) (and what its rounding
/// lost, s_lo) and R(s^2), the atanh series beyond its first term: ln m = f - (f^2/2 - s (f^2/2 + R)).
struct LogParts<T> {
    e: T,
    f: T,
    s: T,
    s_lo: T,
    r: T,
}

#[inline(always)]
fn log_reduce<T: Ieee>(x: T) -> LogParts<T> {
    let (x, e0) = if x < T::c(T::MIN_NORMAL) {
        (x * pow2::<T>(T::MANT as i32), -(T::MANT as i32))
    } else {
        (x, 0)
    };
    let bits = x.to_bits64();
    let mantissa = (1u64 << T::MANT) - 1;
    let mut e = ((bits >> T::MANT) as i32 & ((1 << exponent_bits::<T>()) - 1)) - T::BIAS + e0;
    let mut m = T::from_bits64((bits & mantissa) | ((T::BIAS as u64) << T::MANT));
    if m > T::c(core::f64::consts::SQRT_2) {
        m = m * T::c(0.5);
        e += 1;
    }
    let f = m - T::c(1.0);
    let (d, d_lo) = two_sum(T::c(2.0), f);
    let s = f / d;
    let s_lo = ((-s).fma(d, f) - s * d_lo) / d;
    let z = s * s;
    LogParts {
        e: T::from_i32(e),
        f,
        s,
        s_lo,
        r: z * poly(z, &LOG_SERIES, T::LOG_TERMS),
    }
}

/// 2 / (2k + 3): the atanh series ln((1+s)/(1-s)) = 2s + 2s^3/3 + ..., beyond 2s and divided by s^3.
const LOG_SERIES: [f64; 12] = {
    let mut t = [0.0; 12];
    let mut k = 0;
    while k < 12 {
        t[k] = 2.0 / (2 * k + 3) as f64;
        k += 1;
    }
    t
};

/// NaN below 0 (and for NaN), -inf at 0, inf at inf; None for a positive finite x.
#[inline(always)]
fn log_special<T: Ieee>(x: T) -> Option<T> {
    if x.partial_cmp(&T::c(0.0)) != Some(core::cmp::Ordering::Greater) {
        return Some(if x == T::c(0.0) {
            T::c(f64::NEG_INFINITY)
        } else {
            T::c(f64::NAN)
        });
    }
    if x == T::c(f64::INFINITY) {
        return Some(x);
    }
    None
}

pub(crate) fn ln<T: Ieee>(x: T) -> T {
    if let Some(special) = log_special(x) {
        return special;
    }
    let (hi, lo) = ln_two_parts(x);
    hi + lo
}

/// ln x log2 e, the product of the two-part logarithm with log2 e in two parts.
pub(crate) fn log2<T: Ieee>(x: T) -> T {
    if let Some(special) = log_special(x) {
        return special;
    }
    let (hi, lo) = ln_two_parts(x);
    let (l_hi, l_lo) = (T::c(core::f64::consts::LOG2_E), T::c(T::LOG2E_LO));
    let p = hi * l_hi;
    p + (hi.fma(l_hi, -p) + lo.fma(l_hi, hi * l_lo))
}

pub(crate) fn ln_1p<T: Ieee>(x: T) -> T {
    let u = T::c(1.0) + x;
    if u == T::c(1.0) {
        return x; // |x| below half an ulp of 1: ln(1 + x) = x to the last bit
    }
    if log_special(u).is_some() {
        return ln(u);
    }
    // ln(u) (x / (u - 1)) corrects the rounding of 1 + x (Goldberg, 1991).
    ln(u) * (x / (u - T::c(1.0)))
}

pub(crate) fn tanh<T: Ieee>(x: T) -> T {
    let a = abs(x);
    if a > T::c(T::TANH_ONE) {
        return with_sign(T::c(1.0), x);
    }
    let e = exp_m1(a + a);
    with_sign(quotient(e, e, T::c(2.0)), x)
}

pub(crate) fn sigmoid<T: Ieee>(x: T) -> T {
    let e = exp(-x);
    if e == T::c(f64::INFINITY) {
        return T::c(0.0);
    }
    quotient(T::c(1.0), e, T::c(1.0))
}

/// n / (a + b), the sum and the quotient corrected by one residual step (one division): only the inputs' errors
/// remain.
#[inline(always)]
fn quotient<T: Ieee>(n: T, a: T, b: T) -> T {
    let (d, d_lo) = two_sum(a, b);
    let r = T::c(1.0) / d;
    let q = n * r;
    let residual = (-q).fma(d, n) - q * d_lo;
    residual.fma(r, q)
}

/// x = k pi/2 + r, |r| <= pi/4 (for |x| in the accurate range); the quadrant k mod 4.
#[inline(always)]
fn reduce_pio2<T: Ieee>(x: T) -> (T, i32) {
    let k = (x * T::c(core::f64::consts::FRAC_2_PI) + T::c(0.5)).floor();
    let mut r = (-k).fma(T::c(T::PIO2[0]), x);
    r = (-k).fma(T::c(T::PIO2[1]), r);
    r = (-k).fma(T::c(T::PIO2[2]), r);
    (r, k.to_i32() & 3)
}

/// (-1)^k / (2k+1)! and (-1)^k / (2k)!: sin r = r S(r^2), cos r = C(r^2).
const SIN_SERIES: [f64; 10] = alternating(1);
const COS_SERIES: [f64; 10] = alternating(0);

const fn alternating<const N: usize>(first: usize) -> [f64; N] {
    let mut t = [0.0; N];
    let mut value = 1.0;
    let mut k = 0;
    while k < N {
        t[k] = value;
        let n = 2 * k + first;
        value = -value / ((n + 1) * (n + 2)) as f64;
        k += 1;
    }
    t
}

#[inline(always)]
fn sin_cos_reduced<T: Ieee>(r: T) -> (T, T) {
    // r + r^3 (-1/6 + ...) and 1 + r^2 (-1/2 + ...): the leading terms exact, one rounding on the corrections.
    let z = r * r;
    let sin = (r * z).fma(poly(z, &SIN_SERIES[1..], T::SIN_TERMS - 1), r);
    (sin, z.fma(poly(z, &COS_SERIES[1..], T::COS_TERMS - 1), T::c(1.0)))
}

pub(crate) fn sin<T: Ieee>(x: T) -> T {
    if x == T::c(0.0) {
        return x; // -0 keeps its sign, which the reduction loses
    }
    let (r, q) = reduce_pio2(x);
    let (s, c) = sin_cos_reduced(r);
    match q {
        0 => s,
        1 => c,
        2 => -s,
        _ => -c,
    }
}

pub(crate) fn cos<T: Ieee>(x: T) -> T {
    let (r, q) = reduce_pio2(x);
    let (s, c) = sin_cos_reduced(r);
    match q {
        0 => c,
        1 => -s,
        2 => -c,
        _ => s,
    }
}

/// x^y with C's special cases (pow(x, 0) = 1 = pow(1, y), even for NaN; a negative x needs an integer y).
/// ln x is carried in two parts so that y ln x keeps the bits e^(y ln x) needs for large results.
pub(crate) fn powf<T: Ieee>(x: T, y: T) -> T {
    let one = T::c(1.0);
    if y == T::c(0.0) || x == one {
        return one;
    }
    if is_nan(x) || is_nan(y) {
        return T::c(f64::NAN);
    }
    let a = abs(x);
    let y_int = y.floor() == y;
    let y_odd = y_int && abs(y) < T::c((1u64 << (T::MANT + 1)) as f64) && (y * T::c(0.5)).floor() != y * T::c(0.5);
    let negative = x < T::c(0.0) || (x == T::c(0.0) && x.to_bits64() & sign_bit::<T>() != 0);
    if x < T::c(0.0) && !y_int && a != T::c(f64::INFINITY) {
        return T::c(f64::NAN);
    }
    let magnitude = if abs(y) == T::c(f64::INFINITY) {
        if a == one {
            one
        } else if (a > one) == (y > T::c(0.0)) {
            T::c(f64::INFINITY)
        } else {
            T::c(0.0)
        }
    } else if a == T::c(0.0) || a == T::c(f64::INFINITY) {
        if (a == T::c(0.0)) == (y > T::c(0.0)) {
            T::c(0.0)
        } else {
            T::c(f64::INFINITY)
        }
    } else {
        let (hi, lo) = ln_two_parts(a);
        let t = y * hi;
        let t_lo = y.fma(hi, -t) + y * lo;
        let e = exp(t);
        if e == T::c(f64::INFINITY) {
            e
        } else {
            e.fma(t_lo, e)
        }
    };
    if negative && y_odd {
        -magnitude
    } else {
        magnitude
    }
}

/// ln x = hi + lo for a positive finite x, lo carrying what hi cannot: e ln2 + f - f^2/2 summed exactly (TwoSum,
/// TwoProduct), only the small s (f^2/2 + R) rounded.
#[inline(always)]
fn ln_two_parts<T: Ieee>(x: T) -> (T, T) {
    let p = log_reduce(x);
    let half_f = T::c(0.5) * p.f;
    let hh = half_f * p.f;
    let hl = half_f.fma(p.f, -hh);
    let a = p.e * T::c(T::LN2[0]);
    let a_lo = p.e.fma(T::c(T::LN2[0]), -a);
    let (q, q_lo) = two_sum(hh, p.r);
    let sq = p.s * q;
    let sq_lo = p.s.fma(q, -sq);
    let (h1, err1) = two_sum(a, p.f);
    let (h2, err2) = two_sum(h1, -hh);
    let (h3, err3) = two_sum(h2, sq);
    let lo = err1 + err2 + err3 + a_lo + p.e * T::c(T::LN2[1]) - hl + sq_lo + p.s * q_lo + p.s_lo * q;
    let hi = h3 + lo;
    (hi, lo - (hi - h3))
}

/// a + b = sum + err exactly (Knuth's TwoSum).
#[inline(always)]
fn two_sum<T: Ieee>(a: T, b: T) -> (T, T) {
    let sum = a + b;
    let bv = sum - a;
    (sum, (a - (sum - bv)) + (b - bv))
}

pub(crate) fn erf<T: Ieee>(x: T) -> T {
    let a = abs(x);
    if a < T::c(1.0) {
        // a + a (2/sqrt(pi) - 1 - ...): the leading term exact, the rest (under an eighth of it) rounded.
        let z = a * a;
        let rest = T::c(ERF_SERIES[0] - 1.0).fma(T::c(1.0), z * poly(z, &ERF_SERIES[1..], T::ERF_TERMS - 1));
        return with_sign(a.fma(rest, a), x);
    }
    if a >= T::c(T::ERF_ONE) || is_nan(a) {
        return if is_nan(a) { x } else { with_sign(T::c(1.0), x) };
    }
    let t = T::c(1.0) / a;
    let g = poly(
        t.fma(T::c(T::ERF_MAP[0]), T::c(T::ERF_MAP[1])),
        T::ERFC_FIT,
        T::ERFC_FIT.len(),
    );
    with_sign(T::c(1.0) - exp(-(a * a)) * (g * t), x)
}

/// erf of f32 in about 25 instructions (`FastMath::erf_fast`): x + x (P(x^2) - 1) below `ERF_FAST_SPLIT`,
/// 1 - 2^Q(|x|) by `ex2.approx` up to 4, +-1 beyond (P, Q: scripts/fit_erf_fast.py). Both sides are computed and one
/// selected, so a warp whose lanes straddle the split does not run both in turn. Unlike the functions above, the
/// device's result can differ from the emulator's, by `ex2.approx`'s error on the far side.
pub(crate) fn erf_fast_f32(x: f32) -> f32 {
    let a = abs(x);
    let near = a.fma(poly(a * a, &ERF_FAST_NEAR, ERF_FAST_NEAR.len()), a);
    let far = 1.0 - crate::arch::math::ex2_approx(poly(a, &ERF_FAST_FAR, ERF_FAST_FAR.len()));
    // A NaN takes `near`, itself a NaN. (Written as selects in this order, LLVM keeps them selects.)
    #[allow(clippy::neg_cmp_op_on_partial_ord)]
    let r = if !(a >= ERF_FAST_SPLIT) {
        near
    } else if a < 4.0 {
        far
    } else {
        1.0
    };
    with_sign(r, x)
}

const ERF_FAST_SPLIT: f32 = 1.0;
/// erf(x) / x on [0, ERF_FAST_SPLIT^2] in z = x^2, less 1 (the leading term, added exactly).
const ERF_FAST_NEAR: [f64; 7] = [
    1.1283791658483509 - 1.0,
    -0.37612626666720334,
    0.11283594715160218,
    -0.026854212010626412,
    0.005189087423433974,
    -0.000801686428716587,
    7.875875062685488e-05,
];
/// log2(erfc(x)) on [ERF_FAST_SPLIT, 4] in x.
const ERF_FAST_FAR: [f64; 9] = [
    0.0004618615766698807,
    -1.630582171493444,
    -0.911532311288859,
    -0.1588119897709087,
    0.03811764189002414,
    -0.006866645968928733,
    0.000861008516515442,
    -6.644770978074627e-05,
    2.361910227018601e-06,
];

/// 2/sqrt(pi) (-1)^k / (k! (2k + 1)): erf x = x E(x^2).
const ERF_SERIES: [f64; 20] = {
    let mut t = [0.0; 20];
    let mut factorial = 1.0;
    let mut k = 0;
    while k < 20 {
        let sign = if k % 2 == 0 { 1.0 } else { -1.0 };
        t[k] = sign * core::f64::consts::FRAC_2_SQRT_PI / (factorial * (2 * k + 1) as f64);
        factorial *= (k + 1) as f64;
        k += 1;
    }
    t
};

macro_rules! ieee {
    ($t:ident, $mant:literal, $bias:literal, $bits:ty, terms: $exp:literal $log:literal $sin:literal $cos:literal $erf:literal,
     $pio2:expr, $ln2:expr, $log2e_lo:expr, exp: $over:literal $under:literal, ones: $tanh:literal $erf_one:literal, $map:expr,
     $fit:expr) => {
        impl Ieee for $t {
            const MANT: u32 = $mant;
            const BIAS: i32 = $bias;
            const MIN_NORMAL: f64 = $t::MIN_POSITIVE as f64;
            const LN2: [f64; 2] = $ln2;
            const LOG2E_LO: f64 = $log2e_lo;
            const PIO2: [f64; 3] = $pio2;
            const EXP_TERMS: usize = $exp;
            const LOG_TERMS: usize = $log;
            const SIN_TERMS: usize = $sin;
            const COS_TERMS: usize = $cos;
            const ERF_TERMS: usize = $erf;
            const EXP_OVER: f64 = $over;
            const EXP_UNDER: f64 = $under;
            const TANH_ONE: f64 = $tanh;
            const ERF_ONE: f64 = $erf_one;
            const ERF_MAP: [f64; 2] = $map;
            const ERFC_FIT: &'static [f64] = &$fit;
            #[inline(always)]
            fn c(value: f64) -> Self {
                value as $t
            }
            #[inline(always)]
            fn to_bits64(self) -> u64 {
                self.to_bits() as u64
            }
            #[inline(always)]
            fn from_bits64(bits: u64) -> Self {
                $t::from_bits(bits as $bits)
            }
            #[inline(always)]
            fn fma(self, a: Self, b: Self) -> Self {
                crate::arch::math::$t::mul_add(self, a, b)
            }
            #[inline(always)]
            fn floor(self) -> Self {
                crate::arch::math::$t::floor(self)
            }
            #[inline(always)]
            fn to_i32(self) -> i32 {
                self as i32
            }
            #[inline(always)]
            fn from_i32(value: i32) -> Self {
                value as $t
            }
        }
    };
}

// The splits of pi/2 and ln 2 are each part rounded to the format from a 60-digit value; the erfc fits (Chebyshev,
// mpmath) are those of docs/math.md.
ieee!(f32, 23, 127, u32, terms: 8 5 6 6 11,
      [1.5707963705062866, -4.371138828673793e-08, -1.7151245100058819e-15], [0.6931471824645996, -1.9046542121259336e-09], 1.9259629911266175e-08,
      exp: 89.0 -104.0, ones: 9.1 4.0, [8.0 / 3.0, -5.0 / 3.0],
      [0.489524790289337, -0.06434461927192427, -0.00018217785358928056, 0.003802250245229823, -0.0015421514925069782,
       0.0003679123096997042, -3.123759082866196e-05, -2.5657897344807657e-05, 2.147800778062495e-05,
       -7.013177631081287e-06]);
ieee!(f64, 52, 1023, u64, terms: 14 10 9 10 19,
      [core::f64::consts::FRAC_PI_2, 6.123233995736766e-17, -1.4973849048591698e-33], [core::f64::consts::LN_2, 2.3190468138462996e-17], 2.0355273740931033e-17,
      exp: 710.0 -746.0, ones: 19.1 6.0, [2.4, -1.4],
      [0.49666648512593864, -0.07128287792547429, -0.0019368880676843428, 0.006219717587582877, -0.00266934303167284,
       0.0006408677488114277, -2.4390207608130993e-06, -9.303469236513439e-05, 5.951632623511637e-05,
       -2.3855690970734796e-05, 5.899934298094615e-06, 2.140070396196222e-07, -1.2890691724522377e-06,
       9.224650565771039e-07, -4.448191498355789e-07, 1.5795357244927273e-07, -2.7436334821485844e-08,
       -1.8040431253927884e-08, 1.685856492064305e-08, -4.426677548907314e-09, 3.9346549923858945e-09,
       -5.764458571239433e-09, 1.380112958923858e-09, 1.4546030067481999e-09, -6.35511069292512e-10]);

#[cfg(test)]
mod tests {
    use crate::float::{FastMath, GpuFloat};

    /// |got - want| in ulps of f32 at `want` (an f64 reference, so fractions of an ulp count).
    fn ulps32(got: f32, want: f64) -> f64 {
        if got.is_nan() && want.is_nan() || f64::from(got) == want {
            return 0.0;
        }
        let w = want as f32;
        let ulp = f64::from(f32::from_bits(w.abs().to_bits() + 1)) - f64::from(w.abs());
        (f64::from(got) - want).abs() / ulp
    }

    fn sweep(lo: f32, hi: f32, n: usize) -> impl Iterator<Item = f32> {
        (0..=n).map(move |i| lo + (hi - lo) * (i as f32 / n as f32))
    }

    /// Largest error over a sweep of [lo, hi] and of the values near its ends.
    fn worst32(f: fn(f32) -> f32, reference: fn(f64) -> f64, lo: f32, hi: f32) -> f64 {
        sweep(lo, hi, 200_000)
            .map(|x| ulps32(f(x), reference(f64::from(x))))
            .fold(0.0, f64::max)
    }

    /// A function, its f64 reference, the range swept and the bound in ulps.
    type Case = (&'static str, fn(f32) -> f32, fn(f64) -> f64, f32, f32, f64);

    #[test]
    fn f32_functions_are_within_their_bounds_against_f64() {
        let cases: [Case; 14] = [
            ("exp", GpuFloat::exp, f64::exp, -103.0, 88.7, 1.0),
            ("exp2", GpuFloat::exp2, f64::exp2, -149.0, 127.9, 1.0),
            ("exp_m1", GpuFloat::exp_m1, f64::exp_m1, -20.0, 88.7, 1.5),
            ("ln", GpuFloat::ln, f64::ln, 1e-30, 1e30, 1.0),
            ("ln near 1", GpuFloat::ln, f64::ln, 0.5, 2.0, 1.0),
            ("log2", GpuFloat::log2, f64::log2, 0.5, 2.0, 1.5),
            ("ln_1p", GpuFloat::ln_1p, f64::ln_1p, -0.999, 10.0, 2.0),
            ("tanh", GpuFloat::tanh, f64::tanh, -10.0, 10.0, 2.0),
            ("sin", GpuFloat::sin, f64::sin, -100.0, 100.0, 1.5),
            ("cos", GpuFloat::cos, f64::cos, -100.0, 100.0, 1.5),
            (
                "sigmoid",
                GpuFloat::sigmoid,
                |x| 1.0 / (1.0 + (-x).exp()),
                -80.0,
                80.0,
                2.0,
            ),
            ("tanh small", GpuFloat::tanh, f64::tanh, -0.01, 0.01, 2.0),
            // Every f32 in [0, 4.5]: 1.127 ulp at most (docs/math.md); ex2.approx adds under 0.5 on the GPU.
            ("erf_fast", FastMath::erf_fast, GpuFloat::erf, -4.5, 4.5, 1.2),
            ("erf_fast small", FastMath::erf_fast, GpuFloat::erf, -1e-3, 1e-3, 1.2),
        ];
        let mut failed = Vec::new();
        for (name, f, reference, lo, hi, bound) in cases {
            let worst = worst32(f, reference, lo, hi);
            if worst > bound {
                failed.push(format!("{name}: {worst:.3} ulp on [{lo}, {hi}] (bound {bound})"));
            }
        }
        assert!(failed.is_empty(), "{failed:?}");
    }

    #[test]
    fn special_values_follow_std() {
        let inf = f32::INFINITY;
        for (name, f) in [
            ("exp", GpuFloat::exp as fn(f32) -> f32),
            ("exp2", GpuFloat::exp2),
            ("exp_m1", GpuFloat::exp_m1),
        ] {
            assert_eq!(f(inf), inf, "{name}");
            assert!(f(f32::NAN).is_nan(), "{name}");
            assert_eq!(f(0.0), if name == "exp_m1" { 0.0 } else { 1.0 }, "{name}");
        }
        assert_eq!(GpuFloat::exp(-inf), 0.0);
        assert_eq!(GpuFloat::exp(89.0f32), inf);
        assert_eq!(GpuFloat::exp_m1(-inf), -1.0);
        assert_eq!(GpuFloat::exp(-104.0f32), 0.0);
        assert!(GpuFloat::exp(-103.0f32) > 0.0, "subnormal results");
        for f in [GpuFloat::ln as fn(f32) -> f32, GpuFloat::log2] {
            assert_eq!(f(0.0), -inf);
            assert_eq!(f(inf), inf);
            assert!(f(-1.0).is_nan() && f(f32::NAN).is_nan());
            assert_eq!(f(1.0), 0.0);
        }
        assert_eq!(GpuFloat::log2(f32::from_bits(1 << 9)), -140.0, "subnormal input");
        assert_eq!(GpuFloat::ln_1p(-1.0f32), -inf);
        assert!(GpuFloat::ln_1p(-2.0f32).is_nan());
        assert_eq!(GpuFloat::ln_1p(1e-30f32), 1e-30);
        assert_eq!(GpuFloat::tanh(-0.0f32).to_bits(), (-0.0f32).to_bits());
        assert_eq!(GpuFloat::tanh(-inf), -1.0);
        assert_eq!(GpuFloat::erf(inf), 1.0);
        assert_eq!(GpuFloat::erf(-inf), -1.0);
        assert!(GpuFloat::erf(f32::NAN).is_nan() && GpuFloat::tanh(f32::NAN).is_nan());
        assert_eq!(FastMath::erf_fast(inf), 1.0);
        assert_eq!(FastMath::erf_fast(-inf), -1.0);
        assert!(FastMath::erf_fast(f32::NAN).is_nan());
        assert_eq!(GpuFloat::sigmoid(-inf), 0.0);
        assert_eq!(GpuFloat::sigmoid(inf), 1.0);
        assert!(GpuFloat::sin(inf).is_nan() && GpuFloat::cos(f32::NAN).is_nan());
        for f in [
            GpuFloat::sin as fn(f32) -> f32,
            GpuFloat::exp_m1,
            GpuFloat::tanh,
            GpuFloat::erf,
            FastMath::erf_fast,
            GpuFloat::ln_1p,
        ] {
            assert_eq!(f(-0.0).to_bits(), (-0.0f32).to_bits(), "-0 keeps its sign");
        }
    }

    #[test]
    fn powf_follows_cs_special_cases() {
        let (inf, nan) = (f64::INFINITY, f64::NAN);
        let cases = [
            (nan, 0.0, 1.0),
            (1.0, nan, 1.0),
            (-2.0, 3.0, -8.0),
            (-2.0, 2.0, 4.0),
            (-0.0, 3.0, -0.0),
            (-0.0, -3.0, -inf),
            (0.0, -2.0, inf),
            (-inf, 3.0, -inf),
            (-inf, 0.5, inf),
            (-inf, -3.0, -0.0),
            (0.5, inf, 0.0),
            (0.5, -inf, inf),
            (-1.0, inf, 1.0),
            (2.0, 1024.0, inf),
            (2.0, -1075.0, 0.0),
            (4.0, 0.5, 2.0),
        ];
        for (x, y, want) in cases {
            let got = GpuFloat::powf(x, y);
            assert_eq!(
                got.to_bits(),
                f64::powf(x, y).to_bits(),
                "pow({x}, {y}) = {got}, std {}",
                f64::powf(x, y)
            );
            assert_eq!(got.to_bits(), want.to_bits(), "pow({x}, {y})");
        }
        assert!(GpuFloat::powf(-2.0f64, 0.5).is_nan() && GpuFloat::powf(nan, 1.0).is_nan());
        // Large results keep their bits: y ln x is carried in two parts.
        for (x, y) in [(1.0001f32, 880_000.0f32), (10.0, 38.0), (0.3, -70.0), (7.0, 45.5)] {
            let err = ulps32(GpuFloat::powf(x, y), f64::from(x).powf(f64::from(y)));
            assert!(err <= 1.5, "powf({x}, {y}): {err:.2} ulp");
        }
    }
}
