//! Launching a kernel on the host: argument checks, then the CTAs one after another (all at once in a cooperative
//! launch), each CTA's threads as fibers of the calling OS thread (`fiber`, on x86_64 Linux) or as concurrent OS
//! threads (bare POSIX threads: `os_thread`, elsewhere, and where built with `--cfg rk_emulator_threads`, as the tests
//! do to cover it).

use super::context::{self, coords, Abort, Current, Launch, Region};
use super::cta::Cta;
#[cfg(all(target_arch = "x86_64", target_os = "linux", not(rk_emulator_threads)))]
use super::fiber;
use super::kernel::{ArgValue, HostKernel};
#[cfg(any(not(all(target_arch = "x86_64", target_os = "linux")), rk_emulator_threads))]
use super::os_thread;
use std::any::Any;
use std::fmt;
use std::panic::{self, AssertUnwindSafe};
use std::sync::Arc;

/// Kernel code runs on stacks of this size (fibers' or threads'); generated kernels keep little on the stack.
const THREAD_STACK_BYTES: usize = 256 << 10;

/// The most threads a block may have.
pub const MAX_THREADS_PER_BLOCK: u64 = 1024;

/// The most threads a cooperative launch may have in all: every one runs at once, on its own stack, and each fiber
/// stack's guard range splits its mapping (Linux allows about 65 000 per process by default).
pub const MAX_COOPERATIVE_THREADS: u64 = 16_384;

/// The most dynamic shared memory a launch may ask for, in bytes: 227 KiB, the per-block maximum of the H100 and
/// H200 (sm_90) once a kernel opts in. [`launch`] refuses more before allocating anything.
pub const MAX_SHARED_MEM_BYTES: usize = 232_448;

/// The unit of the shared-memory buffer, for its 16-byte alignment.
#[derive(Clone, Copy)]
#[repr(align(16))]
struct Chunk {
    _bytes: [u8; 16],
}

/// Launch dimensions, the dynamic shared-memory size, whether element accesses are bounds-checked, and whether every
/// CTA runs at once (a cooperative launch, which `grid::sync` needs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LaunchConfig {
    pub grid: [u32; 3],
    pub block: [u32; 3],
    pub shared_mem_bytes: usize,
    pub checked: bool,
    pub cooperative: bool,
}

/// A kernel argument; `bytes` is the extent of the buffer behind a pointer (0 for scalars), which checked launches
/// enforce.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Arg {
    pub value: ArgValue,
    pub bytes: usize,
}

/// Why a launch failed; the message names the kernel.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LaunchError {
    kind: LaunchErrorKind,
    message: String,
}

/// What kind of failure a [`LaunchError`] is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LaunchErrorKind {
    /// The arguments or the launch configuration do not fit the kernel: refused before anything ran.
    Invalid,
    /// Kernel code failed while running: an out-of-bounds or misaligned access, threads that never meet at a
    /// barrier, a panic, or a thread that could not be started.
    Failed,
    /// [`cancel_launches`](super::cancel_launches) was called while the launch ran.
    Interrupted,
}

impl LaunchError {
    pub fn kind(&self) -> LaunchErrorKind {
        self.kind
    }

    pub fn message(&self) -> &str {
        &self.message
    }
}

impl fmt::Display for LaunchError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for LaunchError {}

