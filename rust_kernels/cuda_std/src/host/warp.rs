//! Warp operations are rendezvous of the live lanes in `mask` (lane = linear thread index % 32).

use super::context::with_current;
use super::cta::{LaneInput, WarpOp};
use crate::warp::ShuffleMode;

/// `shfl.sync` on a 32-bit value, or on both halves of a 64-bit one (`wide`), with PTX's `b` and `c` operands.
pub fn shuffle(mode: ShuffleMode, mask: u32, bits: u64, wide: bool, b: u32, c: u32) -> (u64, bool) {
    let input = LaneInput { bits, b, c };
    with_current("warp shuffle", |current| {
        current
            .cta
            .warp_op(current, WarpOp::Shuffle { mode, wide }, mask, input)
    })
}

pub fn lane_id() -> u32 {
    with_current("lane_id", |current| current.linear % 32)
}

/// The lanes of the warp that had not exited when this lane last passed a barrier or warp operation, where the
/// warp is converged (before the first one: the lanes that have not exited).
pub fn activemask() -> u32 {
    with_current("activemask", |current| current.cta.activemask(current.linear))
}

pub fn sync_warp(mask: u32) {
    with_current("sync_warp", |current| {
        current.cta.warp_op(current, WarpOp::Sync, mask, LaneInput::default())
    });
}

pub fn warp_vote_ballot(mask: u32, pred: bool) -> u32 {
    let input = LaneInput {
        bits: u64::from(pred),
        ..LaneInput::default()
    };
    with_current("warp_vote_ballot", |current| {
        current.cta.warp_op(current, WarpOp::Ballot, mask, input).0 as u32
    })
}
