//! Tests of the emulator. Kernels that succeed use `#[kernel]`; kernels whose launch must fail are plain
//! `unsafe fn(&[ArgValue])`, since a failing thread unwinds, and `#[kernel]` makes the kernel `extern "C"`.

use super::abi::{self, RawArg, KIND_F32, KIND_F64, KIND_I32, KIND_I64, KIND_PTR, KIND_U32, KIND_U64};
use super::{
    cancel_launches, Arg, ArgValue, FromArg, HostKernel, LaunchConfig, LaunchError, LaunchErrorKind, Param,
    MAX_SHARED_MEM_BYTES,
};
use crate::prelude::*;
use crate::thread::*;
use crate::warp::*;
use std::ffi::{c_char, CStr};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{mpsc, PoisonError, RwLock, RwLockReadGuard};
use std::time::{Duration, Instant};

/// A cancellation interrupts every launch in progress in the process: the tests that cancel hold this lock
/// exclusively, every other launch holds it shared.
static CANCELLATION: RwLock<()> = RwLock::new(());

fn no_cancellation() -> RwLockReadGuard<'static, ()> {
    CANCELLATION.read().unwrap_or_else(PoisonError::into_inner)
}

/// Every buffer these tests pass outlives its launch.
fn launch(kernel: &HostKernel, config: &LaunchConfig, args: &[Arg]) -> Result<(), LaunchError> {
    let _shared = no_cancellation();
    unsafe { super::launch(kernel, config, args) }
}

const FULL: u32 = u32::MAX;

fn config(grid: [u32; 3], block: [u32; 3], shared_mem_bytes: usize) -> LaunchConfig {
    LaunchConfig {
        grid,
        block,
        shared_mem_bytes,
        checked: true,
        cooperative: false,
    }
}

fn buffer<T>(data: &mut [T]) -> Arg {
    Arg {
        value: ArgValue::Ptr(data.as_mut_ptr().expose_provenance()),
        bytes: size_of_val(data),
    }
}

fn scalar(value: ArgValue) -> Arg {
    Arg { value, bytes: 0 }
}

fn launch_error(kernel: &HostKernel, config: &LaunchConfig, args: &[Arg]) -> String {
    launch(kernel, config, args)
        .expect_err("the launch should fail")
        .to_string()
}

fn linear_tid() -> u32 {
    thread_idx_x() + block_dim_x() * (thread_idx_y() + block_dim_y() * thread_idx_z())
}

#[kernel]
unsafe fn indices(out: *mut u32) {
    let block = block_idx_x() + grid_dim_x() * (block_idx_y() + grid_dim_y() * block_idx_z());
    let threads = block_dim_x() * block_dim_y() * block_dim_z();
    let base = (block * threads + linear_tid()) as usize * 8;
    let grid = grid_dim_x() * 100 + grid_dim_y() * 10 + grid_dim_z();
    let values = [
        thread_idx_x(),
        thread_idx_y(),
        thread_idx_z(),
        block_idx_x(),
        block_idx_y(),
        block_idx_z(),
    ];
    for (k, value) in values.into_iter().chain([lane_id(), grid]).enumerate() {
        unsafe { out.store(base + k, value) };
    }
}

#[test]
fn indices_of_every_thread() {
    let (grid, block) = ([2, 3, 1], [4, 3, 5]);
    let mut out = vec![u32::MAX; 6 * 60 * 8];
    launch(&indices__HOST, &config(grid, block, 0), &[buffer(&mut out)]).unwrap();
    assert_eq!(
        indices__HOST.params,
        &[Param {
            name: "out",
            ty: "*mut u32"
        }]
    );
    let mut rows = out.chunks(8);
    for (bz, by, bx) in (0..1).flat_map(|z| (0..3).flat_map(move |y| (0..2).map(move |x| (z, y, x)))) {
        for (tz, ty, tx) in (0..5).flat_map(|z| (0..3).flat_map(move |y| (0..4).map(move |x| (z, y, x)))) {
            let lane = (tx + 4 * (ty + 3 * tz)) % 32;
            assert_eq!(rows.next().unwrap(), [tx, ty, tz, bx, by, bz, lane, 231]);
        }
    }
}

#[test]
#[should_panic(expected = "thread_idx_x called outside a kernel launch")]
fn indices_outside_a_launch_panic() {
    thread_idx_x();
}

#[test]
fn argument_types() {
    assert_eq!(<*const u16>::TYPE, "*const u16");
    assert_eq!(<*mut f64>::TYPE, "*mut f64");
    assert_eq!(i64::TYPE, "i64");
    assert_eq!(f32::from_arg(&ArgValue::F32(1.5)), 1.5);
    assert_eq!(<*mut u8>::from_arg(&ArgValue::Ptr(64)).addr(), 64);
    assert_eq!(<*mut bf16>::TYPE, "*mut bf16");
    assert_eq!(<*const bf16>::TYPE, "*const bf16");
    assert_eq!(<*mut f16>::TYPE, "*mut f16");
    assert_eq!(<*const f16>::TYPE, "*const f16");
    assert_eq!(<*const f16>::from_arg(&ArgValue::Ptr(32)).addr(), 32);
}

#[kernel]
unsafe fn block_sum(x: *mut f32, sums: *mut f32, saw_nan: *mut u32) {
    let tid = thread_idx_x() as usize;
    let n = block_dim_x() as usize;
    let shared = crate::shared::dynamic_shared_mem::<f32>();
    unsafe {
        saw_nan.store(block_idx_x() as usize * n + tid, u32::from(shared.load(tid).is_nan()));
        shared.store(tid, x.load(block_idx_x() as usize * n + tid));
        sync_threads();
        let mut stride = n / 2;
        while stride > 0 {
            if tid < stride {
                shared.store(tid, shared.load(tid) + shared.load(tid + stride));
            }
            sync_threads();
            stride /= 2;
        }
        if tid == 0 {
            sums.store(block_idx_x() as usize, shared.load(0));
        }
    }
}

#[test]
fn cta_sum_through_shared_memory() {
    let mut x: Vec<f32> = (0..3 * 128).map(|i| i as f32).collect();
    let (mut sums, mut saw_nan) = (vec![0.0f32; 3], vec![0u32; 3 * 128]);
    let args = [buffer(&mut x), buffer(&mut sums), buffer(&mut saw_nan)];
    launch(&block_sum__HOST, &config([3, 1, 1], [128, 1, 1], 128 * 4), &args).unwrap();
    for (b, sum) in sums.iter().enumerate() {
        assert_eq!(*sum, (0..128).map(|i| (b * 128 + i) as f32).sum::<f32>());
    }
    // Every CTA starts with shared memory reset to NaN, whatever the previous CTA left there.
    assert!(saw_nan.iter().all(|&nan| nan == 1));
}

/// Each thread stores its index in shared memory and, with no barrier, reads its partner's (tid ^ 1): a race.
#[kernel]
unsafe fn unsynchronised_partner(saw_nan: *mut u32) {
    let tid = thread_idx_x() as usize;
    let shared = crate::shared::dynamic_shared_mem::<f32>();
    unsafe {
        shared.store(tid, tid as f32);
        let nan = shared.load(tid ^ 1).is_nan();
        saw_nan.store(block_idx_x() as usize * block_dim_x() as usize + tid, u32::from(nan));
    }
}

/// As fibers, even CTAs run their threads in order and odd ones in reverse: of each pair, the thread that runs
/// first reads its partner's element unwritten (NaN), the lower one in CTA 0 and the higher one in CTA 1.
#[test]
#[cfg(all(target_arch = "x86_64", target_os = "linux", not(rk_emulator_threads)))]
fn a_missing_barrier_reads_unwritten_shared_memory_either_way() {
    let n = 64;
    let mut saw_nan = vec![0u32; 2 * n];
    let cfg = config([2, 1, 1], [n as u32, 1, 1], n * 4);
    launch(&unsynchronised_partner__HOST, &cfg, &[buffer(&mut saw_nan)]).unwrap();
    for tid in 0..n {
        let expected = if tid % 2 == 0 { (1, 0) } else { (0, 1) };
        assert_eq!((saw_nan[tid], saw_nan[n + tid]), expected, "thread {tid}");
    }
}

/// Polls a thread makes before it gives up waiting (a test that would otherwise hang fails instead).
const SPIN_LIMIT: u32 = 1 << 20;

/// Thread 0 polls a flag with atomics until the CTA's last thread sets it (or SPIN_LIMIT polls): legal on the GPU
/// (independent thread scheduling), so every thread must make progress while another spins.
#[kernel]
unsafe fn spin_until_set(flag: *mut u32, polls: *mut u32) {
    let (tid, b) = (thread_idx_x(), block_idx_x() as usize);
    unsafe {
        if tid == 0 {
            let mut n = 0u32;
            while crate::atomic::atomic_add(flag.add(b), 0) == 0 && n < SPIN_LIMIT {
                n += 1;
            }
            polls.store(b, n);
        } else if tid == block_dim_x() - 1 {
            crate::atomic::atomic_add(flag.add(b), 1);
        }
    }
}

#[test]
fn a_thread_spinning_on_an_atomic_lets_the_others_run() {
    let (mut flags, mut polls) = (vec![0u32; 2], vec![0u32; 2]);
    let cfg = config([2, 1, 1], [64, 1, 1], 0);
    launch(&spin_until_set__HOST, &cfg, &[buffer(&mut flags), buffer(&mut polls)]).unwrap();
    assert_eq!(flags, [1, 1]);
    assert!(
        polls.iter().all(|&n| n < SPIN_LIMIT),
        "thread 0 spun {polls:?} times: the setter never ran"
    );
}

/// Not a test: the emulator's time per CTA (256 threads, block_sum's 9 barriers), in either mode. `cargo test
/// --release -p cuda_std emulator_time -- --ignored --nocapture`, with `RUSTFLAGS="--cfg rk_emulator_threads"` for
/// OS threads (docs/results/cpu-2026-12-05-host-side/).
#[test]
#[ignore]
fn emulator_time_per_cta() {
    let (ctas, n) = (64, 256);
    let mut x: Vec<f32> = (0..ctas * n).map(|i| (i % 7) as f32).collect();
    let (mut sums, mut saw_nan) = (vec![0.0f32; ctas], vec![0u32; ctas * n]);
    let args = [buffer(&mut x), buffer(&mut sums), buffer(&mut saw_nan)];
    let cfg = config([ctas as u32, 1, 1], [n as u32, 1, 1], n * 4);
    for round in 0..3 {
        let start = Instant::now();
        launch(&block_sum__HOST, &cfg, &args).unwrap();
        let ms = start.elapsed().as_secs_f64() * 1e3 / ctas as f64;
        eprintln!("round {round}: {ms:.3} ms per CTA of {n} threads (block_sum, 9 barriers)");
    }
}

