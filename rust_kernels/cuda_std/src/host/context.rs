//! What an emulated thread knows about itself and its launch, kept in a thread-local while it runs the kernel.

use super::cta::Cta;
use std::cell::Cell;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};

/// The unwind payload that takes a thread out of a failed CTA. It is raised with `resume_unwind`, which skips the
/// panic hook: the failure is reported once, as the launch's error, and nothing is printed.
pub(crate) struct Abort;

pub(crate) fn abort() -> ! {
    std::panic::resume_unwind(Box::new(Abort))
}

/// Memory a kernel may address: an argument's buffer or the CTA's dynamic shared memory.
pub(crate) struct Region {
    pub name: &'static str,
    pub base: usize,
    pub len: usize,
}

/// What all CTAs of a launch share.
pub(crate) struct Launch {
    pub kernel: &'static str,
    pub grid: [u32; 3],
    pub block: [u32; 3],
    pub checked: bool,
    /// Every CTA runs at once (`grid::sync` may be used).
    pub cooperative: bool,
    /// Each CTA's dynamic shared memory, in bytes.
    pub shared_bytes: usize,
    /// The pointer arguments.
    pub regions: Vec<Region>,
    /// [`cancel_epoch`] when the launch started: the launch is cancelled once the epoch moves on.
    pub epoch: u64,
    /// The launch's first failure (the one reported), and the grid barrier's state.
    barrier: Mutex<GridState>,
    /// Wakes the CTAs waiting in `grid::sync` (OS threads; fibers poll).
    barrier_cv: Condvar,
}

#[derive(Default)]
struct GridState {
    error: Option<String>,
    /// CTAs waiting in `grid::sync`.
    arrived: u32,
    /// Bumped when every CTA has arrived; the waiting ones leave when it changes.
    generation: u64,
    /// CTAs whose threads have all ended, and the first of them.
    ended: u32,
    first_ended: Option<[u32; 3]>,
}

/// Bumped by [`cancel_launches`]. A launch records it when it starts and is interrupted once it differs, so a
/// cancellation reaches exactly the launches in progress, and never a later one.
static CANCEL_EPOCH: AtomicU64 = AtomicU64::new(0);

/// Interrupts every launch of this copy of the crate that is in progress: each fails with "kernel NAME:
/// interrupted" at its next element access, barrier, warp operation or index read, or before its next CTA.
/// Launches that start afterwards are not affected.
pub fn cancel_launches() {
    CANCEL_EPOCH.fetch_add(1, Relaxed);
}

pub(crate) fn cancel_epoch() -> u64 {
    CANCEL_EPOCH.load(Relaxed)
}

impl Launch {
    pub fn new(
        kernel: &'static str,
        [grid, block]: [[u32; 3]; 2],
        [checked, cooperative]: [bool; 2],
        shared_bytes: usize,
        regions: Vec<Region>,
        epoch: u64,
    ) -> Launch {
        Launch {
            kernel,
            grid,
            block,
            checked,
            cooperative,
            shared_bytes,
            regions,
            epoch,
            barrier: Mutex::default(),
            barrier_cv: Condvar::new(),
        }
    }

    fn grid_state(&self) -> MutexGuard<'_, GridState> {
        self.barrier.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Records a CTA's failure: the first of the launch is its error. CTAs waiting in `grid::sync` leave.
    pub fn note_failure(&self, message: &str) {
        self.grid_state().error.get_or_insert_with(|| message.to_owned());
        self.barrier_cv.notify_all();
    }

    /// The launch's first failure, if any.
    pub fn error(&self) -> Option<String> {
        self.grid_state().error.clone()
    }

    /// Every thread of CTA `block_idx` has ended: CTAs waiting in `grid::sync` may now never be released.
    pub fn cta_ended(&self, block_idx: [u32; 3]) {
        let mut state = self.grid_state();
        state.ended += 1;
        state.first_ended.get_or_insert(block_idx);
        self.barrier_cv.notify_all();
    }

