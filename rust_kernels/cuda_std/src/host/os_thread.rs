//! A CTA's threads as bare POSIX threads, joined before their scope ends (as `std::thread::scope` joins them).
//!
//! `std::thread` gives each thread it starts, and each thread that asks for `thread::current`, a handle that it
//! frees at thread exit through a pthread key: one key per copy of std. Every kernel library links its own copy,
//! and glibc has 1 024 keys per process, so a process that had launched about a thousand distinct kernel libraries
//! aborted ("fatal runtime error: out of TLS keys"). Bare threads never reach that bookkeeping.

use std::ffi::c_void;
use std::io;
use std::marker::PhantomData;
use std::panic::{self, AssertUnwindSafe};
use std::ptr;

/// Storage for a `pthread_attr_t`, which the C library initialises: 56 bytes on x86_64 and 64 on aarch64 (glibc),
/// 64 on macOS; no larger anywhere this builds.
#[repr(C, align(16))]
struct Attr([u8; 64]);

/// `pthread_t`: an integer or a pointer, one word on every 64-bit POSIX target.
type ThreadId = usize;

type Start = extern "C" fn(*mut c_void) -> *mut c_void;

extern "C" {
    fn pthread_attr_init(attr: *mut Attr) -> i32;
    fn pthread_attr_setstacksize(attr: *mut Attr, size: usize) -> i32;
    fn pthread_attr_destroy(attr: *mut Attr) -> i32;
    fn pthread_create(thread: *mut ThreadId, attr: *const Attr, start: Start, arg: *mut c_void) -> i32;
    fn pthread_join(thread: ThreadId, result: *mut *mut c_void) -> i32;
}

/// The work of one thread: boxed twice so that the thread's argument is a thin pointer.
type Work<'a> = Box<dyn FnOnce() + Send + 'a>;

/// Threads that may borrow from the caller's frame: dropping the scope joins them all, also when unwinding.
pub(super) struct Scope<'a> {
    threads: Vec<ThreadId>,
    borrows: PhantomData<&'a ()>,
}

/// Runs `body` with a scope in which it starts threads; returns once every thread started in it has ended.
pub(super) fn scope<'a, R>(body: impl FnOnce(&mut Scope<'a>) -> R) -> R {
    let mut scope = Scope {
        threads: Vec::new(),
        borrows: PhantomData,
    };
    body(&mut scope)
}

impl<'a> Scope<'a> {
    /// Starts a thread with a stack of `stack_bytes` running `work`.
    pub(super) fn spawn(&mut self, stack_bytes: usize, work: impl FnOnce() + Send + 'a) -> io::Result<()> {
        let arg = Box::into_raw(Box::new(Box::new(work) as Work<'a>)).cast::<c_void>();
        let mut attr = Attr([0; 64]);
        let mut id: ThreadId = 0;
        // SAFETY: `attr` is initialised before use and destroyed after; `arg` goes to the new thread alone, or is
        // reclaimed here if no thread starts. The thread may outlive `'a` only until the scope joins it.
        let status = unsafe {
            let mut status = pthread_attr_init(&mut attr);
            if status == 0 {
                status = pthread_attr_setstacksize(&mut attr, stack_bytes);
                if status == 0 {
                    status = pthread_create(&mut id, &attr, run, arg);
                }
                pthread_attr_destroy(&mut attr);
            }
            if status != 0 {
                drop(Box::from_raw(arg.cast::<Work<'a>>()));
            }
            status
        };
        if status != 0 {
            return Err(io::Error::from_raw_os_error(status));
        }
        self.threads.push(id);
        Ok(())
    }
}

impl Drop for Scope<'_> {
    fn drop(&mut self) {
        for id in self.threads.drain(..) {
            // SAFETY: each id is a joinable thread started by `spawn` and joined once.
            unsafe { pthread_join(id, ptr::null_mut()) };
        }
    }
}

extern "C" fn run(arg: *mut c_void) -> *mut c_void {
    // SAFETY: `arg` is the box `spawn` made for this thread; the scope that owns its borrows outlives the thread.
    let work = unsafe { Box::from_raw(arg.cast::<Work<'static>>()) };
    // Kernel panics are caught inside the work; one that escapes is a bug of the emulator, and must not unwind into
    // C. The panic hook has printed it.
    if panic::catch_unwind(AssertUnwindSafe(work)).is_err() {
        std::process::abort();
    }
    ptr::null_mut()
}
