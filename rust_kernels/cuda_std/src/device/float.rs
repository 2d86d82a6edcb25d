//! bf16 / f16 conversions with PTX `cvt`; the 16-bit values travel as their bits in `.b16` registers.
//! Narrowing uses `.rn` (round to nearest even); `cvt.f32.bf16` needs sm_90 (PTX ISA 7.8).

use core::arch::asm;

macro_rules! cvt {
    ($name:ident: $from:ty, $in_class:ident => $to:ty, $out_class:ident, $insn:literal) => {
        #[inline(always)]
        pub fn $name(value: $from) -> $to {
            let out: $to;
            unsafe {
                asm!(
                    concat!($insn, " {out}, {value};"),
                    out = out($out_class) out, value = in($in_class) value,
                    options(pure, nomem, nostack),
                )
            };
            out
        }
    };
}

cvt!(bf16_to_f32: u16, reg16 => f32, reg32, "cvt.f32.bf16");
cvt!(f32_to_bf16: f32, reg32 => u16, reg16, "cvt.rn.bf16.f32");
cvt!(f16_to_f32: u16, reg16 => f32, reg32, "cvt.f32.f16");
cvt!(f32_to_f16: f32, reg32 => u16, reg16, "cvt.rn.f16.f32");
