use crate::warp::ShuffleMode;
use core::arch::asm;

macro_rules! shfl {
    ($mode:literal, $mask:expr, $value:expr, $b:expr, $c:expr) => {{
        let (out, ok): (u32, u32);
        unsafe {
            asm!(
                concat!("{{ .reg .pred p; shfl.sync.", $mode, ".b32 {out}|p, {value}, {b}, {c}, {mask}; selp.u32 {ok}, 1, 0, p; }}"),
                out = out(reg32) out, ok = out(reg32) ok, value = in(reg32) $value,
                b = in(reg32) $b, c = in(reg32) $c, mask = in(reg32) $mask,
            )
        };
        (out, ok != 0)
    }};
}

#[inline(always)]
fn shuffle32(mode: ShuffleMode, mask: u32, value: u32, b: u32, c: u32) -> (u32, bool) {
    match mode {
        ShuffleMode::Up => shfl!("up", mask, value, b, c),
        ShuffleMode::Down => shfl!("down", mask, value, b, c),
        ShuffleMode::Xor => shfl!("bfly", mask, value, b, c),
        ShuffleMode::Idx => shfl!("idx", mask, value, b, c),
    }
}

#[inline(always)]
pub fn shuffle(mode: ShuffleMode, mask: u32, bits: u64, wide: bool, b: u32, c: u32) -> (u64, bool) {
    let (lo, ok) = shuffle32(mode, mask, bits as u32, b, c);
    if !wide {
        return (lo as u64, ok);
    }
    let (hi, _) = shuffle32(mode, mask, (bits >> 32) as u32, b, c);
    ((hi as u64) << 32 | lo as u64, ok)
}

#[inline(always)]
pub fn lane_id() -> u32 {
    let lane: u32;
    unsafe { asm!("mov.u32 {lane}, %laneid;", lane = out(reg32) lane) };
    lane
}

#[inline(always)]
pub fn activemask() -> u32 {
    let mask: u32;
    unsafe { asm!("activemask.b32 {mask};", mask = out(reg32) mask) };
    mask
}

#[inline(always)]
pub fn sync_warp(mask: u32) {
    unsafe { asm!("bar.warp.sync {mask};", mask = in(reg32) mask) };
}

#[inline(always)]
pub fn warp_vote_ballot(mask: u32, pred: bool) -> u32 {
    let ballot: u32;
    unsafe {
        asm!(
            "{{ .reg .pred p; setp.ne.u32 p, {pred}, 0; vote.sync.ballot.b32 {ballot}, p, {mask}; }}",
            pred = in(reg32) pred as u32, ballot = out(reg32) ballot, mask = in(reg32) mask,
        )
    };
    ballot
}
