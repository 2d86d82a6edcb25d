//! Warp-level exchange and votes, with rust-cuda's signatures.
//!
//! Shuffles follow PTX `shfl.sync` exactly: `width` splits the warp into segments of that many lanes, and the
//! returned `bool` is false when the source lane falls outside the segment (the lane then gets its own value).

pub use crate::arch::warp::{activemask, lane_id, sync_warp, warp_vote_ballot};

/// The four `shfl.sync` modes.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum ShuffleMode {
    Up,
    Down,
    Xor,
    Idx,
}

/// A 32- or 64-bit value that can cross lanes (64-bit values move as two 32-bit halves).
pub trait ShuffleValue: Copy {
    const WIDE: bool;
    fn to_bits(self) -> u64;
    fn from_bits(bits: u64) -> Self;
}

macro_rules! shuffle_value {
    ($($t:ty => $bits:ty, $wide:expr, $to:expr, $from:expr);* $(;)?) => {$(
        impl ShuffleValue for $t {
            const WIDE: bool = $wide;
            #[inline(always)]
            fn to_bits(self) -> u64 {
                let to: fn($t) -> $bits = $to;
                to(self) as u64
            }
            #[inline(always)]
            fn from_bits(bits: u64) -> Self {
                let from: fn($bits) -> $t = $from;
                from(bits as $bits)
            }
        }
    )*};
}

shuffle_value! {
    u32 => u32, false, |v| v, |b| b;
    i32 => u32, false, |v| v as u32, |b| b as i32;
    f32 => u32, false, f32::to_bits, f32::from_bits;
    u64 => u64, true, |v| v, |b| b;
    i64 => u64, true, |v| v as u64, |b| b as i64;
    f64 => u64, true, f64::to_bits, f64::from_bits;
}

/// PTX's `c` operand: the segment mask in bits 8..13 and the clamp lane in bits 0..5.
#[inline(always)]
fn clamp_operand(mode: ShuffleMode, width: u32) -> u32 {
    let segment = (32 - width) << 8;
    // `up` clamps at the segment's first lane, the other modes at its last.
    if mode == ShuffleMode::Up {
        segment
    } else {
        segment | 0x1f
    }
}

#[inline(always)]
fn shuffle<T: ShuffleValue>(mode: ShuffleMode, mask: u32, value: T, b: u32, width: u32) -> (T, bool) {
    let (bits, ok) = crate::arch::warp::shuffle(mode, mask, value.to_bits(), T::WIDE, b, clamp_operand(mode, width));
    (T::from_bits(bits), ok)
}

/// The value of lane `lane_id() ^ lane_mask`.
#[inline(always)]
pub fn warp_shuffle_xor<T: ShuffleValue>(mask: u32, value: T, lane_mask: u32, width: u32) -> (T, bool) {
    shuffle(ShuffleMode::Xor, mask, value, lane_mask, width)
}

/// The value of lane `lane_id() + delta`, within the segment.
#[inline(always)]
pub fn warp_shuffle_down<T: ShuffleValue>(mask: u32, value: T, delta: u32, width: u32) -> (T, bool) {
    shuffle(ShuffleMode::Down, mask, value, delta, width)
}

/// The value of lane `lane_id() - delta`, within the segment.
#[inline(always)]
pub fn warp_shuffle_up<T: ShuffleValue>(mask: u32, value: T, delta: u32, width: u32) -> (T, bool) {
    shuffle(ShuffleMode::Up, mask, value, delta, width)
}

/// The value of lane `lane` of the segment.
#[inline(always)]
pub fn warp_shuffle_idx<T: ShuffleValue>(mask: u32, value: T, lane: u32, width: u32) -> (T, bool) {
    shuffle(ShuffleMode::Idx, mask, value, lane, width)
}

/// True when `pred` holds on every lane in `mask`.
#[inline(always)]
pub fn warp_vote_all(mask: u32, pred: bool) -> bool {
    warp_vote_ballot(mask, pred) == mask & activemask()
}

/// True when `pred` holds on any lane in `mask`.
#[inline(always)]
pub fn warp_vote_any(mask: u32, pred: bool) -> bool {
    warp_vote_ballot(mask, pred) != 0
}

/// The source lane a `shfl.sync` reads, and whether it lies inside the segment (PTX ISA, `shfl.sync`).
/// The host emulator uses this; it documents the semantics the device instruction implements.
pub fn shuffle_source(mode: ShuffleMode, lane: u32, b: u32, c: u32) -> (u32, bool) {
    let (b, clamp, segmask) = (b & 0x1f, c & 0x1f, (c >> 8) & 0x1f);
    let max_lane = (lane & segmask) | (clamp & !segmask);
    let min_lane = lane & segmask;
    let (j, ok) = match mode {
        ShuffleMode::Up => {
            let j = lane as i32 - b as i32;
            (j, j >= max_lane as i32)
        }
        ShuffleMode::Down => ((lane + b) as i32, lane + b <= max_lane),
        ShuffleMode::Xor => ((lane ^ b) as i32, lane ^ b <= max_lane),
        ShuffleMode::Idx => {
            let j = min_lane | (b & !segmask);
            (j as i32, j <= max_lane)
        }
    };
    if ok {
        (j as u32, true)
    } else {
        (lane, false)
    }
}
