//! One CTA's synchronisation: the `bar.sync` barrier, warp rendezvous (shuffles, `bar.warp.sync`, ballots),
//! thread exit, failure and deadlock detection, all under one mutex so that "every live thread is blocked" can be
//! decided exactly.
//!
//! Invariant: after every state change, any barrier or warp round that can complete has completed. So when the
//! number of blocked threads equals the number of live ones, nothing can ever wake them: a deadlock.

use super::context::{abort, coords, Current, Launch};
use crate::warp::{shuffle_source, ShuffleMode};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};

/// A warp rendezvous kind. Lanes meet only with lanes doing the same operation with the same mask.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum WarpOp {
    Shuffle { mode: ShuffleMode, wide: bool },
    Sync,
    Ballot,
}

/// A lane's operands of a warp operation: the value (the predicate of a ballot) and `shfl.sync`'s `b` and `c`.
#[derive(Clone, Copy, Default)]
pub(crate) struct LaneInput {
    pub bits: u64,
    pub b: u32,
    pub c: u32,
}

pub(crate) struct Cta {
    pub launch: Arc<Launch>,
    pub block_idx: [u32; 3],
    /// The exposed address of its dynamic shared memory.
    pub shared: usize,
    state: Mutex<State>,
    barrier_cv: Condvar,
    /// One per warp, so a completed warp round wakes only that warp's lanes.
    warp_cvs: Vec<Condvar>,
}

struct State {
    /// The CTA's threads.
    threads: u32,
    /// Threads that have not returned from the kernel (or left it on failure).
    live: u32,
    failed: bool,
    barrier: Barrier,
    warps: Vec<Warp>,
}

#[derive(Default)]
struct Barrier {
    arrived: u32,
    /// Arrived threads whose predicate was non-zero.
    count: u32,
    /// Bumped when the barrier completes; waiters leave when it changes.
    generation: u64,
    /// `(count, arrived)` of the last completed barrier.
    last: (u32, u32),
}

struct Warp {
    /// Lanes that exist and have not exited.
    live: u32,
    /// Rounds still waiting for lanes (usually at most one).
    rounds: Vec<Round>,
    /// Each lane's result of its completed round, taken by the lane when it wakes. A lane is in at most one round
    /// at a time, so its slot cannot be overwritten before it reads it.
    results: [Option<(u64, bool)>; 32],
    /// Each lane's view of `live` when it last passed a barrier or warp round, where the hardware warp is converged:
    /// its `activemask`. Lanes that exit later stay in it, so `ballot(mask, p) == mask & activemask()` holds for
    /// the lanes that voted even if some return right after the vote.
    converged: [Option<u32>; 32],
}

struct Round {
    op: WarpOp,
    mask: u32,
    arrived: u32,
    inputs: [LaneInput; 32],
}

impl Round {
    /// Every live lane of the mask has arrived.
    fn ready(&self, live: u32) -> bool {
        self.mask & live & !self.arrived == 0
    }

    fn result(&self, lane: u32) -> (u64, bool) {
        match self.op {
            WarpOp::Shuffle { mode, wide } => {
                let input = self.inputs[lane as usize];
                let (source, in_segment) = shuffle_source(mode, lane, input.b, input.c);
                // PTX leaves a value from an exited or non-participating lane undefined: give all-ones bits (NaN
                // for floats) so that a kernel relying on it shows wrong results instead of plausible ones.
                let bits = if self.arrived & (1 << source) != 0 {
                    self.inputs[source as usize].bits
                } else if wide {
                    u64::MAX
                } else {
                    u64::from(u32::MAX)
                };
                (bits, in_segment)
            }
            WarpOp::Sync => (0, true),
            WarpOp::Ballot => {
                let ballot = (0..32)
                    .filter(|&l| self.arrived & (1 << l) != 0 && self.inputs[l].bits != 0)
                    .fold(0u32, |acc, l| acc | 1 << l);
                (u64::from(ballot), true)
            }
        }
    }
}

impl Warp {
    /// Completes every round whose live lanes have all arrived; returns whether any did.
    fn complete_rounds(&mut self) -> bool {
        let mut completed = false;
        let mut i = 0;
        while i < self.rounds.len() {
            if self.rounds[i].ready(self.live) {
                let round = self.rounds.swap_remove(i);
                for lane in (0..32).filter(|l| round.arrived & (1 << l) != 0) {
                    self.results[lane as usize] = Some(round.result(lane));
                    self.converged[lane as usize] = Some(self.live);
                }
                completed = true;
            } else {
                i += 1;
            }
        }
        completed
    }
}