/// Runs `kernel` over the grid and waits for it.
///
/// The arguments and the configuration are checked first: argument count and types, no zero grid dimension, 1 to
/// [`MAX_THREADS_PER_BLOCK`] threads per block, at most [`MAX_SHARED_MEM_BYTES`] of dynamic shared memory.
/// [`cancel_launches`](super::cancel_launches) interrupts the launch ([`LaunchErrorKind::Interrupted`]).
///
/// # Safety
/// Pointer arguments must address at least `bytes` bytes that stay valid for the launch. In a checked launch every
/// element access must fall inside one of them or inside the CTA's shared memory; an access that does not, a
/// deadlock, or a panic in kernel code fails the launch, and no further CTA runs.
pub unsafe fn launch(kernel: &HostKernel, config: &LaunchConfig, args: &[Arg]) -> Result<(), LaunchError> {
    let epoch = context::cancel_epoch();
    validate(kernel, config, args)?;

    let ctas = config.grid.iter().product::<u32>() as usize;
    // A CTA's shared memory: one buffer that each CTA reuses in turn, or one per CTA where they run at once.
    let buffers = if config.cooperative { ctas } else { 1 };
    let mut shared_memory = vec![vec![Chunk { _bytes: [0; 16] }; config.shared_mem_bytes.div_ceil(16)]; buffers];
    let shared: Vec<*mut u8> = shared_memory.iter_mut().map(|b| b.as_mut_ptr().cast::<u8>()).collect();

    let regions: Vec<Region> = kernel
        .params
        .iter()
        .zip(args)
        .filter_map(|(param, arg)| match arg.value {
            ArgValue::Ptr(base) => Some(Region {
                name: param.name,
                base,
                len: arg.bytes,
            }),
            _ => None,
        })
        .collect();
    let launch = Arc::new(Launch::new(
        kernel.name,
        [config.grid, config.block],
        [config.checked, config.cooperative],
        config.shared_mem_bytes,
        regions,
        epoch,
    ));
    let values: Vec<ArgValue> = args.iter().map(|arg| arg.value).collect();
    let runner = Runner::new(kernel, config)?;
    let [gx, gy, _] = config.grid;
    let block_idx = |i: u32| [i % gx, i / gx % gy, i / (gx * gy)];

    if config.cooperative {
        for &buffer in &shared {
            // SAFETY: each buffer holds `shared_mem_bytes` bytes; no thread runs yet.
            unsafe { buffer.write_bytes(0xFF, config.shared_mem_bytes) };
        }
        let ctas: Vec<Arc<Cta>> = (0..ctas as u32)
            .map(|i| {
                Arc::new(Cta::new(
                    Arc::clone(&launch),
                    block_idx(i),
                    shared[i as usize].expose_provenance(),
                ))
            })
            .collect();
        runner.run_grid(kernel, &ctas, &values);
    } else {
        for i in 0..ctas as u32 {
            if launch.cancelled() {
                return Err(LaunchError {
                    kind: LaunchErrorKind::Interrupted,
                    message: launch.interrupted_message(),
                });
            }
            // Unwritten shared memory reads as all-ones bits: NaN for floats, as uninitialised data should.
            // SAFETY: the buffer holds `shared_mem_bytes` bytes, and the previous CTA's threads have all ended.
            unsafe { shared[0].write_bytes(0xFF, config.shared_mem_bytes) };
            let cta = Arc::new(Cta::new(
                Arc::clone(&launch),
                block_idx(i),
                shared[0].expose_provenance(),
            ));
            runner.run_grid(kernel, &[cta], &values);
            if launch.error().is_some() {
                break;
            }
        }
    }
    match launch.error() {
        None => Ok(()),
        // A cancelled launch's threads may also have failed otherwise; the first failure is reported.
        Some(message) => {
            let kind = if message == launch.interrupted_message() {
                LaunchErrorKind::Interrupted
            } else {
                LaunchErrorKind::Failed
            };
            Err(LaunchError { kind, message })
        }
    }
}

fn validate(kernel: &HostKernel, config: &LaunchConfig, args: &[Arg]) -> Result<(), LaunchError> {
    let name = kernel.name;
    let fail = |message: String| {
        Err(LaunchError {
            kind: LaunchErrorKind::Invalid,
            message,
        })
    };
    if args.len() != kernel.params.len() {
        return fail(format!(
            "kernel {name} takes {} arguments but {} were passed",
            kernel.params.len(),
            args.len()
        ));
    }
    for (param, arg) in kernel.params.iter().zip(args) {
        if !arg.value.fits(param.ty) {
            return fail(format!(
                "kernel {name}: parameter {} is {} but was passed {:?}",
                param.name, param.ty, arg.value
            ));
        }
    }
    if config.grid.contains(&0) {
        return fail(format!(
            "kernel {name}: grid {} has a zero dimension",
            coords(config.grid)
        ));
    }
    let threads = config.block.iter().map(|&d| u64::from(d)).product::<u64>();
    if threads == 0 || threads > MAX_THREADS_PER_BLOCK {
        return fail(format!(
            "kernel {name}: block {} has {threads} threads; a block has 1 to {MAX_THREADS_PER_BLOCK}",
            coords(config.block)
        ));
    }
    let total = threads * config.grid.iter().map(|&d| u64::from(d)).product::<u64>();
    if config.cooperative && total > MAX_COOPERATIVE_THREADS {
        return fail(format!(
            "kernel {name}: a cooperative launch of grid {} and block {} has {total} threads; the emulator runs \
             at most {MAX_COOPERATIVE_THREADS} at once",
            coords(config.grid),
            coords(config.block)
        ));
    }
    if config.shared_mem_bytes > MAX_SHARED_MEM_BYTES {
        return fail(format!(
            "kernel {name}: {} bytes of dynamic shared memory requested; a block has at most {MAX_SHARED_MEM_BYTES} \
             (227 KiB)",
            config.shared_mem_bytes
        ));
    }
    Ok(())
}

