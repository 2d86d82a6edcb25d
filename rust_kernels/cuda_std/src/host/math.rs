pub mod f32 {
    pub fn sqrt(x: f32) -> f32 {
        x.sqrt()
    }

    pub fn mul_add(x: f32, a: f32, b: f32) -> f32 {
        x.mul_add(a, b)
    }
}

pub mod f64 {
    pub fn sqrt(x: f64) -> f64 {
        x.sqrt()
    }

    pub fn mul_add(x: f64, a: f64, b: f64) -> f64 {
        x.mul_add(a, b)
    }
}