    /// Thread 0 of `current`'s CTA in `grid::sync`: waits until every CTA has arrived. Fails the launch where that
    /// can never happen (a CTA ended without arriving), and leaves where another CTA failed. The last to arrive
    /// flips the barrier word's top bit, as the GPU's arrivals do.
    pub fn grid_sync(&self, current: &Current, word: *mut u32) {
        let ctas = self.grid.iter().product::<u32>();
        let mut state = self.grid_state();
        state.arrived += 1;
        if state.arrived == ctas {
            // SAFETY: `grid::sync`'s caller vouches for the word (checked launches have bounds-checked it).
            unsafe { AtomicU32::from_ptr(word) }.fetch_xor(1 << 31, Relaxed);
            state.arrived = 0;
            state.generation += 1;
            self.barrier_cv.notify_all();
            return;
        }
        let generation = state.generation;
        loop {
            if state.generation != generation {
                return;
            }
            let message = if state.error.is_some() {
                Some(format!(
                    "kernel {}: block {} left grid::sync: another block failed",
                    self.kernel,
                    coords(current.cta.block_idx)
                ))
            } else if state.ended > 0 && state.arrived + state.ended == ctas {
                Some(format!(
                    "kernel {}: grid::sync reached by {} of the {ctas} blocks: block {} ended without it; every \
                     thread of every block must reach each grid::sync",
                    self.kernel,
                    state.arrived,
                    coords(state.first_ended.unwrap_or_default())
                ))
            } else {
                None
            };
            if let Some(message) = message {
                drop(state);
                current.fail(message);
            }
            state = self.wait_grid(state);
            if self.cancelled() {
                drop(state);
                current.poll_cancel();
                state = self.grid_state();
            }
        }
    }

    /// Lets the other CTAs run until the caller checks again: the fiber yields.
    #[cfg(all(target_arch = "x86_64", target_os = "linux", not(rk_emulator_threads)))]
    fn wait_grid<'s>(&'s self, state: MutexGuard<'s, GridState>) -> MutexGuard<'s, GridState> {
        drop(state);
        let_others_run();
        self.grid_state()
    }

    /// Lets the other CTAs run until the caller checks again: the OS thread sleeps, waking now and then to see a
    /// cancellation.
    #[cfg(any(not(all(target_arch = "x86_64", target_os = "linux")), rk_emulator_threads))]
    fn wait_grid<'s>(&'s self, state: MutexGuard<'s, GridState>) -> MutexGuard<'s, GridState> {
        let timeout = std::time::Duration::from_millis(20);
        self.barrier_cv
            .wait_timeout(state, timeout)
            .unwrap_or_else(PoisonError::into_inner)
            .0
    }

    /// Whether [`cancel_launches`] was called since the launch started: one relaxed load, cheap enough for every
    /// element access.
    #[inline(always)]
    pub fn cancelled(&self) -> bool {
        CANCEL_EPOCH.load(Relaxed) != self.epoch
    }

    /// The error of a cancelled launch.
    pub fn interrupted_message(&self) -> String {
        format!("kernel {}: interrupted", self.kernel)
    }
}

/// `(x,y,z)`, as block and thread coordinates appear in error messages.
pub(crate) fn coords([x, y, z]: [u32; 3]) -> String {
    format!("({x},{y},{z})")
}

/// The emulated thread running on this OS thread.
pub(crate) struct Current {
    pub cta: Arc<Cta>,
    pub thread: [u32; 3],
    /// `x + y * block_dim_x + z * block_dim_x * block_dim_y`: the lane is this % 32, the warp this / 32.
    pub linear: u32,
}

impl Current {
    /// Leaves the kernel, failing the launch as interrupted, if the launch was cancelled.
    #[inline(always)]
    pub fn poll_cancel(&self) {
        if self.cta.launch.cancelled() {
            self.interrupted()
        }
    }

    #[cold]
    #[inline(never)]
    fn interrupted(&self) -> ! {
        self.fail(self.cta.launch.interrupted_message())
    }

    /// Where this thread is, for error messages.
    pub fn location(&self) -> String {
        format!("block {} thread {}", coords(self.cta.block_idx), coords(self.thread))
    }

    /// Fails the launch with `message` (the first failure of a launch is the one reported) and leaves the kernel.
    pub fn fail(&self, message: String) -> ! {
        self.cta.fail(message);
        abort()
    }