const MODES: [ShuffleMode; 4] = [ShuffleMode::Up, ShuffleMode::Down, ShuffleMode::Xor, ShuffleMode::Idx];

/// `shfl.sync`'s source lane and predicate, written from the PTX ISA's description for a segment `width` wide.
fn ptx_source(mode: ShuffleMode, lane: u32, b: u32, width: u32) -> (u32, bool) {
    let b = b & 31;
    let first = lane / width * width;
    let last = first + width - 1;
    let (source, ok) = match mode {
        ShuffleMode::Up => (lane.wrapping_sub(b), lane >= b && lane - b >= first),
        ShuffleMode::Down => (lane + b, lane + b <= last),
        ShuffleMode::Xor => (lane ^ b, lane ^ b <= last),
        ShuffleMode::Idx => (first + b % width, true),
    };
    if ok {
        (source, true)
    } else {
        (lane, false)
    }
}

const DELTAS: u32 = 40;

/// `b` of a shuffle: the delta, except for `idx`, where each lane reads a different lane.
fn shuffle_operand(mode: ShuffleMode, delta: u32, lane: u32) -> u32 {
    if mode == ShuffleMode::Idx {
        delta + 7 * lane
    } else {
        delta
    }
}

fn narrow_value(tid: u32) -> u32 {
    0xA000_0000 | (tid * 16 + 3)
}

fn wide_value(tid: u32) -> u64 {
    u64::from(tid + 1) << 36 | u64::from(0x5555_0000 + tid)
}

#[kernel]
unsafe fn shuffles(mode: u32, width: u32, wide: u32, values: *mut u64, oks: *mut u32) {
    let (mode, tid) = (MODES[mode as usize], thread_idx_x());
    for delta in 0..DELTAS {
        let b = shuffle_operand(mode, delta, lane_id());
        let (value, ok) = if wide == 1 {
            let value = wide_value(tid);
            match mode {
                ShuffleMode::Up => warp_shuffle_up(FULL, value, b, width),
                ShuffleMode::Down => warp_shuffle_down(FULL, value, b, width),
                ShuffleMode::Xor => warp_shuffle_xor(FULL, value, b, width),
                ShuffleMode::Idx => warp_shuffle_idx(FULL, value, b, width),
            }
        } else {
            let value = narrow_value(tid);
            let (value, ok) = match mode {
                ShuffleMode::Up => warp_shuffle_up(FULL, value, b, width),
                ShuffleMode::Down => warp_shuffle_down(FULL, value, b, width),
                ShuffleMode::Xor => warp_shuffle_xor(FULL, value, b, width),
                ShuffleMode::Idx => warp_shuffle_idx(FULL, value, b, width),
            };
            (u64::from(value), ok)
        };
        let at = (delta * block_dim_x() + tid) as usize;
        unsafe {
            values.store(at, value);
            oks.store(at, u32::from(ok));
        }
    }
}

#[test]
fn every_shuffle_mode_follows_ptx() {
    let threads = 64;
    for (m, &mode) in MODES.iter().enumerate() {
        for width in [32, 16, 4, 1] {
            for wide in [false, true] {
                let mut values = vec![0u64; (DELTAS * threads) as usize];
                let mut oks = vec![0u32; values.len()];
                let args = [
                    scalar(ArgValue::U32(m as u32)),
                    scalar(ArgValue::U32(width)),
                    scalar(ArgValue::U32(u32::from(wide))),
                    buffer(&mut values),
                    buffer(&mut oks),
                ];
                launch(&shuffles__HOST, &config([1, 1, 1], [threads, 1, 1], 0), &args).unwrap();
                for delta in 0..DELTAS {
                    for tid in 0..threads {
                        let lane = tid % 32;
                        let (source, ok) = ptx_source(mode, lane, shuffle_operand(mode, delta, lane), width);
                        let source = tid - lane + source;
                        let value = if wide {
                            wide_value(source)
                        } else {
                            u64::from(narrow_value(source))
                        };
                        let at = (delta * threads + tid) as usize;
                        let case = format!("{mode:?} width {width} wide {wide} delta {delta} thread {tid}");
                        assert_eq!((values[at], oks[at]), (value, u32::from(ok)), "{case}");
                    }
                }
            }
        }
    }
}

#[kernel]
unsafe fn partial_warp(values: *mut u32, masks: *mut u32) {
    let tid = thread_idx_x();
    let mask = activemask();
    let (value, _) = warp_shuffle_down(FULL, tid, 4, 32);
    unsafe {
        values.store(tid as usize, value);
        masks.store(tid as usize, mask);
    }
}

#[test]
fn shuffle_from_a_missing_lane_gives_all_ones() {
    let (mut values, mut masks) = (vec![0u32; 40], vec![0u32; 40]);
    let args = [buffer(&mut values), buffer(&mut masks)];
    launch(&partial_warp__HOST, &config([1, 1, 1], [40, 1, 1], 0), &args).unwrap();
    // The second warp has lanes 0..8 only: its lanes 4..8 read lanes that do not exist.
    for tid in 0..40 {
        let expected = match tid {
            28..32 => tid,
            36..40 => u32::MAX,
            _ => tid + 4,
        };
        assert_eq!(values[tid as usize], expected, "thread {tid}");
        assert_eq!(masks[tid as usize], if tid < 32 { FULL } else { 0xFF });
    }
}

#[kernel]
unsafe fn early_exit(out: *mut u32) {
    let tid = thread_idx_x();
    if lane_id() >= 20 {
        return;
    }
    sync_warp(FULL); // a convergence point after the exits (activemask reads the lanes converged there)
    let results = [
        activemask(),
        warp_vote_ballot(FULL, lane_id().is_multiple_of(2)),
        warp_shuffle_idx(FULL, tid, 19, 32).0,
    ];
    for (k, result) in results.into_iter().enumerate() {
        unsafe { out.store(tid as usize * 3 + k, result) };
    }
}

#[test]
fn exited_threads_do_not_block_warp_operations() {
    // (A barrier after such an exit is an error: a_barrier_reached_by_part_of_the_cta_fails_the_launch.)
    let mut out = vec![0u32; 64 * 3];
    launch(
        &early_exit__HOST,
        &config([1, 1, 1], [64, 1, 1], 0),
        &[buffer(&mut out)],
    )
    .unwrap();
    for tid in (0..64).filter(|tid| tid % 32 < 20) {
        let expected = [0xF_FFFF, 0x5_5555, tid / 32 * 32 + 19];
        assert_eq!(out[tid as usize * 3..][..3], expected, "thread {tid}");
    }
}

#[kernel]
unsafe fn votes(out: *mut u32) {
    let (tid, lane) = (thread_idx_x(), lane_id());
    // The two half-warps vote separately.
    let half = if lane < 16 { 0xFFFF } else { 0xFFFF_0000 };
    let results = [
        warp_vote_ballot(FULL, lane.is_multiple_of(3)),
        u32::from(warp_vote_all(FULL, true)),
        u32::from(warp_vote_all(FULL, lane != 3)),
        u32::from(warp_vote_any(FULL, lane == 7)),
        u32::from(warp_vote_any(FULL, false)),
        warp_vote_ballot(half, lane < 4 || lane == 20),
        sync_threads_count(u32::from(tid.is_multiple_of(4))),
        sync_threads_and(u32::from(tid < 100)),
        sync_threads_and(u32::from(tid != 50)),
        sync_threads_or(u32::from(tid == 99)),
        sync_threads_or(0),
    ];
    sync_warp(FULL);
    sync_warp(half);
    for (k, result) in results.into_iter().enumerate() {
        unsafe { out.store(tid as usize * 11 + k, result) };
    }
}

#[test]
fn votes_and_barrier_reductions() {
    let mut out = vec![0u32; 100 * 11];
    launch(&votes__HOST, &config([1, 1, 1], [100, 1, 1], 0), &[buffer(&mut out)]).unwrap();
    for tid in 0..100u32 {
        let lane = tid % 32;
        let live = if tid < 96 { FULL } else { 0xF };
        let half = if lane < 16 { 0xF } else { 1 << 20 };
        let expected = [
            0x4924_9249 & live,
            1,
            0,
            u32::from(tid < 96),
            0,
            half & live,
            25,
            1,
            0,
            1,
            0,
        ];
        assert_eq!(out[tid as usize * 11..][..11], expected, "thread {tid}");
    }
}

#[kernel]
unsafe fn atomics(sum32: *mut f32, sum64: *mut f64, shared_sums: *mut f32) {
    let shared = crate::shared::dynamic_shared_mem::<f32>();
    let tid = thread_idx_x();
    unsafe {
        if tid == 0 {
            shared.store(0, 0.0);
        }
        sync_threads();
        atomic::mid::atomic_fetch_add_f32_device(sum32, Ordering::Relaxed, tid as f32);
        atomic::mid::atomic_fetch_add_f64_device(sum64.add(1), Ordering::Relaxed, 0.5);
        atomic::mid::atomic_fetch_add_f32_device(shared, Ordering::Relaxed, 1.0);
        sync_threads();
        if tid == 0 {
            shared_sums.store(block_idx_x() as usize, shared.load(0));
        }
    }
}

#[test]
fn atomics_sum_every_thread() {
    let (mut sum32, mut sum64, mut shared_sums) = (vec![0.0f32], vec![0.0f64; 2], vec![0.0f32; 4]);
    let args = [buffer(&mut sum32), buffer(&mut sum64), buffer(&mut shared_sums)];
    launch(&atomics__HOST, &config([4, 1, 1], [256, 1, 1], 16), &args).unwrap();
    assert_eq!(sum32[0], 4.0 * (0..256).sum::<u32>() as f32);
    assert_eq!(sum64, [0.0, 512.0]);
    assert_eq!(shared_sums, [256.0; 4]);
}

static STARTED: AtomicU32 = AtomicU32::new(0);

/// In each warp, lanes 0..16 wait at the CTA barrier and lanes 16..32 in a shuffle that needs the first half.
unsafe fn split_warps(_: &[ArgValue]) {
    STARTED.fetch_add(1, Ordering::Relaxed);
    if lane_id() < 16 {
        sync_threads();
    } else {
        warp_shuffle_xor(FULL, 1.0f32, 16, 32);
    }
}

/// Lane 0 votes while the other lanes wait in `sync_warp`.
unsafe fn mismatched_warp_ops(_: &[ArgValue]) {
    if lane_id() == 0 {
        warp_vote_ballot(FULL, true);
    } else {
        sync_warp(FULL);
    }
}

/// The first 64 threads of the CTA reach a barrier, the others exit without it (undefined in PTX).
unsafe fn partial_barrier(_: &[ArgValue]) {
    if thread_idx_x() < 64 {
        sync_threads();
    }
}

