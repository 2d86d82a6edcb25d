//! Launching a kernel on the host: argument checks, then the CTAs one after another, each CTA's threads as fibers of
//! the calling OS thread (`fiber`, on x86_64 Linux) or as concurrent OS threads (bare POSIX threads: `os_thread`,
//! elsewhere, and where built with `--cfg rk_emulator_threads`, as the tests do to cover it).

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

/// The most dynamic shared memory a launch may ask for, in bytes: 227 KiB, the per-block maximum of the H100 and
/// H200 (sm_90) once a kernel opts in. [`launch`] refuses more before allocating anything.
pub const MAX_SHARED_MEM_BYTES: usize = 232_448;

/// The unit of the shared-memory buffer, for its 16-byte alignment.
#[derive(Clone, Copy)]
#[repr(align(16))]
struct Chunk {
    _bytes: [u8; 16],
}

/// Launch dimensions, the dynamic shared-memory size, and whether element accesses are bounds-checked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LaunchConfig {
    pub grid: [u32; 3],
    pub block: [u32; 3],
    pub shared_mem_bytes: usize,
    pub checked: bool,
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

    let mut shared_memory = vec![Chunk { _bytes: [0; 16] }; config.shared_mem_bytes.div_ceil(16)];
    let shared = shared_memory.as_mut_ptr().cast::<u8>();

    let mut regions: Vec<Region> = kernel
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
    regions.push(Region {
        name: "dynamic shared memory",
        base: shared.expose_provenance(),
        len: config.shared_mem_bytes,
    });
    let launch = Arc::new(Launch {
        kernel: kernel.name,
        grid: config.grid,
        block: config.block,
        checked: config.checked,
        shared: shared.expose_provenance(),
        regions,
        epoch,
    });
    let values: Vec<ArgValue> = args.iter().map(|arg| arg.value).collect();
    let runner = Runner::new(kernel, config)?;

    let [gx, gy, gz] = config.grid;
    for z in 0..gz {
        for y in 0..gy {
            for x in 0..gx {
                if launch.cancelled() {
                    return Err(LaunchError {
                        kind: LaunchErrorKind::Interrupted,
                        message: launch.interrupted_message(),
                    });
                }
                // Unwritten shared memory reads as all-ones bits: NaN for floats, as uninitialised data should.
                // SAFETY: the buffer holds `shared_mem_bytes` bytes, and the previous CTA's threads have all ended.
                unsafe { shared.write_bytes(0xFF, config.shared_mem_bytes) };
                let cta = Arc::new(Cta::new(Arc::clone(&launch), [x, y, z]));
                runner.run_cta(kernel, &cta, &values, (x + y + z) % 2 == 1);
                if let Some(message) = cta.take_error() {
                    // A cancelled launch's threads may also have failed otherwise; the first failure is reported.
                    let kind = if message == launch.interrupted_message() {
                        LaunchErrorKind::Interrupted
                    } else {
                        LaunchErrorKind::Failed
                    };
                    return Err(LaunchError { kind, message });
                }
            }
        }
    }
    Ok(())
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
        let threads = config.block.iter().product::<u32>() as usize;
        fiber::Stacks::new(threads, THREAD_STACK_BYTES)
            .map(Runner)
            .map_err(|err| LaunchError {
                kind: LaunchErrorKind::Failed,
                message: format!("kernel {}: cannot map the threads' stacks: {err}", kernel.name),
            })
    }

    /// Runs every thread of one CTA to its end; `reverse`: starting from the last (see `fiber`).
    fn run_cta(&self, kernel: &HostKernel, cta: &Arc<Cta>, values: &[ArgValue], reverse: bool) {
        let [bx, by, bz] = cta.launch.block;
        let work = (0..bx * by * bz).map(|linear| {
            let current = Current {
                cta: Arc::clone(cta),
                thread: [linear % bx, linear / bx % by, linear / (bx * by)],
                linear,
            };
            Box::new(move || run_thread(kernel, current, values)) as fiber::Work<'_>
        });
        fiber::run(&self.0, work.collect(), reverse);
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

    /// Runs every thread of one CTA to its end (all at once: the order is the OS's).
    fn run_cta(&self, kernel: &HostKernel, cta: &Arc<Cta>, values: &[ArgValue], _: bool) {
        let [bx, by, bz] = cta.launch.block;
        os_thread::scope(|scope| {
            for linear in 0..bx * by * bz {
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