    /// Checked mode: fails the launch unless element `i` of the `size`-byte elements at `addr` lies inside the
    /// argument or shared-memory region `addr` points into. A pointer one past a region's end counts as pointing
    /// into it, so that `ptr.add(n)` is reported against its buffer.
    pub fn check_element(&self, addr: usize, i: usize, size: usize, align: usize, access: &str) {
        let kernel = self.cta.launch.kernel;
        let span = i
            .checked_mul(size)
            .and_then(|offset| offset.checked_add(addr))
            .and_then(|start| start.checked_add(size));
        let mut home = None;
        let shared = Region {
            name: "dynamic shared memory",
            base: self.cta.shared,
            len: self.cta.launch.shared_bytes,
        };
        for region in self.cta.launch.regions.iter().chain([&shared]) {
            if addr < region.base || addr - region.base > region.len {
                continue;
            }
            if span.is_some_and(|end| end - region.base <= region.len) {
                // Rust sizes are multiples of the alignment, so only the base address can be misaligned.
                if !addr.is_multiple_of(align) {
                    self.fail(format!(
                        "kernel {kernel}: misaligned {access} {} {} at element {i}: address {addr:#x} is not a \
                         multiple of {align}, in {}",
                        preposition(access),
                        region.name,
                        self.location()
                    ));
                }
                return;
            }
            home.get_or_insert(region);
        }
        let message = match home {
            Some(region) => {
                let size = size.max(1);
                let element = ((addr - region.base) / size) as u128 + i as u128;
                format!(
                    "kernel {kernel}: out-of-bounds {access} {} {name} at element {element} ({name} has {} elements) \
                     in {}",
                    preposition(access),
                    region.len / size,
                    self.location(),
                    name = region.name,
                )
            }
            None => format!(
                "kernel {kernel}: out-of-bounds {access} at element {i} of address {addr:#x}, which lies in no \
                 pointer argument and not in dynamic shared memory, in {}",
                self.location()
            ),
        };
        self.fail(message)
    }
}

fn preposition(access: &str) -> &'static str {
    if access == "read" {
        "from"
    } else {
        "to"
    }
}

thread_local! {
    /// The emulated thread running on this OS thread, null outside [`run_as`]. A plain pointer rather than a
    /// `RefCell`: every element access reads it, and a borrow would cost more than the access checks.
    static CURRENT: Cell<*const Current> = const { Cell::new(std::ptr::null()) };
}

/// Runs `f` on this OS thread as the emulated thread `current`.
pub(crate) fn run_as<R>(current: &Current, f: impl FnOnce() -> R) -> R {
    struct Reset;
    impl Drop for Reset {
        fn drop(&mut self) {
            CURRENT.set(std::ptr::null());
        }
    }
    CURRENT.set(current);
    let _reset = Reset; // `current` is not reachable after `run_as`, even if `f` unwinds
    f()
}

/// Lets the other threads of the caller's CTA run before it goes on, where they are fibers of this OS thread (a wait
/// at a barrier, or an atomic that may be polling for another thread's write), and makes the caller current again.
#[cfg(all(target_arch = "x86_64", target_os = "linux", not(rk_emulator_threads)))]
pub(crate) fn let_others_run() {
    let current = CURRENT.get();
    if !current.is_null() {
        super::fiber::yield_now();
        CURRENT.set(current);
    }
}

/// Nothing to do where the CTA's threads are OS threads: the others run meanwhile.
#[cfg(any(not(all(target_arch = "x86_64", target_os = "linux")), rk_emulator_threads))]
pub(crate) fn let_others_run() {}

/// Runs `f` on the current emulated thread, if this OS thread is one.
#[inline(always)]
pub(crate) fn try_with_current<R>(f: impl FnOnce(Option<&Current>) -> R) -> R {
    // SAFETY: non-null only inside `run_as`, whose `current` outlives the call; `f` cannot keep the reference.
    f(unsafe { CURRENT.get().as_ref() })
}

/// Runs `f` on the current emulated thread; `what` names the device function for the panic outside a launch. The
/// thread leaves the kernel first if its launch was cancelled: index reads, barriers and warp operations come here.
#[inline(always)]
pub(crate) fn with_current<R>(what: &str, f: impl FnOnce(&Current) -> R) -> R {
    try_with_current(|current| match current {
        Some(current) => {
            current.poll_cancel();
            f(current)
        }
        None => outside_a_launch(what),
    })
}

#[cold]
#[inline(never)]
fn outside_a_launch(what: &str) -> ! {
    panic!(
        "cuda_std: {what} called outside a kernel launch (the host emulator runs kernels with \
         `cuda_std::host::launch`)"
    )
}