#[test]
fn a_barrier_reached_by_part_of_the_cta_fails_the_launch() {
    let kernel = HostKernel {
        name: "partial",
        params: &[],
        call: partial_barrier,
    };
    let message = launch_error(&kernel, &config([1, 1, 1], [128, 1, 1], 0), &[]);
    assert_eq!(
        message,
        "kernel partial: a barrier (sync_threads) reached by 64 of the 128 threads of block (0,0,0): the others \
         exited without it; every thread of a CTA must reach each barrier"
    );
}

#[test]
fn deadlocks_fail_the_launch() {
    let kernel = HostKernel {
        name: "split_warps",
        params: &[],
        call: split_warps,
    };
    let message = launch_error(&kernel, &config([2, 1, 1], [64, 1, 1], 0), &[]);
    assert_eq!(
        message,
        "kernel split_warps: threads of block (0,0,0) never meet at a barrier: 32 wait in sync_threads, 32 in a \
         warp shuffle"
    );
    assert_eq!(STARTED.load(Ordering::Relaxed), 64, "the second CTA must not run");

    let kernel = HostKernel {
        name: "mismatched",
        params: &[],
        call: mismatched_warp_ops,
    };
    let message = launch_error(&kernel, &config([1, 1, 1], [32, 1, 1], 0), &[]);
    assert_eq!(
        message,
        "kernel mismatched: threads of block (0,0,0) never meet at a barrier: 31 wait in sync_warp, 1 in a warp vote"
    );
}

/// Lane 0 shuffles with a mask that leaves it out.
unsafe fn foreign_mask(_: &[ArgValue]) {
    warp_shuffle_down(0xFFFF_FFFE, 0u32, 1, 32);
}

#[test]
fn a_mask_must_include_the_calling_lane() {
    let kernel = HostKernel {
        name: "foreign_mask",
        params: &[],
        call: foreign_mask,
    };
    let message = launch_error(&kernel, &config([1, 1, 1], [32, 1, 1], 0), &[]);
    assert_eq!(
        message,
        "kernel foreign_mask: a warp operation's mask 0xfffffffe excludes the calling lane 0, in block (0,0,0) thread \
         (0,0,0)"
    );
}

const OOB_PARAMS: &[Param] = &[
    Param {
        name: "x_ptr",
        ty: "*mut f32",
    },
    Param {
        name: "y_ptr",
        ty: "*mut f32",
    },
    Param {
        name: "empty_ptr",
        ty: "*mut f32",
    },
    Param {
        name: "case",
        ty: "u32",
    },
    Param {
        name: "out",
        ty: "*mut u64",
    },
];

/// Thread 5 of block 1 makes the access `case` selects while the other threads wait at a barrier.
unsafe fn out_of_bounds(args: &[ArgValue]) {
    let x = <*mut f32>::from_arg(&args[0]);
    let y = <*mut f32>::from_arg(&args[1]);
    let empty = <*mut f32>::from_arg(&args[2]);
    let out = <*mut u64>::from_arg(&args[4]);
    if thread_idx_x() == 5 && block_idx_x() == 1 {
        let shared = crate::shared::dynamic_shared_mem::<f32>();
        unsafe {
            match u32::from_arg(&args[3]) {
                0 => y.store(1000, 1.0),
                1 => drop(x.add(10).load(990)),
                2 => drop(x.load(usize::MAX)),
                3 => shared.store(64, 1.0),
                4 => drop(std::ptr::without_provenance_mut::<f32>(16).load(0)),
                5 => drop(atomic::mid::atomic_fetch_add_f32_device(
                    y.wrapping_add(1000),
                    Ordering::Relaxed,
                    1.0,
                )),
                6 => drop(empty.load(0)),
                7 => drop(x.cast::<u8>().add(1).cast::<f32>().load(0)),
                _ => {
                    let element = super::mem::element(x, 5000, "read");
                    out.store(0, (element.addr() - x.addr()) as u64);
                }
            }
        }
    }
    sync_threads();
}

#[test]
fn out_of_bounds_accesses_fail_the_launch() {
    let kernel = HostKernel {
        name: "oob",
        params: OOB_PARAMS,
        call: out_of_bounds,
    };
    let (mut x, mut y, mut out) = (vec![0.0f32; 1000], vec![0.0f32; 1000], vec![0u64; 1]);
    let here = "in block (1,0,0) thread (5,0,0)";
    let cases = [
        format!("out-of-bounds write to y_ptr at element 1000 (y_ptr has 1000 elements) {here}"),
        format!("out-of-bounds read from x_ptr at element 1000 (x_ptr has 1000 elements) {here}"),
        format!("out-of-bounds read from x_ptr at element {} (x_ptr has 1000 elements) {here}", usize::MAX),
        format!("out-of-bounds write to dynamic shared memory at element 64 (dynamic shared memory has 64 elements) {here}"),
        format!("out-of-bounds read at element 0 of address 0x10, which lies in no pointer argument and not in dynamic shared memory, {here}"),
        format!("out-of-bounds atomic add to y_ptr at element 1000 (y_ptr has 1000 elements) {here}"),
        format!("out-of-bounds read from empty_ptr at element 0 (empty_ptr has 0 elements) {here}"),
        format!("misaligned read from x_ptr at element 0: address {:#x} is not a multiple of 4, {here}", x.as_ptr().addr() + 1),
    ];
    for (case, expected) in cases.iter().enumerate() {
        let args = [
            buffer(&mut x),
            buffer(&mut y),
            scalar(ArgValue::Ptr(0)),
            scalar(ArgValue::U32(case as u32)),
            buffer(&mut out),
        ];
        let message = launch_error(&kernel, &config([2, 1, 1], [64, 1, 1], 256), &args);
        assert_eq!(message, format!("kernel oob: {expected}"));
    }

    // Unchecked launches compute the address without looking.
    let args = [
        buffer(&mut x),
        buffer(&mut y),
        scalar(ArgValue::Ptr(0)),
        scalar(ArgValue::U32(8)),
        buffer(&mut out),
    ];
    let unchecked = LaunchConfig {
        checked: false,
        ..config([2, 1, 1], [64, 1, 1], 256)
    };
    launch(&kernel, &unchecked, &args).unwrap();
    assert_eq!(out[0], 5000 * 4);
}

/// `y = 2 x + y` one 16-byte pack per thread, through the lane accessors.
unsafe fn axpy_packs<D: Float>(x: *mut D, y: *mut D) {
    let i = index_1d() as usize;
    let (xs, ys): (*mut D::Pack, *mut D::Pack) = (x.cast(), y.cast());
    unsafe {
        let (a, mut b) = (xs.load(i), ys.load(i));
        for k in 0..D::Pack::LANES {
            let sum = D::Acc::from_f32(2.0) * a.lane(k).to_acc() + b.lane(k).to_acc();
            b.set_lane(k, D::from_acc(sum));
        }
        ys.store(i, b);
    }
}

macro_rules! axpy_kernels {
    ($($name:ident: $t:ident),*) => {$(
        #[kernel]
        unsafe fn $name(x: *mut $t, y: *mut $t) {
            unsafe { axpy_packs(x, y) }
        }
    )*};
}

axpy_kernels!(axpy_f32: f32, axpy_f64: f64, axpy_bf16: bf16, axpy_f16: f16);

/// Runs `kernel` on 3 blocks of 32 threads, one pack each, and checks `y = 2 x + y` (exact in every type here).
fn check_axpy<D: Float + std::fmt::Debug + PartialEq>(kernel: &HostKernel, from_f32: fn(f32) -> D) {
    assert_eq!(size_of::<D::Pack>(), 16);
    assert_eq!(align_of::<D::Pack>(), 16);
    let n = 96 * D::Pack::LANES;
    let x: Vec<D> = (0..n).map(|i| from_f32((i % 64) as f32)).collect();
    let y: Vec<D> = (0..n).map(|i| from_f32(-((i % 32) as f32))).collect();
    // Packs must be 16-byte aligned: keep the data in a buffer of packs (a pack is exactly its lanes' bytes).
    let packs = |data: &[D]| -> Vec<D::Pack> {
        let chunks = data.chunks_exact(D::Pack::LANES);
        chunks
            .map(|chunk| unsafe { chunk.as_ptr().cast::<D::Pack>().read_unaligned() })
            .collect()
    };
    let (mut xs, mut ys) = (packs(&x), packs(&y));
    launch(
        kernel,
        &config([3, 1, 1], [32, 1, 1], 0),
        &[buffer(&mut xs), buffer(&mut ys)],
    )
    .unwrap();
    let got: Vec<D> = ys.iter().flat_map(|p| (0..D::Pack::LANES).map(|k| p.lane(k))).collect();
    let expected: Vec<D> = (0..n)
        .map(|i| from_f32((2 * (i % 64)) as f32 - (i % 32) as f32))
        .collect();
    assert_eq!(got, expected);
}

#[test]
fn pack_kernels_compute_every_lane() {
    check_axpy(&axpy_f32__HOST, |v| v);
    check_axpy(&axpy_f64__HOST, f64::from);
    check_axpy(&axpy_bf16__HOST, bf16::from_acc);
    check_axpy(&axpy_f16__HOST, f16::from_acc);
    assert_eq!(axpy_bf16__HOST.params[0].ty, "*mut bf16");
    assert_eq!(axpy_f16__HOST.params[1].ty, "*mut f16");
}

/// Thread 2 reads or writes a pack of `x_ptr` or `h_ptr` as `case` selects.
unsafe fn pack_access(args: &[ArgValue]) {
    let x = <*mut f32>::from_arg(&args[0]);
    let h = <*mut bf16>::from_arg(&args[1]);
    if thread_idx_x() == 2 {
        let packs: *mut <f32 as Float>::Pack = x.cast();
        unsafe {
            match u32::from_arg(&args[2]) {
                0 => drop(packs.load(2)),
                1 => packs.store(3, packs.load(0)),
                2 => drop(x.add(1).cast::<<f32 as Float>::Pack>().load(0)),
                3 => drop(h.add(4).cast::<<bf16 as Float>::Pack>().load(1)),
                _ => drop(h.cast::<<bf16 as Float>::Pack>().load(2)),
            }
        }
    }
}