impl State {
    fn complete_barrier(&mut self) -> bool {
        let barrier = &mut self.barrier;
        if barrier.arrived == 0 || barrier.arrived != self.live {
            return false;
        }
        barrier.last = (barrier.count, barrier.arrived);
        barrier.arrived = 0;
        barrier.count = 0;
        barrier.generation += 1;
        for warp in &mut self.warps {
            for lane in (0..32).filter(|l| warp.live & (1 << l) != 0) {
                warp.converged[lane] = Some(warp.live);
            }
        }
        true
    }
}

impl Cta {
    pub fn new(launch: Arc<Launch>, block_idx: [u32; 3], shared: usize) -> Cta {
        let threads = launch.block.iter().product::<u32>();
        let warps = threads.div_ceil(32);
        let warp = |w: u32| Warp {
            live: u32::MAX >> (32 - (threads - 32 * w).min(32)),
            rounds: Vec::new(),
            results: [None; 32],
            converged: [None; 32],
        };
        Cta {
            launch,
            block_idx,
            shared,
            state: Mutex::new(State {
                threads,
                live: threads,
                failed: false,
                barrier: Barrier::default(),
                warps: (0..warps).map(warp).collect(),
            }),
            barrier_cv: Condvar::new(),
            warp_cvs: (0..warps).map(|_| Condvar::new()).collect(),
        }
    }

    /// The state lock. No code panics while holding it, but a poisoned lock is still usable.
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Records `message` as the launch's error unless one is recorded, and wakes every waiting thread to leave.
    pub fn fail(&self, message: String) {
        self.fail_locked(&mut self.lock(), message);
    }

    fn fail_locked(&self, state: &mut State, message: String) {
        self.launch.note_failure(&message);
        state.failed = true;
        self.barrier_cv.notify_all();
        for cv in &self.warp_cvs {
            cv.notify_all();
        }
    }

    /// A thread has left the kernel (returned, panicked or aborted): it no longer counts for barriers and warp
    /// rounds, which may complete now, or deadlock if every remaining thread is blocked.
    pub fn exit(&self, linear: u32) {
        let mut state = self.lock();
        let warp = (linear / 32) as usize;
        state.live -= 1;
        state.warps[warp].live &= !(1 << (linear % 32));
        if !self.partial_barrier(&mut state) && state.complete_barrier() {
            self.barrier_cv.notify_all();
        }
        if state.warps[warp].complete_rounds() {
            self.warp_cvs[warp].notify_all();
        }
        self.detect_deadlock(&mut state);
        if state.live == 0 {
            self.launch.cta_ended(self.block_idx);
        }
    }

    /// Fails the launch if every live thread has reached the barrier but some of the CTA's threads exited before it:
    /// a barrier must be reached by every thread of the CTA (PTX leaves any other use undefined; hardware that lets
    /// it pass hides the bug). Returns whether it failed.
    fn partial_barrier(&self, state: &mut State) -> bool {
        let arrived = state.barrier.arrived;
        if state.failed || arrived == 0 || arrived != state.live || state.live == state.threads {
            return false;
        }
        let message = format!(
            "kernel {}: a barrier (sync_threads) reached by {arrived} of the {} threads of block {}: the others \
             exited without it; every thread of a CTA must reach each barrier",
            self.launch.kernel,
            state.threads,
            coords(self.block_idx)
        );
        self.fail_locked(state, message);
        true
    }

    /// Fails the launch if every live thread is blocked (the invariant says none can be released).
    fn detect_deadlock(&self, state: &mut State) {
        if state.failed || state.live == 0 {
            return;
        }
        let in_warp_op = |op: fn(&WarpOp) -> bool| -> u32 {
            let rounds = state.warps.iter().flat_map(|w| &w.rounds);
            rounds.filter(|r| op(&r.op)).map(|r| r.arrived.count_ones()).sum()
        };
        let waiting = [
            (state.barrier.arrived, "sync_threads"),
            (in_warp_op(|op| matches!(op, WarpOp::Shuffle { .. })), "a warp shuffle"),
            (in_warp_op(|op| *op == WarpOp::Sync), "sync_warp"),
            (in_warp_op(|op| *op == WarpOp::Ballot), "a warp vote"),
        ];
        if waiting.iter().map(|(n, _)| n).sum::<u32>() < state.live {
            return;
        }
        let mut parts = waiting.iter().filter(|(n, _)| *n > 0);
        let mut detail = parts
            .next()
            .map_or(String::new(), |(n, what)| format!("{n} wait in {what}"));
        for (n, what) in parts {
            detail += &format!(", {n} in {what}");
        }
        let message = format!(
            "kernel {}: threads of block {} never meet at a barrier: {detail}",
            self.launch.kernel,
            coords(self.block_idx)
        );
        self.fail_locked(state, message);
    }

