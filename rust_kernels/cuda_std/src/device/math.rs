pub mod f32 {
    #[inline(always)]
    pub fn sqrt(x: f32) -> f32 {
        core::f32::math::sqrt(x)
    }
    #[inline(always)]
    pub fn mul_add(x: f32, a: f32, b: f32) -> f32 {
        core::f32::math::mul_add(x, a, b)
    }
}

pub mod f64 {
    #[inline(always)]
    pub fn sqrt(x: f64) -> f64 {
        core::f64::math::sqrt(x)
    }
    #[inline(always)]
    pub fn mul_add(x: f64, a: f64, b: f64) -> f64 {
        core::f64::math::mul_add(x, a, b)
    }
}