#[test]
fn pack_accesses_are_checked_whole() {
    let kernel = HostKernel {
        name: "packs",
        params: &[
            Param {
                name: "x_ptr",
                ty: "*mut f32",
            },
            Param {
                name: "h_ptr",
                ty: "*mut bf16",
            },
            Param {
                name: "case",
                ty: "u32",
            },
        ],
        call: pack_access,
    };
    // 10 floats are 2 whole packs and half of a third; 20 bf16 are 2 whole packs and half of a third.
    let mut xs = [Pack([0.0f32; 4]); 3];
    let mut hs = [Pack([bf16::default(); 8]); 3];
    let x_addr = xs.as_ptr().addr();
    let h_addr = hs.as_ptr().addr();
    let args = |case: u32, xs: &mut [Pack<f32, 4>; 3], hs: &mut [Pack<bf16, 8>; 3]| {
        let (mut x, mut h) = (buffer(xs), buffer(hs));
        (x.bytes, h.bytes) = (10 * 4, 20 * 2);
        [x, h, scalar(ArgValue::U32(case))]
    };
    let here = "in block (0,0,0) thread (2,0,0)";
    let cases = [
        format!("out-of-bounds read from x_ptr at element 2 (x_ptr has 2 elements) {here}"),
        format!("out-of-bounds write to x_ptr at element 3 (x_ptr has 2 elements) {here}"),
        format!(
            "misaligned read from x_ptr at element 0: address {:#x} is not a multiple of 16, {here}",
            x_addr + 4
        ),
        format!(
            "misaligned read from h_ptr at element 1: address {:#x} is not a multiple of 16, {here}",
            h_addr + 8
        ),
        format!("out-of-bounds read from h_ptr at element 2 (h_ptr has 2 elements) {here}"),
    ];
    for (case, expected) in cases.iter().enumerate() {
        let args = args(case as u32, &mut xs, &mut hs);
        let message = launch_error(&kernel, &config([1, 1, 1], [32, 1, 1], 0), &args);
        assert_eq!(message, format!("kernel packs: {expected}"));
    }
}

/// Thread 3 of block 1 panics; the rest wait at a barrier.
unsafe fn panicking(_: &[ArgValue]) {
    if thread_idx_x() == 3 && block_idx_x() == 1 {
        panic!("boom {}", 42);
    }
    sync_threads();
}

#[test]
fn a_panic_fails_the_launch() {
    let kernel = HostKernel {
        name: "panicky",
        params: &[],
        call: panicking,
    };
    let message = launch_error(&kernel, &config([3, 1, 1], [32, 1, 1], 0), &[]);
    assert_eq!(
        message,
        "kernel panicky: panicked in block (1,0,0) thread (3,0,0): boom 42"
    );
}

#[test]
fn launches_are_validated() {
    let mut x = vec![0.0f32; 4];
    let kernel = HostKernel {
        name: "oob",
        params: OOB_PARAMS,
        call: out_of_bounds,
    };
    let config = config([1, 1, 1], [32, 1, 1], 0);
    assert_eq!(
        launch_error(&kernel, &config, &[]),
        "kernel oob takes 5 arguments but 0 were passed"
    );
    let mut args = [
        buffer(&mut x),
        buffer(&mut x),
        buffer(&mut x),
        scalar(ArgValue::I32(1)),
        buffer(&mut x),
    ];
    assert_eq!(
        launch_error(&kernel, &config, &args),
        "kernel oob: parameter case is u32 but was passed I32(1)"
    );
    args[3] = scalar(ArgValue::U32(9));
    args[0] = scalar(ArgValue::F32(1.0));
    assert_eq!(
        launch_error(&kernel, &config, &args),
        "kernel oob: parameter x_ptr is *mut f32 but was passed F32(1.0)"
    );
    args[0] = args[1];
    let zero_grid = LaunchConfig {
        grid: [1, 0, 1],
        ..config
    };
    assert_eq!(
        launch_error(&kernel, &zero_grid, &args),
        "kernel oob: grid (1,0,1) has a zero dimension"
    );
    let big_block = LaunchConfig {
        block: [32, 32, 2],
        ..config
    };
    let expected = "kernel oob: block (32,32,2) has 2048 threads; a block has 1 to 1024";
    assert_eq!(launch_error(&kernel, &big_block, &args), expected);
    let empty_block = LaunchConfig {
        block: [32, 0, 1],
        ..config
    };
    assert!(launch_error(&kernel, &empty_block, &args).contains("has 0 threads"));
}

/// The BatchNorm2d backward kernel's shape: strided loads, a two-value block sum (warp shuffles, shared memory, two
/// barriers), one CTA per channel.
#[kernel]
unsafe fn bn_backward(
    dy_ptr: *mut f32,
    x_ptr: *mut f32,
    dx_ptr: *mut f32,
    weight_ptr: *mut f32,
    mean_ptr: *mut f32,
    var_ptr: *mut f32,
    dweight_ptr: *mut f32,
    dbias_ptr: *mut f32,
    batches: i32,
    channels: i32,
    hw: i32,
    eps: f32,
) {
    let (c, tid, block) = (block_idx_x() as usize, thread_idx_x() as usize, block_dim_x() as usize);
    let (batches, channels, hw) = (batches as usize, channels as usize, hw as usize);
    unsafe {
        let mean = mean_ptr.load(c);
        let rstd = 1.0 / GpuFloat::sqrt(var_ptr.load(c) + eps);
        let scale = weight_ptr.load(c) * rstd;
        let (mut sum_dy, mut sum_dy_xmu) = (0.0f32, 0.0f32);
        for b in 0..batches {
            let base = (b * channels + c) * hw;
            let mut i = tid;
            while i < hw {
                let g = dy_ptr.load(base + i);
                dx_ptr.store(base + i, g * scale);
                sum_dy += g;
                sum_dy_xmu += g * (x_ptr.load(base + i) - mean);
                i += block;
            }
        }
        let warp_sum = |mut a: f32, mut b: f32| {
            for offset in [16, 8, 4, 2, 1] {
                a += warp_shuffle_xor(FULL, a, offset, 32).0;
                b += warp_shuffle_xor(FULL, b, offset, 32).0;
            }
            (a, b)
        };
        let (a, b) = warp_sum(sum_dy, sum_dy_xmu);
        let shared = crate::shared::dynamic_shared_mem::<f32>();
        let (warp, lane) = (tid / 32, tid % 32);
        if lane == 0 {
            shared.store(2 * warp, a);
            shared.store(2 * warp + 1, b);
        }
        sync_threads();
        if warp == 0 {
            let warps = block / 32;
            let load = |k| if lane < warps { shared.load(2 * lane + k) } else { 0.0 };
            let (a, b) = warp_sum(load(0), load(1));
            if lane == 0 {
                shared.store(0, a);
                shared.store(1, b);
            }
        }
        sync_threads();
        if tid == 0 {
            dweight_ptr.store(c, shared.load(1) * rstd);
            dbias_ptr.store(c, shared.load(0));
        }
    }
}

#[test]
fn batch_norm_backward_shape_runs_fast() {
    let (batches, channels, hw) = (2usize, 8usize, 14 * 14usize);
    let n = batches * channels * hw;
    let mut dy: Vec<f32> = (0..n).map(|i| ((i * 37 % 101) as f32 - 50.0) / 25.0).collect();
    let mut x: Vec<f32> = (0..n).map(|i| ((i * 53 % 97) as f32 - 40.0) / 30.0).collect();
    let mut dx = vec![0.0f32; n];
    let mut weight: Vec<f32> = (0..channels).map(|c| 0.5 + c as f32 / 8.0).collect();
    let mut mean: Vec<f32> = (0..channels).map(|c| c as f32 / 16.0 - 0.25).collect();
    let mut var: Vec<f32> = (0..channels).map(|c| 1.0 + c as f32 / 4.0).collect();
    let (mut dweight, mut dbias) = (vec![0.0f32; channels], vec![0.0f32; channels]);
    let eps = 1e-5f32;
    let args = [
        buffer(&mut dy),
        buffer(&mut x),
        buffer(&mut dx),
        buffer(&mut weight),
        buffer(&mut mean),
        buffer(&mut var),
        buffer(&mut dweight),
        buffer(&mut dbias),
        scalar(ArgValue::I32(batches as i32)),
        scalar(ArgValue::I32(channels as i32)),
        scalar(ArgValue::I32(hw as i32)),
        scalar(ArgValue::F32(eps)),
    ];
    let start = Instant::now();
    launch(
        &bn_backward__HOST,
        &config([channels as u32, 1, 1], [256, 1, 1], 8 * 2 * 4),
        &args,
    )
    .unwrap();
    let elapsed = start.elapsed();
    println!("bn_backward (2, 8, 14, 14), 8 CTAs of 256 threads: {elapsed:?}");
    for c in 0..channels {
        let rstd = 1.0 / (f64::from(var[c]) + f64::from(eps)).sqrt();
        let (mut sum_dy, mut sum_dy_xmu) = (0.0f64, 0.0f64);
        for b in 0..batches {
            for i in (b * channels + c) * hw..(b * channels + c + 1) * hw {
                let expected = f64::from(dy[i]) * f64::from(weight[c]) * rstd;
                assert!((f64::from(dx[i]) - expected).abs() < 1e-5, "dx[{i}]");
                sum_dy += f64::from(dy[i]);
                sum_dy_xmu += f64::from(dy[i]) * (f64::from(x[i]) - f64::from(mean[c]));
            }
        }
        assert!((f64::from(dbias[c]) - sum_dy).abs() < 1e-3, "dbias[{c}]");
        assert!((f64::from(dweight[c]) - sum_dy_xmu * rstd).abs() < 1e-3, "dweight[{c}]");
    }
    assert!(elapsed.as_secs_f64() < 5.0, "took {elapsed:?}");
}

/// Each thread adds 1 to its own element `n` times: a loop of element loads and stores and nothing else.
#[kernel]
unsafe fn increments(x: *mut f32, n: u32) {
    let tid = thread_idx_x() as usize;
    for _ in 0..n {
        unsafe { x.store(tid, x.load(tid) + 1.0) };
    }
}

/// The cost of one element access (checked and unchecked), on one thread and on a warp: `cargo test --release -p
/// cuda_std -- --ignored --nocapture element_access_cost`. The best of 15 runs, to see through other load.
#[test]
#[ignore]
fn element_access_cost() {
    for (threads, n) in [(1u32, 10_000_000u32), (32, 1_000_000)] {
        for checked in [true, false] {
            let mut times = Vec::new();
            for _ in 0..15 {
                let mut x = vec![0.0f32; threads as usize];
                let args = [buffer(&mut x), scalar(ArgValue::U32(n))];
                let config = LaunchConfig {
                    checked,
                    ..config([1, 1, 1], [threads, 1, 1], 0)
                };
                let start = Instant::now();
                launch(&increments__HOST, &config, &args).unwrap();
                times.push(start.elapsed().as_secs_f64());
                assert!(x.iter().all(|&v| v == (n as f32)));
            }
            times.sort_by(f64::total_cmp);
            let accesses = 2.0 * f64::from(threads) * f64::from(n);
            println!(
                "{threads} threads, checked={checked}: {:.2} ns per access (best), {:.2} (median)",
                times[0] / accesses * 1e9,
                times[7] / accesses * 1e9
            );
        }
    }
}

/// Thread 0 writes and reads back the last byte of shared memory, whose size is `bytes`.
#[kernel]
unsafe fn last_shared_byte(bytes: u64, out: *mut u32) {
    let shared = crate::shared::dynamic_shared_mem::<u8>();
    if thread_idx_x() == 0 {
        unsafe {
            shared.store(bytes as usize - 1, 7);
            out.store(0, u32::from(shared.load(bytes as usize - 1)));
        }
    }
}