/// What runs a launch's CTAs: fibers on stacks kept for the whole launch.
#[cfg(all(target_arch = "x86_64", target_os = "linux", not(rk_emulator_threads)))]
struct Runner(fiber::Stacks);

#[cfg(all(target_arch = "x86_64", target_os = "linux", not(rk_emulator_threads)))]
impl Runner {
    fn new(kernel: &HostKernel, config: &LaunchConfig) -> Result<Runner, LaunchError> {
        let mut threads = config.block.iter().product::<u32>() as usize;
        if config.cooperative {
            threads *= config.grid.iter().product::<u32>() as usize;
        }
        fiber::Stacks::new(threads, THREAD_STACK_BYTES)
            .map(Runner)
            .map_err(|err| LaunchError {
                kind: LaunchErrorKind::Failed,
                message: format!("kernel {}: cannot map the threads' stacks: {err}", kernel.name),
            })
    }

    /// Runs every thread of `ctas` to its end, as fibers taking turns: each CTA's in thread order, or from the last
    /// in odd CTAs (see `fiber`).
    fn run_grid(&self, kernel: &HostKernel, ctas: &[Arc<Cta>], values: &[ArgValue]) {
        let [bx, by, bz] = ctas[0].launch.block;
        let threads = bx * by * bz;
        let work = ctas.iter().flat_map(|cta| {
            let odd = cta.block_idx.iter().sum::<u32>() % 2 == 1;
            (0..threads).map(move |k| {
                let linear = if odd { threads - 1 - k } else { k };
                let current = Current {
                    cta: Arc::clone(cta),
                    thread: [linear % bx, linear / bx % by, linear / (bx * by)],
                    linear,
                };
                Box::new(move || run_thread(kernel, current, values)) as fiber::Work<'_>
            })
        });
        fiber::run(&self.0, work.collect());
    }
}

/// What runs a launch's CTAs: concurrent OS threads, started per CTA.
#[cfg(any(not(all(target_arch = "x86_64", target_os = "linux")), rk_emulator_threads))]
struct Runner;

#[cfg(any(not(all(target_arch = "x86_64", target_os = "linux")), rk_emulator_threads))]
impl Runner {
    fn new(_: &HostKernel, _: &LaunchConfig) -> Result<Runner, LaunchError> {
        Ok(Runner)
    }

    /// Runs every thread of `ctas` to its end (all at once: the order is the OS's).
    fn run_grid(&self, kernel: &HostKernel, ctas: &[Arc<Cta>], values: &[ArgValue]) {
        let [bx, by, bz] = ctas[0].launch.block;
        os_thread::scope(|scope| {
            for (cta, linear) in ctas
                .iter()
                .flat_map(|cta| (0..bx * by * bz).map(move |linear| (cta, linear)))
            {
                if cta.launch.cancelled() {
                    // Starting the remaining threads would only delay the end: they would leave at once.
                    cta.fail(cta.launch.interrupted_message());
                    break;
                }
                let current = Current {
                    cta: Arc::clone(cta),
                    thread: [linear % bx, linear / bx % by, linear / (bx * by)],
                    linear,
                };
                if let Err(err) = scope.spawn(THREAD_STACK_BYTES, move || run_thread(kernel, current, values)) {
                    // The threads already started leave at their next barrier or warp operation.
                    cta.fail(format!("kernel {}: cannot start a thread: {err}", kernel.name));
                    break;
                }
            }
        });
    }
}

fn run_thread(kernel: &HostKernel, current: Current, values: &[ArgValue]) {
    let (cta, thread, linear) = (&current.cta, current.thread, current.linear);
    // SAFETY: `launch` checked the arguments against the kernel's parameters; the caller vouches for the buffers.
    let outcome = context::run_as(&current, || {
        panic::catch_unwind(AssertUnwindSafe(|| unsafe { (kernel.call)(values) }))
    });
    if let Err(payload) = outcome {
        if !payload.is::<Abort>() {
            cta.fail(format!(
                "kernel {}: panicked in block {} thread {}: {}",
                kernel.name,
                coords(cta.block_idx),
                coords(thread),
                panic_message(&*payload)
            ));
        }
    }
    cta.exit(linear);
}

pub(crate) fn panic_message(payload: &(dyn Any + Send)) -> &str {
    match payload.downcast_ref::<&str>() {
        Some(message) => message,
        None => payload
            .downcast_ref::<String>()
            .map_or("(a non-string panic payload)", String::as_str),
    }
}
