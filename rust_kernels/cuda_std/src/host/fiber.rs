//! A CTA's threads as fibers of the launching OS thread (x86_64 Linux, System V ABI: `switch` swaps stacks in a few
//! instructions).
//!
//! The fibers run in turn, each until it must wait for others (a barrier, a warp rendezvous: `Cta::wait`) or makes an
//! atomic access (which may be polling for another thread's write), where it yields. Waiting is then a stack switch
//! rather than an OS thread's sleep and wake-up, and a CTA starts no threads: a CTA of 256 threads summing through
//! shared memory (9 barriers) took 33-39 ms as OS threads and takes 0.2 ms as fibers, on 2 cores (glibc's swapcontext,
//! a system call per switch, took 2.5 ms).
//!
//! The threads of a CTA thus run one at a time between their waits (the launch lists them in thread order in even CTAs
//! and in reverse in odd ones, so that a read of another thread's write with no barrier between them reads the
//! unwritten value (shared memory starts as 0xFF bytes) in one CTA or the other, whichever of the two threads writes).
//! A cooperative launch runs the fibers of all its CTAs in one scheduler.

use std::cell::Cell;
use std::ffi::c_void;
use std::io;
use std::panic::{self, AssertUnwindSafe};
use std::ptr;

/// A suspended context: its stack pointer, below the registers `switch` saved there.
type StackPointer = *mut usize;

/// Saves the callee-saved state of the System V ABI (rbp, rbx, r12-r15, MXCSR, the x87 control word) on the current
/// stack, stores the stack pointer in `*save` and resumes the context whose stack pointer is `to`.
#[unsafe(naked)]
unsafe extern "C" fn switch(save: *mut StackPointer, to: StackPointer) {
    core::arch::naked_asm!(
        "push rbp",
        "push rbx",
        "push r12",
        "push r13",
        "push r14",
        "push r15",
        "sub rsp, 8",
        "stmxcsr [rsp]",
        "fnstcw [rsp + 4]",
        "mov [rdi], rsp",
        "mov rsp, rsi",
        "ldmxcsr [rsp]",
        "fldcw [rsp + 4]",
        "add rsp, 8",
        "pop r15",
        "pop r14",
        "pop r13",
        "pop r12",
        "pop rbx",
        "pop rbp",
        "ret",
    )
}

/// A fresh context on the stack below `top` (16-byte aligned) that `switch` resumes at `entry`, as if called from
/// an address 0 (where backtraces end).
unsafe fn prepare(top: *mut u8) -> StackPointer {
    let words = top.cast::<usize>();
    unsafe {
        words.sub(1).write(0); // entry's return address
        words.sub(2).write(entry as *const () as usize); // where `switch` returns to
        for saved in 3..=8 {
            words.sub(saved).write(0); // rbp, rbx, r12-r15
        }
        let sp = words.sub(9);
        sp.cast::<u32>().write(0x1F80); // MXCSR's default: round to nearest, exceptions masked, no flush to zero
        sp.cast::<u32>().add(1).write(0x037F); // the x87 control word's default
        sp
    }
}

const PROT_NONE: i32 = 0;
const PROT_READ: i32 = 1;
const PROT_WRITE: i32 = 2;
// Linux's values (other systems number the mapping flags otherwise).
const MAP_PRIVATE: i32 = 0x02;
const MAP_ANONYMOUS: i32 = 0x20;
const MAP_NORESERVE: i32 = 0x4000;

/// Below each stack, a page range no access may reach (a stack overflow faults there, as on an OS thread's guard
/// page): 64 KiB, a multiple of every page size Linux uses.
const GUARD_BYTES: usize = 64 << 10;

extern "C" {
    fn mmap(addr: *mut c_void, len: usize, prot: i32, flags: i32, fd: i32, offset: i64) -> *mut c_void;
    fn mprotect(addr: *mut c_void, len: usize, prot: i32) -> i32;
    fn munmap(addr: *mut c_void, len: usize) -> i32;
}

/// The stacks of a launch's fibers, one mapping reused by every CTA: a fiber's pages stay mapped once touched.
pub(super) struct Stacks {
    base: *mut u8,
    count: usize,
    stride: usize,
}