#[test]
fn shared_memory_is_bounded() {
    let mut out = vec![0u32];
    let max = MAX_SHARED_MEM_BYTES;
    assert_eq!(max, 227 * 1024);
    let args = |bytes: usize, out: &mut Vec<u32>| [scalar(ArgValue::U64(bytes as u64)), buffer(out)];
    launch(
        &last_shared_byte__HOST,
        &config([2, 1, 1], [32, 1, 1], max),
        &args(max, &mut out),
    )
    .unwrap();
    assert_eq!(out, [7]);
    // Refused before the buffer is allocated: allocating 1 TiB would abort the process.
    for bytes in [max + 1, 1 << 40, usize::MAX] {
        let err = launch(
            &last_shared_byte__HOST,
            &config([1, 1, 1], [32, 1, 1], bytes),
            &args(bytes, &mut out),
        )
        .expect_err("too much shared memory");
        assert_eq!(err.kind(), LaunchErrorKind::Invalid);
        assert_eq!(
            err.message(),
            format!(
                "kernel last_shared_byte: {bytes} bytes of dynamic shared memory requested; a block has at most \
                 232448 (227 KiB)"
            )
        );
    }
}

/// The kernel behind this test binary's C ABI. Mode 0: `y[i] += a * x[i]` for `i < n`; mode 1: the same, but
/// thread 3 of block 1 panics; mode 2: mode 0 repeated without end.
#[kernel]
unsafe fn abi_saxpy(x: *const f32, y: *mut f32, a: f32, n: i32, mode: u32) {
    let i = (block_idx_x() * block_dim_x() + thread_idx_x()) as usize;
    if mode == 1 && thread_idx_x() == 3 && block_idx_x() == 1 {
        panic!("boom at {i}");
    }
    let rounds = if mode == 2 { u64::MAX } else { 1 };
    for _ in 0..rounds {
        if (i as i64) < i64::from(n) {
            unsafe { y.store(i, a * x.cast_mut().load(i) + y.load(i)) };
        }
    }
}

crate::export_host_launch!(abi_saxpy);

// The functions the macro exported, through their C symbols.
unsafe extern "C" {
    fn rk_host_launch(
        args: *const RawArg,
        n_args: usize,
        dims: *const u32,
        shared_mem_bytes: u64,
        checked: u32,
        error: *mut u8,
        error_capacity: usize,
    ) -> i32;
    fn rk_host_cancel();
    fn rk_host_abi_version() -> u32;
    fn rk_host_max_shared_mem_bytes() -> u64;
    fn rk_host_kernel_name() -> *const c_char;
    fn rk_host_param_count() -> usize;
    fn rk_host_param_name(i: usize) -> *const c_char;
    fn rk_host_param_type(i: usize) -> *const c_char;
}

fn raw_buffer<T>(data: &mut [T]) -> RawArg {
    RawArg {
        kind: KIND_PTR,
        bytes: size_of_val(data) as u64,
        bits: data.as_mut_ptr().expose_provenance() as u64,
    }
}

fn raw(kind: u32, bits: u64) -> RawArg {
    RawArg { kind, bytes: 0, bits }
}

/// Calls `rk_host_launch` with an error buffer of `capacity` bytes filled with 0xAA; returns the code and the
/// buffer.
fn c_launch_into(args: &[RawArg], dims: [u32; 6], shared: u64, checked: u32, capacity: usize) -> (i32, Vec<u8>) {
    let mut error = vec![0xAAu8; capacity];
    let code = unsafe {
        rk_host_launch(
            args.as_ptr(),
            args.len(),
            dims.as_ptr(),
            shared,
            checked,
            error.as_mut_ptr(),
            capacity,
        )
    };
    (code, error)
}

/// The message of a NUL-terminated buffer.
fn c_message(error: &[u8]) -> String {
    let text = CStr::from_bytes_until_nul(error).expect("the message is NUL-terminated");
    text.to_str().expect("the message is UTF-8").to_owned()
}

fn c_launch(args: &[RawArg], dims: [u32; 6], checked: u32) -> (i32, String) {
    let _shared = no_cancellation();
    let (code, error) = c_launch_into(args, dims, 0, checked, 512);
    (code, c_message(&error))
}

fn c_str(s: *const c_char) -> Option<&'static str> {
    (!s.is_null()).then(|| unsafe { CStr::from_ptr(s) }.to_str().unwrap())
}

/// 128 floats each of x and y, and the arguments for `abi_saxpy` over the first `n` of them with `a` = 2.
fn saxpy_args(x: &mut [f32], y: &mut [f32], n: i32, mode: u32) -> [RawArg; 5] {
    [
        raw_buffer(x),
        raw_buffer(y),
        raw(KIND_F32, u64::from(2.0f32.to_bits())),
        raw(KIND_I32, u64::from(n as u32)),
        raw(KIND_U32, u64::from(mode)),
    ]
}

const SAXPY_DIMS: [u32; 6] = [4, 1, 1, 32, 1, 1];

#[test]
fn c_abi_launches_and_describes_the_kernel() {
    unsafe {
        assert_eq!(rk_host_abi_version(), 2);
        assert_eq!(rk_host_max_shared_mem_bytes(), 232_448);
        assert_eq!(c_str(rk_host_kernel_name()), Some("abi_saxpy"));
        assert_eq!(rk_host_param_count(), 5);
        let params: Vec<_> = (0..6)
            .map(|i| (c_str(rk_host_param_name(i)), c_str(rk_host_param_type(i))))
            .collect();
        let expected = [
            ("x", "*const f32"),
            ("y", "*mut f32"),
            ("a", "f32"),
            ("n", "i32"),
            ("mode", "u32"),
        ];
        let expected: Vec<_> = expected
            .iter()
            .map(|&(n, t)| (Some(n), Some(t)))
            .chain([(None, None)])
            .collect();
        assert_eq!(params, expected);
    }
    for checked in [1, 0] {
        let mut x: Vec<f32> = (0..128).map(|i| i as f32).collect();
        let mut y = vec![1.0f32; 128];
        let args = saxpy_args(&mut x, &mut y, 100, 0);
        let (code, error) = c_launch_into(&args, SAXPY_DIMS, 16, checked, 8);
        assert_eq!((code, c_message(&error)), (abi::OK, String::new()));
        let expected: Vec<f32> = (0..128)
            .map(|i| if i < 100 { 2.0 * i as f32 + 1.0 } else { 1.0 })
            .collect();
        assert_eq!(y, expected, "checked {checked}");
        // A negative i32 travels as its 32-bit pattern.
        let args = saxpy_args(&mut x, &mut y, -1, 0);
        assert_eq!(c_launch(&args, SAXPY_DIMS, checked), (abi::OK, String::new()));
        assert_eq!(y, expected, "checked {checked}");
    }
}

/// Stores each scalar's bit pattern.
#[kernel]
unsafe fn abi_kinds(out: *mut u64, a: i32, b: u32, c: i64, d: u64, e: f32, f: f64) {
    let bits = [
        a as u32 as u64,
        u64::from(b),
        c as u64,
        d,
        u64::from(e.to_bits()),
        f.to_bits(),
    ];
    for (k, bits) in bits.into_iter().enumerate() {
        unsafe { out.store(k, bits) };
    }
}

#[test]
fn c_abi_converts_every_kind() {
    let mut out = vec![0u64; 6];
    let bits = [
        0xFFFF_FFFB,
        0xDEAD_BEEF,
        (-7i64) as u64,
        u64::MAX - 1,
        u64::from((-1.5f32).to_bits()),
        0.1f64.to_bits(),
    ];
    let kinds = [KIND_I32, KIND_U32, KIND_I64, KIND_U64, KIND_F32, KIND_F64];
    let args: Vec<RawArg> = [raw_buffer(&mut out)]
        .into_iter()
        .chain(kinds.iter().zip(bits).map(|(&kind, bits)| raw(kind, bits)))
        .collect();
    let mut error = [0xAAu8; 64];
    let code = {
        let _shared = no_cancellation();
        unsafe {
            abi::launch(
                &abi_kinds__HOST,
                args.as_ptr(),
                args.len(),
                [1, 1, 1, 1, 1, 1].as_ptr(),
                0,
                1,
                error.as_mut_ptr(),
                error.len(),
            )
        }
    };
    assert_eq!((code, c_message(&error)), (abi::OK, String::new()));
    assert_eq!(out, bits);
}