    /// `bar.sync` / `bar.red`: waits for every live thread of the CTA; returns `(count, arrived)`, the number of
    /// arrived threads with a non-zero predicate and the number of arrived threads.
    pub fn barrier(&self, pred: bool) -> (u32, u32) {
        let mut state = self.lock();
        state.barrier.arrived += 1;
        state.barrier.count += u32::from(pred);
        let generation = state.barrier.generation;
        if !self.partial_barrier(&mut state) {
            if state.complete_barrier() {
                self.barrier_cv.notify_all();
            } else {
                self.detect_deadlock(&mut state);
            }
        }
        self.wait(state, &self.barrier_cv, |state| {
            (state.barrier.generation != generation).then_some(state.barrier.last)
        })
    }

    /// A warp rendezvous: waits until every live lane of `mask` has arrived at the same operation, then returns
    /// this lane's result.
    pub fn warp_op(&self, current: &Current, op: WarpOp, mask: u32, input: LaneInput) -> (u64, bool) {
        let (warp, lane) = ((current.linear / 32) as usize, current.linear % 32);
        if mask & (1 << lane) == 0 {
            current.fail(format!(
                "kernel {}: a warp operation's mask {mask:#010x} excludes the calling lane {lane}, in {}",
                self.launch.kernel,
                current.location()
            ));
        }
        let mut state = self.lock();
        let w = &mut state.warps[warp];
        let round = match w.rounds.iter().position(|r| r.op == op && r.mask == mask) {
            Some(round) => round,
            None => {
                w.rounds.push(Round {
                    op,
                    mask,
                    arrived: 0,
                    inputs: [LaneInput::default(); 32],
                });
                w.rounds.len() - 1
            }
        };
        w.rounds[round].arrived |= 1 << lane;
        w.rounds[round].inputs[lane as usize] = input;
        if w.complete_rounds() {
            self.warp_cvs[warp].notify_all();
        } else {
            self.detect_deadlock(&mut state);
        }
        self.wait(state, &self.warp_cvs[warp], |state| {
            state.warps[warp].results[lane as usize].take()
        })
    }

    /// Waits on `cv` until `ready` yields this thread's result; unwinds the thread if the CTA fails meanwhile.
    fn wait<'s, T>(
        &'s self,
        mut state: MutexGuard<'s, State>,
        cv: &Condvar,
        mut ready: impl FnMut(&mut State) -> Option<T>,
    ) -> T {
        loop {
            if state.failed {
                drop(state);
                abort();
            }
            if let Some(result) = ready(&mut state) {
                return result;
            }
            state = self.block(state, cv);
        }
    }

    /// Lets the other threads run until this one checks its condition again: the fiber yields (the condition
    /// variables have no waiters then).
    #[cfg(all(target_arch = "x86_64", target_os = "linux", not(rk_emulator_threads)))]
    fn block<'s>(&'s self, state: MutexGuard<'s, State>, _: &Condvar) -> MutexGuard<'s, State> {
        drop(state);
        super::context::let_others_run();
        self.lock()
    }

    /// Lets the other threads run until this one checks its condition again: the OS thread sleeps on `cv`.
    #[cfg(any(not(all(target_arch = "x86_64", target_os = "linux")), rk_emulator_threads))]
    fn block<'s>(&'s self, state: MutexGuard<'s, State>, cv: &Condvar) -> MutexGuard<'s, State> {
        cv.wait(state).unwrap_or_else(PoisonError::into_inner)
    }

    /// The lanes of the caller's warp that had not exited when it last passed a barrier or warp round (before the
    /// first one: that have not exited).
    pub fn activemask(&self, linear: u32) -> u32 {
        let warp = &self.lock().warps[(linear / 32) as usize];
        warp.converged[(linear % 32) as usize].unwrap_or(warp.live)
    }
}