impl Stacks {
    /// `count` stacks of `stack_bytes` (a multiple of 64 KiB), each above a guard range.
    pub(super) fn new(count: usize, stack_bytes: usize) -> io::Result<Stacks> {
        let stride = GUARD_BYTES + stack_bytes;
        let len = stride * count;
        // SAFETY: a fresh private anonymous mapping; the guard ranges lie inside it.
        unsafe {
            let flags = MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE;
            let base = mmap(ptr::null_mut(), len, PROT_READ | PROT_WRITE, flags, -1, 0);
            if base as isize == -1 {
                return Err(io::Error::last_os_error());
            }
            let stacks = Stacks {
                base: base.cast(),
                count,
                stride,
            };
            for i in 0..count {
                if mprotect(stacks.base.add(i * stride).cast(), GUARD_BYTES, PROT_NONE) != 0 {
                    return Err(io::Error::last_os_error());
                }
            }
            Ok(stacks)
        }
    }
}

impl Drop for Stacks {
    fn drop(&mut self) {
        // SAFETY: the mapping `new` made; no fiber runs on it any more.
        unsafe { munmap(self.base.cast(), self.stride * self.count) };
    }
}

/// The work of one fiber.
pub(super) type Work<'a> = Box<dyn FnOnce() + 'a>;

struct Fiber<'a> {
    sp: StackPointer,
    work: Option<Work<'a>>,
    done: bool,
}

/// The CTA running on this OS thread: its fibers, the one running, and the context that runs them.
struct Scheduler {
    main: StackPointer,
    fibers: *mut Fiber<'static>,
    current: usize,
}

thread_local! {
    /// The scheduler running fibers on this OS thread, null outside [`run`].
    static RUNNING: Cell<*mut Scheduler> = const { Cell::new(ptr::null_mut()) };
}

/// Runs every piece of `work` as a fiber on `stacks` (one each, at least as many) until all have ended: in order,
/// each until it yields or ends, round after round.
pub(super) fn run(stacks: &Stacks, work: Vec<Work<'_>>) {
    assert!(work.len() <= stacks.count, "more fibers than stacks");
    let mut fibers = Vec::with_capacity(work.len());
    for (i, work) in work.into_iter().enumerate() {
        // SAFETY: the top of the i-th stack of the mapping, 64 KiB-aligned; nothing else uses that stack.
        let sp = unsafe { prepare(stacks.base.add((i + 1) * stacks.stride)) };
        fibers.push(Fiber {
            sp,
            work: Some(work),
            done: false,
        });
    }
    let count = fibers.len();
    // The fibers' borrows end before `run` returns: each fiber has ended by then.
    let mut scheduler = Scheduler {
        main: ptr::null_mut(),
        fibers: fibers.as_mut_ptr().cast(),
        current: 0,
    };
    let previous = RUNNING.replace(&mut scheduler);
    let mut live = count;
    while live > 0 {
        for i in 0..count {
            // SAFETY: `i` indexes `fibers`, which stays in place until `run` returns; only one context runs at a
            // time, so the fiber's fields are not accessed elsewhere meanwhile.
            unsafe {
                let fiber = scheduler.fibers.add(i);
                if (*fiber).done {
                    continue;
                }
                scheduler.current = i;
                switch(&mut scheduler.main, (*fiber).sp);
                live -= usize::from((*fiber).done);
            }
        }
    }
    RUNNING.set(previous);
}

/// Switches from the running fiber to its scheduler, which resumes the others before this one.
pub(super) fn yield_now() {
    let scheduler = RUNNING.get();
    assert!(!scheduler.is_null(), "yield_now outside a fiber");
    // SAFETY: called on a fiber of the running scheduler, which waits in `run` meanwhile.
    unsafe {
        let fiber = (*scheduler).fibers.add((*scheduler).current);
        switch(&mut (*fiber).sp, (*scheduler).main);
    }
}

/// A fiber's first frame: runs its work, marks it done and returns to the scheduler for good.
extern "C" fn entry() {
    let scheduler = RUNNING.get();
    // SAFETY: the scheduler resumed this fiber first from `run`, which has set `current` to it.
    unsafe {
        let fiber = (*scheduler).fibers.add((*scheduler).current);
        let work = (*fiber).work.take();
        // Kernel panics are caught inside the work; one that escapes is a bug of the emulator, and must not unwind
        // into C. The panic hook has printed it.
        if panic::catch_unwind(AssertUnwindSafe(move || work.map(|work| work()))).is_err() {
            std::process::abort();
        }
        (*fiber).done = true;
        switch(&mut (*fiber).sp, (*scheduler).main);
    }
    std::process::abort(); // a done fiber is never resumed
}