#[test]
fn c_abi_refuses_bad_launches() {
    let (mut x, mut y) = (vec![0.0f32; 128], vec![5.0f32; 128]);
    let good = saxpy_args(&mut x, &mut y, 128, 0);
    let with = |k: usize, arg: RawArg| {
        let mut args = good;
        args[k] = arg;
        args
    };
    let kinds = "(0 ptr, 1 i32, 2 u32, 3 i64, 4 u64, 5 f32, 6 f64)";
    let cases: Vec<(Vec<RawArg>, [u32; 6], u32, String)> =
        vec![
        (good[..4].to_vec(), SAXPY_DIMS, 1, "kernel abi_saxpy takes 5 arguments but 4 were passed".into()),
        (vec![], SAXPY_DIMS, 1, "kernel abi_saxpy takes 5 arguments but 0 were passed".into()),
        (
            with(2, raw(KIND_I32, 2)).to_vec(),
            SAXPY_DIMS,
            1,
            "kernel abi_saxpy: parameter a is f32 but was passed I32(2)".into(),
        ),
        (
            with(2, raw(KIND_F64, 2.0f64.to_bits())).to_vec(),
            SAXPY_DIMS,
            1,
            "kernel abi_saxpy: parameter a is f32 but was passed F64(2.0)".into(),
        ),
        (
            with(0, raw(KIND_U64, 5)).to_vec(),
            SAXPY_DIMS,
            1,
            "kernel abi_saxpy: parameter x is *const f32 but was passed U64(5)".into(),
        ),
        (
            with(1, raw(KIND_F32, 0)).to_vec(),
            SAXPY_DIMS,
            1,
            "kernel abi_saxpy: parameter y is *mut f32 but was passed F32(0.0)".into(),
        ),
        (
            with(4, raw(KIND_PTR, 64)).to_vec(),
            SAXPY_DIMS,
            1,
            "kernel abi_saxpy: parameter mode is u32 but was passed Ptr(64)".into(),
        ),
        (
            with(2, raw(9, 0)).to_vec(),
            SAXPY_DIMS,
            1,
            format!("kernel abi_saxpy: argument 2 (a, f32): unknown kind 9 {kinds}"),
        ),
        (
            with(3, raw(KIND_I32, 1 << 32)).to_vec(),
            SAXPY_DIMS,
            1,
            "kernel abi_saxpy: argument 3 (n, i32): bits 0x100000000 do not fit a i32 (pass the value's bit \
             pattern, zero-extended)"
                .into(),
        ),
        (
            with(3, raw(KIND_I32, (-1i64) as u64)).to_vec(),
            SAXPY_DIMS,
            1,
            "kernel abi_saxpy: argument 3 (n, i32): bits 0xffffffffffffffff do not fit a i32 (pass the value's \
             bit pattern, zero-extended)"
                .into(),
        ),
        (
            with(4, RawArg { kind: KIND_U32, bytes: 4, bits: 0 }).to_vec(),
            SAXPY_DIMS,
            1,
            "kernel abi_saxpy: argument 4 (mode, u32): bytes is 4 for a scalar; it must be 0".into(),
        ),
        (
            with(0, RawArg { kind: KIND_PTR, bytes: 512, bits: 0 }).to_vec(),
            SAXPY_DIMS,
            1,
            "kernel abi_saxpy: argument 0 (x, *const f32): a null pointer with an extent of 512 bytes".into(),
        ),
        (
            with(0, RawArg { kind: KIND_PTR, bytes: 512, bits: u64::MAX - 8 }).to_vec(),
            SAXPY_DIMS,
            1,
            "kernel abi_saxpy: argument 0 (x, *const f32): 512 bytes at 0xfffffffffffffff7 wrap around the address \
             space"
                .into(),
        ),
        (
            good.to_vec(),
            SAXPY_DIMS,
            4,
            "kernel abi_saxpy: flags is 0x4; only bits 0 (checked) and 1 (cooperative) may be set".into(),
        ),
        (
            good.to_vec(),
            [4, 0, 1, 32, 1, 1],
            1,
            "kernel abi_saxpy: grid (4,0,1) has a zero dimension".into(),
        ),
        (
            good.to_vec(),
            [4, 1, 1, 32, 33, 1],
            1,
            "kernel abi_saxpy: block (32,33,1) has 1056 threads; a block has 1 to 1024".into(),
        ),
    ];
    for (args, dims, checked, expected) in cases {
        assert_eq!(c_launch(&args, dims, checked), (abi::INVALID, expected));
    }
    let _shared = no_cancellation();
    let (code, error) = c_launch_into(&good, SAXPY_DIMS, u64::MAX, 1, 256);
    let expected = "kernel abi_saxpy: 18446744073709551615 bytes of dynamic shared memory requested; a block has at \
                    most 232448 (227 KiB)";
    assert_eq!((code, c_message(&error).as_str()), (abi::INVALID, expected));
    let (code, error) = c_launch_into(&good, SAXPY_DIMS, 232_449, 1, 256);
    assert_eq!(code, abi::INVALID);
    assert!(c_message(&error).starts_with("kernel abi_saxpy: 232449 bytes of dynamic shared memory requested"));
    let mut error = [0u8; 128];
    let code = unsafe { rk_host_launch(good.as_ptr(), 5, std::ptr::null(), 0, 1, error.as_mut_ptr(), 128) };
    let expected = "kernel abi_saxpy: dims is NULL (it must point to 6 u32: grid x, y, z, block x, y, z)";
    assert_eq!((code, c_message(&error).as_str()), (abi::INVALID, expected));
    let code = unsafe { rk_host_launch(std::ptr::null(), 5, SAXPY_DIMS.as_ptr(), 0, 1, error.as_mut_ptr(), 128) };
    let expected = "kernel abi_saxpy: args is NULL but n_args is 5";
    assert_eq!((code, c_message(&error).as_str()), (abi::INVALID, expected));
    // Nothing ran.
    assert!(y.iter().all(|&v| v == 5.0));
}

#[test]
fn c_abi_reports_kernel_failures() {
    let (mut x, mut y) = (vec![1.0f32; 128], vec![0.0f32; 128]);
    // x claims 16 elements only; thread 16 alone reads beyond.
    let mut args = saxpy_args(&mut x, &mut y, 17, 0);
    args[0].bytes = 64;
    let expected = "kernel abi_saxpy: out-of-bounds read from x at element 16 (x has 16 elements) in block (0,0,0) \
                    thread (16,0,0)";
    assert_eq!(c_launch(&args, [1, 1, 1, 32, 1, 1], 1), (abi::FAILED, expected.into()));
    args[3].bits = 128;
    // Unchecked, the kernel is trusted (threads 0..16 of the failed launch had written y already).
    y.fill(0.0);
    assert_eq!(c_launch(&args, SAXPY_DIMS, 0), (abi::OK, String::new()));
    assert!(y.iter().all(|&v| v == 2.0));

    // A panic in kernel code fails the launch; it neither aborts the process nor unwinds into C.
    let args = saxpy_args(&mut x, &mut y, 128, 1);
    let expected = "kernel abi_saxpy: panicked in block (1,0,0) thread (3,0,0): boom at 35";
    assert_eq!(c_launch(&args, SAXPY_DIMS, 1), (abi::FAILED, expected.into()));
}

#[test]
fn a_panic_outside_kernel_code_is_reported_not_unwound() {
    let mut error = [0xAAu8; 128];
    let code = unsafe { abi::guarded(error.as_mut_ptr(), error.len(), || panic!("oops {}", 7)) };
    assert_eq!(code, abi::PANICKED);
    assert_eq!(c_message(&error), "cuda_std host launch: internal panic: oops 7");
    let code = unsafe { abi::guarded(error.as_mut_ptr(), error.len(), || Err((abi::FAILED, "no".into()))) };
    assert_eq!((code, c_message(&error).as_str()), (abi::FAILED, "no"));
}

#[test]
fn error_messages_are_truncated_to_the_buffer() {
    let (mut x, mut y) = (vec![0.0f32; 128], vec![0.0f32; 128]);
    let args = saxpy_args(&mut x, &mut y, 128, 0);
    let _shared = no_cancellation();
    let full = "kernel abi_saxpy takes 5 arguments but 4 were passed";
    let (code, error) = c_launch_into(&args[..4], SAXPY_DIMS, 0, 1, 256);
    assert_eq!((code, c_message(&error).as_str()), (abi::INVALID, full));
    let (code, error) = c_launch_into(&args[..4], SAXPY_DIMS, 0, 1, 10);
    assert_eq!((code, error.as_slice()), (abi::INVALID, &b"kernel ab\0"[..]));
    let (code, error) = c_launch_into(&args[..4], SAXPY_DIMS, 0, 1, full.len() + 1);
    assert_eq!((code, c_message(&error).as_str()), (abi::INVALID, full));
    let (code, error) = c_launch_into(&args[..4], SAXPY_DIMS, 0, 1, full.len());
    assert_eq!(
        (code, c_message(&error).as_str()),
        (abi::INVALID, &full[..full.len() - 1])
    );
    let (code, error) = c_launch_into(&args[..4], SAXPY_DIMS, 0, 1, 1);
    assert_eq!((code, error.as_slice()), (abi::INVALID, &[0u8][..]));
    // No buffer: nothing is written, the code still says what happened.
    let mut untouched = [0xAAu8; 4];
    let code = unsafe { rk_host_launch(args.as_ptr(), 4, SAXPY_DIMS.as_ptr(), 0, 1, untouched.as_mut_ptr(), 0) };
    assert_eq!((code, untouched), (abi::INVALID, [0xAA; 4]));
    let code = unsafe { rk_host_launch(args.as_ptr(), 4, SAXPY_DIMS.as_ptr(), 0, 1, std::ptr::null_mut(), 64) };
    assert_eq!(code, abi::INVALID);

    // Truncation keeps whole UTF-8 characters.
    let mut buffer = [0xAAu8; 8];
    for (capacity, expected) in [(4, "α"), (5, "αβ"), (6, "αβ"), (7, "αβγ"), (2, ""), (3, "α")] {
        unsafe { abi::write_message(buffer.as_mut_ptr(), capacity, "αβγ") };
        assert_eq!(c_message(&buffer[..capacity]), expected, "capacity {capacity}");
    }
}

/// Starts `launch` on another thread, checks it is still running after 300 ms, calls `cancel` once and waits for
/// the launch to end; returns its result and the time from `cancel` to the end. Fails after 10 s.
fn cancel_while_running<T: Send + std::fmt::Debug + 'static>(
    cancel: fn(),
    launch: impl FnOnce() -> T + Send + 'static,
) -> (T, Duration) {
    let _exclusive = CANCELLATION.write().unwrap_or_else(PoisonError::into_inner);
    let (sender, receiver) = mpsc::channel();
    // The closure owns the buffers, so a launch left running by a failed test never outlives them.
    std::thread::spawn(move || sender.send(launch()));
    if let Ok(result) = receiver.recv_timeout(Duration::from_millis(300)) {
        panic!("the launch ended before it was cancelled: {result:?}");
    }
    let start = Instant::now();
    cancel();
    let result = receiver
        .recv_timeout(Duration::from_secs(10))
        .expect("the launch was not interrupted within 10 s");
    (result, start.elapsed())
}

/// Latency bound for noticing a cancellation: generous for a loaded 2-core machine; typically well under 1 ms.
const PROMPTLY: Duration = Duration::from_millis(500);

/// Waits at barriers or in warp shuffles (`mode` 0 or 1) `n` times, and touches no memory.
#[kernel]
unsafe fn rendezvous(mode: u32, n: u32) {
    for _ in 0..n {
        if mode == 0 {
            sync_threads();
        } else {
            warp_shuffle_xor(FULL, 1u32, 1, 32);
        }
    }
}

/// Calls no emulator function: only the check between CTAs can interrupt it.
#[kernel]
unsafe fn nothing() {}

/// Interrupts `kernel` (which must run for more than 300 ms), then checks that the next launch is not affected.
fn interrupt(kernel: &'static HostKernel, config: LaunchConfig, mut args: Vec<Arg>, buffer: Vec<f32>) {
    let (result, latency) = cancel_while_running(cancel_launches, move || {
        let mut buffer = buffer;
        if let Some(arg) = args.first_mut().filter(|arg| matches!(arg.value, ArgValue::Ptr(_))) {
            *arg = self::buffer(&mut buffer);
        }
        unsafe { super::launch(kernel, &config, &args) }
    });
    let err = result.expect_err("the launch should be interrupted");
    println!(
        "{} (checked {}): interrupted {latency:?} after the cancel",
        kernel.name, config.checked
    );
    assert_eq!(
        (err.kind(), err.message()),
        (
            LaunchErrorKind::Interrupted,
            &*format!("kernel {}: interrupted", kernel.name)
        )
    );
    assert!(latency < PROMPTLY, "took {latency:?}");
}

#[test]
fn cancel_interrupts_element_loops() {
    for checked in [true, false] {
        let config = LaunchConfig {
            checked,
            ..config([1, 1, 1], [32, 1, 1], 0)
        };
        let args = vec![scalar(ArgValue::Ptr(0)), scalar(ArgValue::U32(u32::MAX))];
        interrupt(&increments__HOST, config, args, vec![0.0; 32]);
    }
}

