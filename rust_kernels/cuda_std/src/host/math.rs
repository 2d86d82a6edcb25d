//! std's rounding and fused multiply-add, and an emulation of the PTX `.approx` instructions: the exact value
//! rounded to f32, with `.ftz`'s flushing of subnormal inputs and results to zero. The device's results differ from
//! these by at most the instructions' documented errors (docs/math.md has them measured).

macro_rules! std_math {
    ($t:ident) => {
        pub mod $t {
            pub fn sqrt(x: $t) -> $t {
                x.sqrt()
            }
            pub fn mul_add(x: $t, a: $t, b: $t) -> $t {
                x.mul_add(a, b)
            }
            pub fn floor(x: $t) -> $t {
                x.floor()
            }
            pub fn ceil(x: $t) -> $t {
                x.ceil()
            }
            pub fn round(x: $t) -> $t {
                x.round()
            }
            pub fn trunc(x: $t) -> $t {
                x.trunc()
            }
        }
    };
}

std_math!(f32);
std_math!(f64);

/// Subnormals to a zero of their sign, as `.ftz` does.
fn ftz(x: f32) -> f32 {
    if x != 0.0 && x.abs() < f32::MIN_POSITIVE {
        0.0f32.copysign(x)
    } else {
        x
    }
}

macro_rules! approx {
    ($($name:ident: $ftz:expr, |$x:ident| $exact:expr;)*) => {$(
        pub fn $name(x: f32) -> f32 {
            let flush: fn(f32) -> f32 = if $ftz { ftz } else { |v| v };
            let $x = f64::from(flush(x));
            flush($exact as f32)
        }
    )*};
}

approx! {
    ex2_approx: true, |x| x.exp2();
    lg2_approx: true, |x| x.log2();
    sin_approx: true, |x| x.sin();
    cos_approx: true, |x| x.cos();
    tanh_approx: false, |x| x.tanh();
    rsqrt_approx: true, |x| 1.0 / x.sqrt();
    rcp_approx: true, |x| 1.0 / x;
}