#[test]
fn cancel_interrupts_barrier_and_warp_loops() {
    for mode in [0, 1] {
        let args = vec![scalar(ArgValue::U32(mode)), scalar(ArgValue::U32(u32::MAX))];
        interrupt(&rendezvous__HOST, config([1, 1, 1], [64, 1, 1], 0), args, vec![]);
    }
}

#[test]
fn cancel_interrupts_between_ctas() {
    interrupt(
        &nothing__HOST,
        config([1 << 20, 1 << 10, 1], [1, 1, 1], 0),
        vec![],
        vec![],
    );
}

#[test]
fn cancel_reaches_only_launches_in_progress() {
    let _exclusive = CANCELLATION.write().unwrap_or_else(PoisonError::into_inner);
    cancel_launches();
    let mut x = vec![0.0f32; 32];
    let args = [buffer(&mut x), scalar(ArgValue::U32(1000))];
    unsafe { super::launch(&increments__HOST, &config([1, 1, 1], [32, 1, 1], 0), &args) }.unwrap();
    assert!(x.iter().all(|&v| v == 1000.0));
}

#[test]
fn c_abi_cancel_interrupts_a_launch() {
    let (result, latency) = cancel_while_running(
        || unsafe { rk_host_cancel() },
        || {
            let (mut x, mut y) = (vec![0.0f32; 128], vec![0.0f32; 128]);
            let args = saxpy_args(&mut x, &mut y, 128, 2);
            let (code, error) = c_launch_into(&args, SAXPY_DIMS, 0, 1, 128);
            (code, c_message(&error))
        },
    );
    println!("abi_saxpy through rk_host_launch: interrupted {latency:?} after rk_host_cancel");
    assert_eq!(result, (abi::INTERRUPTED, "kernel abi_saxpy: interrupted".into()));
    assert!(latency < PROMPTLY, "took {latency:?}");
}

/// Per CTA: sum and max of its threads' values, the Welford statistics and the softmax statistics (`MaxSum`, the
/// first thread's value masked as -inf), each seen by every thread.
#[kernel]
unsafe fn block_reductions(x: *mut f64, out: *mut f64) {
    let tid = thread_idx_x() as usize;
    let n = block_dim_x() as usize;
    let base = block_idx_x() as usize * n;
    let scratch = crate::shared::dynamic_shared_mem::<f64>();
    unsafe {
        let v = x.load(base + tid);
        let sum = reduce::block_sum(v, scratch);
        let max = reduce::block_max(v, scratch);
        let stats = Welford::EMPTY.push(v).block_merge(scratch);
        let masked = if tid == 0 { f64::NEG_INFINITY } else { v };
        let softmax = MaxSum::<f64, false>::EMPTY.push(masked).block_merge(scratch);
        let row = (base + tid) * 6;
        out.store(row, sum);
        out.store(row + 1, max);
        out.store(row + 2, stats.mean);
        out.store(row + 3, stats.variance());
        out.store(row + 4, softmax.max);
        out.store(row + 5, softmax.sum);
    }
}

#[test]
fn block_reductions_give_every_thread_the_ctas_result() {
    // Three warps (through shared memory), and one (by shuffles alone).
    for n in [96, 32] {
        block_reductions_of(3, n);
    }
}

fn block_reductions_of(ctas: usize, n: usize) {
    let mut x: Vec<f64> = (0..ctas * n).map(|i| ((i * 37) % 101) as f64 - 50.0).collect();
    let mut out = vec![0.0; ctas * n * 6];
    let args = [buffer(&mut x), buffer(&mut out)];
    launch(
        &block_reductions__HOST,
        &config([ctas as u32, 1, 1], [n as u32, 1, 1], 3 * 3 * 8),
        &args,
    )
    .unwrap();
    for b in 0..ctas {
        let values = &x[b * n..(b + 1) * n];
        let mean = values.iter().sum::<f64>() / n as f64;
        let var = values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / n as f64;
        let unmasked = &values[1..];
        let softmax_max = unmasked.iter().cloned().fold(f64::MIN, f64::max);
        let softmax_sum: f64 = unmasked.iter().map(|v| (v - softmax_max).exp()).sum();
        for t in 0..n {
            let got = &out[(b * n + t) * 6..(b * n + t) * 6 + 6];
            assert_eq!(got[4], softmax_max);
            assert!(
                (got[5] - softmax_sum).abs() <= 1e-13 * softmax_sum,
                "{} vs {softmax_sum}",
                got[5]
            );
            assert_eq!(got[0], values.iter().sum::<f64>());
            assert_eq!(got[1], values.iter().cloned().fold(f64::MIN, f64::max));
            assert!(
                (got[2] - mean).abs() <= 1e-13 * mean.abs().max(1.0),
                "{} vs {mean}",
                got[2]
            );
            assert!((got[3] - var).abs() <= 1e-12 * var, "{} vs {var}", got[3]);
        }
    }
}

/// A row kernel's buffers after its launch: x = i, w = 1000 i, y = -1 before it; a sum per thread.
struct Row<T> {
    x: Vec<T>,
    w: Vec<T>,
    y: Vec<T>,
    sums: Vec<f32>,
}

/// Launches `kernel(x, w, y, sums, offset, w_offset, len)` as one CTA of `threads` threads over 96 elements of a type
/// made from f32 by `make`: x[i] = i, w[i] = 1000 i, y[i] = -1.
fn launch_row<T: Copy>(
    kernel: &HostKernel,
    threads: u32,
    [offset, w_offset, len]: [u32; 3],
    make: impl Fn(f32) -> T,
) -> Row<T> {
    let mut x: Vec<T> = (0..96).map(|i| make(i as f32)).collect();
    let mut w: Vec<T> = (0..96).map(|i| make(1000.0 * i as f32)).collect();
    let mut y = vec![make(-1.0); 96];
    let mut sums = vec![0.0f32; threads as usize];
    let args = [
        buffer(&mut x),
        buffer(&mut w),
        buffer(&mut y),
        buffer(&mut sums),
        scalar(ArgValue::U32(offset)),
        scalar(ArgValue::U32(w_offset)),
        scalar(ArgValue::U32(len)),
    ];
    launch(kernel, &config([1, 1, 1], [threads, 1, 1], 0), &args).unwrap();
    Row { x, w, y, sums }
}

/// y = 2 x + i (+ w, read alongside from `w_offset`) over a row that starts `offset` elements into the buffer, and
/// the row's sum through `for_each`.
#[kernel]
unsafe fn row_map(x: *mut f32, w: *mut f32, y: *mut f32, sums: *mut f32, offset: u32, w_offset: u32, len: u32) {
    let tid = thread_idx_x() as usize;
    let threads = block_dim_x() as usize;
    let (src, dst) = unsafe { (x.add(offset as usize), y.add(offset as usize)) };
    unsafe {
        if w_offset == u32::MAX {
            row::map(src, dst, len as usize, tid, threads, |i, v| 2.0 * v + i as f32);
        } else {
            let aux = w.add(w_offset as usize);
            row::map_with(src, [aux], dst, len as usize, tid, threads, |i, v, [a]| {
                2.0 * v + i as f32 + a
            });
        }
        let mut sum = 0.0f32;
        row::for_each(src, len as usize, tid, threads, |_, v| sum += v);
        sums.store(tid, sum);
    }
}

#[test]
fn rows_are_streamed_in_packs_at_any_offset_and_length() {
    let cases = [(0, 64), (1, 64), (3, 5), (2, 1), (0, 0), (5, 67), (4, 31)];
    for ((offset, len), w_offset) in cases.into_iter().flat_map(|c| [(c, u32::MAX), (c, c.0), (c, c.0 + 1)]) {
        let Row { x, w, y, sums } = launch_row(&row_map__HOST, 32, [offset, w_offset, len], |v| v);
        let (o, l) = (offset as usize, len as usize);
        for (k, v) in y.iter().enumerate() {
            let inside = (o..o + l).contains(&k);
            let want = match (inside, w_offset) {
                (false, _) => -1.0,
                (true, u32::MAX) => 2.0 * k as f32 + (k - o) as f32,
                (true, wo) => 2.0 * k as f32 + (k - o) as f32 + w[wo as usize + k - o],
            };
            assert_eq!(*v, want, "offset {offset}, w_offset {w_offset}, len {len}, element {k}");
        }
        assert_eq!(
            sums.iter().sum::<f32>(),
            x[o..o + l].iter().sum::<f32>(),
            "offset {offset}, len {len}"
        );
    }
}

/// Through a tile of 8 elements per thread: y = 3 x + i + w (w read alongside from `w_offset`), and each thread's
/// sum of x; a row that does not fit leaves y alone and sets every sum to -1.
#[kernel]
unsafe fn row_tile(x: *mut f32, w: *mut f32, y: *mut f32, sums: *mut f32, offset: u32, w_offset: u32, len: u32) {
    let tid = thread_idx_x() as usize;
    let threads = block_dim_x() as usize;
    let (src, dst, aux) = unsafe { (x.add(offset as usize), y.add(offset as usize), w.add(w_offset as usize)) };
    unsafe {
        match row::Tile::<f32, 8>::load(src, len as usize, tid, threads) {
            Some(mut tile) => {
                sums.store(tid, tile.fold(0.0, |s, _, v| s + v));
                tile.update(|_, v| 3.0 * v);
                tile.store([aux], dst, |i, v, [a]| v + i as f32 + a);
            }
            None => sums.store(tid, -1.0),
        }
    }
}

#[test]
fn a_tile_holds_a_row_that_fits_and_refuses_one_that_does_not() {
    // 8 threads of 2 packs each: 64 elements in packs, at most 8 scalars on each side of them.
    let cases = [
        (0, 64, true),
        (1, 67, true),
        (0, 66, true),
        (2, 68, true),
        (3, 5, true),
        (2, 1, true),
        (0, 0, true),
        (0, 68, false),
        (1, 72, false),
    ];
    for ((offset, len, fits), w_offset) in cases.into_iter().flat_map(|c| [(c, c.0), (c, c.0 + 1)]) {
        let Row { x, w, y, sums } = launch_row(&row_tile__HOST, 8, [offset, w_offset, len], |v| v);
        let (o, l, wo) = (offset as usize, len as usize, w_offset as usize);
        let case = format!("offset {offset}, w_offset {w_offset}, len {len}");
        if !fits {
            assert!(
                sums.iter().all(|&s| s == -1.0) && y.iter().all(|&v| v == -1.0),
                "{case}"
            );
            continue;
        }
        for (k, v) in y.iter().enumerate() {
            let want = if (o..o + l).contains(&k) {
                3.0 * k as f32 + (k - o) as f32 + w[wo + k - o]
            } else {
                -1.0
            };
            assert_eq!(*v, want, "{case}, element {k}");
        }
        assert_eq!(sums.iter().sum::<f32>(), x[o..o + l].iter().sum::<f32>(), "{case}");
    }
}

/// bf16 rows through a tile of 8 elements a thread, as row_tile: y = 3 x + i + w (w read alongside from `w_offset`)
/// and each thread's sum of x; a row that does not fit leaves y alone and sets every sum to -1. `$tile`: a Tile or a
/// PackedTile of one pack.
macro_rules! bf16_tile_kernels {
    ($($name:ident: $tile:ty),*) => {$(
        #[kernel]
        unsafe fn $name(x: *mut bf16, w: *mut bf16, y: *mut bf16, sums: *mut f32, offset: u32, w_offset: u32, len: u32) {
            let tid = thread_idx_x() as usize;
            let threads = block_dim_x() as usize;
            let (src, dst, aux) = unsafe { (x.add(offset as usize), y.add(offset as usize), w.add(w_offset as usize)) };
            unsafe {
                let sum = match <$tile>::load(src, len as usize, tid, threads) {
                    Some(tile) => {
                        tile.store([aux], dst, |i, v, [a]| 3.0 * v + i as f32 + a);
                        tile.fold(0.0, |s, _, v| s + v)
                    }
                    None => -1.0,
                };
                sums.store(tid, sum);
            }
        }
    )*};
}
bf16_tile_kernels!(row_tile_bf16: row::Tile<bf16, 8>, row_packed_tile_bf16: row::PackedTile<bf16, 1>);

#[test]
fn a_packed_tile_holds_what_a_tile_holds_and_writes_the_same_bits() {
    // 4 threads of one 8-lane pack: at most 32 bf16 in packs and 4 scalars on each side (offsets in elements).
    let mut fitted = [0, 0];
    let cases = [
        (0, 32),
        (0, 36),
        (1, 37),
        (3, 5),
        (7, 40),
        (4, 20),
        (0, 0),
        (0, 33),
        (0, 48),
        (1, 45),
    ];
    // w at the row's phase (16-byte stores) and one element off it (element by element)
    for ((offset, len), shift) in cases.into_iter().flat_map(|c| [(c, 0), (c, 1)]) {
        let case = format!("offset {offset}, w_offset {}, len {len}", offset + shift);
        let at = [offset, offset + shift, len];
        let Row { x, w, y, sums } = launch_row(&row_packed_tile_bf16__HOST, 4, at, bf16::from_acc);
        let tile = launch_row(&row_tile_bf16__HOST, 4, at, bf16::from_acc);
        assert_eq!(
            (&y, &sums),
            (&tile.y, &tile.sums),
            "{case}: the PackedTile against the Tile"
        );
        let (o, l) = (offset as usize, len as usize);
        let split = row::Split::of(x[o..].as_ptr(), l);
        let fits = split.packs <= 4 && split.head <= 4 && l - split.tail(8) <= 4;
        fitted[fits as usize] += 1;
        if !fits {
            assert!(
                sums.iter().all(|&s| s == -1.0) && y.iter().all(|v| v.to_acc() == -1.0),
                "{case}"
            );
            continue;
        }
        for (k, v) in y.iter().enumerate() {
            let want = if (o..o + l).contains(&k) {
                bf16::from_acc(3.0 * x[k].to_acc() + (k - o) as f32 + w[k + shift as usize].to_acc()).to_acc()
            } else {
                -1.0
            };
            assert_eq!(v.to_acc(), want, "{case}, element {k}");
        }
        let x_sum: f32 = x[o..o + l].iter().map(|v| v.to_acc()).sum();
        assert_eq!(sums.iter().sum::<f32>(), x_sum, "{case}");
    }
    assert!(
        fitted[0] >= 4 && fitted[1] >= 10,
        "cases that fit and do not: {fitted:?}"
    );
}

#[test]
fn a_row_splits_at_its_16_byte_boundaries() {
    let base = 0x1000 as *const f32;
    assert_eq!(
        row::Split::of(base, 10),
        row::Split {
            head: 0,
            packs: 2,
            len: 10
        }
    );
    assert_eq!(
        row::Split::of(base.wrapping_add(1), 10),
        row::Split {
            head: 3,
            packs: 1,
            len: 10
        }
    );
    assert_eq!(
        row::Split::of(base.wrapping_add(1), 2),
        row::Split {
            head: 2,
            packs: 0,
            len: 2
        }
    );
    let odd = (0x1001usize) as *const f32;
    assert_eq!(
        row::Split::of(odd, 9).packs,
        0,
        "a start not aligned to its element is read element by element"
    );
}

/// Every element of n written once by a grid smaller than n.
#[kernel]
unsafe fn grid_stride_fill(out: *mut u32, n: u32) {
    for i in row::grid_stride(n as usize) {
        unsafe { out.store(i, out.load(i) + i as u32 + 1) };
    }
}

#[test]
fn a_grid_stride_loop_visits_every_element_once() {
    for n in [0u32, 1, 63, 64, 65, 1000] {
        let mut out = vec![0u32; n as usize];
        let args = [buffer(&mut out), scalar(ArgValue::U32(n))];
        launch(&grid_stride_fill__HOST, &config([2, 1, 1], [32, 1, 1], 0), &args).unwrap();
        assert!(out.iter().enumerate().all(|(i, &v)| v == i as u32 + 1), "n = {n}");
    }
}

fn cooperative(grid: [u32; 3], block: [u32; 3]) -> LaunchConfig {
    LaunchConfig {
        cooperative: true,
        ..config(grid, block, 64)
    }
}

/// Each CTA writes its own slot and its shared memory, waits at grid::sync six times (the same word each time), and
/// reads every other CTA's slot between: ordered in CTA order by the barrier, not by the schedule.
#[kernel]
unsafe fn grid_rounds(slots: *mut u32, seen: *mut u32, state: *mut u32) {
    let ctas = grid_dim_x() as usize;
    let (block, tid) = (block_idx_x() as usize, thread_idx_x() as usize);
    let shared = crate::shared::dynamic_shared_mem::<u32>();
    unsafe {
        if tid == 0 {
            shared.store(0, block as u32);
        }
        for round in 0..3u32 {
            if tid == 0 {
                slots.store(block, round * 100 + block as u32);
            }
            crate::grid::sync(state);
            let mut sum = 0;
            for b in 0..ctas {
                sum += slots.load(b);
            }
            seen.store(
                (round as usize * ctas + block) * block_dim_x() as usize + tid,
                sum + shared.load(0),
            );
            crate::grid::sync(state);
        }
    }
}

#[test]
fn grid_sync_orders_every_cta() {
    let (ctas, threads) = (5usize, 40usize);
    let mut slots = vec![u32::MAX; ctas];
    let mut seen = vec![u32::MAX; 3 * ctas * threads];
    let mut state = [0u32; 1];
    let args = [buffer(&mut slots), buffer(&mut seen), buffer(&mut state)];
    for _ in 0..2 {
        launch(
            &grid_rounds__HOST,
            &cooperative([ctas as u32, 1, 1], [threads as u32, 1, 1]),
            &args,
        )
        .unwrap();
        for (i, &v) in seen.iter().enumerate() {
            let (round, block) = (i / (ctas * threads), i / threads % ctas);
            let sum = (0..ctas as u32).map(|b| round as u32 * 100 + b).sum::<u32>();
            assert_eq!(v, sum + block as u32, "round {round} block {block}");
        }
        assert_eq!(
            state[0], 0,
            "six flips of the top bit, the low bits left at zero for the next launch"
        );
    }
}

/// grid::sync with no other work: for the failures below.
unsafe fn grid_sync_only(args: &[ArgValue]) {
    unsafe { crate::grid::sync(<*mut u32>::from_arg(&args[0])) };
}

/// Block 1 returns without reaching grid::sync.
unsafe fn grid_sync_but_block_1(args: &[ArgValue]) {
    if block_idx_x() != 1 {
        unsafe { crate::grid::sync(<*mut u32>::from_arg(&args[0])) };
    }
}

/// Block 2's thread 5 reads out of bounds while the others wait at grid::sync.
unsafe fn grid_sync_after_a_fault(args: &[ArgValue]) {
    let state = <*mut u32>::from_arg(&args[0]);
    if block_idx_x() == 2 && thread_idx_x() == 5 {
        unsafe { state.load(7) };
    }
    unsafe { crate::grid::sync(state) };
}

const STATE: &[Param] = &[Param {
    name: "state",
    ty: "*mut u32",
}];

#[test]
fn grid_sync_failures_are_named() {
    let kernel = |name, call| HostKernel {
        name,
        params: STATE,
        call,
    };
    let mut state = [0u32; 1];
    let args = [buffer(&mut state)];
    let plain = kernel("plain", grid_sync_only);
    assert_eq!(
        launch_error(&plain, &config([2, 1, 1], [32, 1, 1], 0), &args),
        "kernel plain: grid::sync in a launch that is not cooperative: its blocks run one after another, so block \
         (0,0,0) would wait forever (a kernel that syncs its grid needs `cooperative = true` in its spec)"
    );
    let early = kernel("early", grid_sync_but_block_1);
    assert_eq!(
        launch_error(&early, &cooperative([3, 1, 1], [32, 1, 1]), &args),
        "kernel early: grid::sync reached by 2 of the 3 blocks: block (1,0,0) ended without it; every thread of \
         every block must reach each grid::sync"
    );
    let fault = kernel("fault", grid_sync_after_a_fault);
    let message = launch_error(&fault, &cooperative([4, 1, 1], [32, 1, 1]), &args);
    assert_eq!(
        message,
        "kernel fault: out-of-bounds read from state at element 7 (state has 1 elements) in block (2,0,0) thread \
         (5,0,0)"
    );
    let mut short = [0u16; 1];
    // Every thread checks the word; which one fails first is the schedule's (OS threads').
    let message = launch_error(&plain, &cooperative([2, 1, 1], [32, 1, 1]), &[buffer(&mut short)]);
    assert!(
        message.starts_with("kernel plain: out-of-bounds read from state at element 0 (state has 0 elements) in block"),
        "{message}"
    );
    let error = launch(&plain, &cooperative([17, 1, 1], [1024, 1, 1]), &args).unwrap_err();
    assert_eq!(error.kind(), LaunchErrorKind::Invalid);
    assert_eq!(
        error.message(),
        "kernel plain: a cooperative launch of grid (17,1,1) and block (1024,1,1) has 17408 threads; the emulator \
         runs at most 16384 at once"
    );
    launch(&plain, &cooperative([16, 1, 1], [1024, 1, 1]), &args).unwrap();
    assert_eq!(
        state[0],
        1 << 31,
        "one grid::sync flips the top bit (the failed launches none)"
    );
}
