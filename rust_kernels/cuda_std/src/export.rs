//! [`export_host_launch!`](crate::export_host_launch): the C ABI of a host-kernel library.

/// Exports a C ABI that launches the kernel `ENTRY` (a `#[kernel]` function of the calling crate) in the host
/// emulator, for a `cdylib` loaded with `ctypes`. Write it once, after the entry point:
///
/// ```ignore
/// use cuda_std::prelude::*;
///
/// #[kernel]
/// #[no_mangle]
/// pub unsafe extern "C" fn scale_entry_point(x: *mut f32, n: i32, a: f32) { /* ... */ }
///
/// cuda_std::export_host_launch!(scale_entry_point);
/// ```
///
/// On nvptx64 it expands to nothing. Elsewhere it exports the functions below (unmangled, C calling convention),
/// so one library holds one kernel. The library must be built with `panic = "unwind"` (the default; emulated
/// threads leave a failed launch by unwinding): `panic = "abort"` is a compile error.
///
/// # C declarations
///
/// ```c
/// typedef struct {        /* 24 bytes, alignment 8: kind at offset 0, bytes at 8, bits at 16 */
///     uint32_t kind;      /* 0 ptr, 1 i32, 2 u32, 3 i64, 4 u64, 5 f32, 6 f64 */
///     uint64_t bytes;     /* ptr: the extent in bytes of the buffer behind it; scalars: 0 */
///     uint64_t bits;      /* ptr: the address; scalars: the value's bit pattern, zero-extended */
/// } RawArg;
///
/// int32_t rk_host_launch(const RawArg *args, size_t n_args, const uint32_t *dims, uint64_t shared_mem_bytes,
///                        uint32_t flags, char *error, size_t error_capacity);
/// void rk_host_cancel(void);
/// uint32_t rk_host_abi_version(void);             /* 2 */
/// uint64_t rk_host_max_shared_mem_bytes(void);    /* 232448 */
/// const char *rk_host_kernel_name(void);          /* "scale_entry_point" */
/// size_t rk_host_param_count(void);
/// const char *rk_host_param_name(size_t i);       /* "x"; NULL when i >= count */
/// const char *rk_host_param_type(size_t i);       /* "*mut f32"; NULL when i >= count */
/// ```
///
/// Strings returned are static, NUL-terminated UTF-8, owned by the library.
///
/// # `rk_host_launch`
///
/// Launches the kernel and returns when every CTA has finished. CTAs run one after another, or all at once in a
/// cooperative launch; a CTA's threads run as fibers of the calling thread on x86_64 Linux, as OS threads elsewhere.
/// It may be called from several threads at once.
///
/// - `args`, `n_args`: one [`RawArg`](crate::host::abi::RawArg) per kernel parameter, in order (`args` may be NULL
///   when `n_args` is 0). A kind must match the parameter's type (`rk_host_param_type`): kind 0 for `*mut T` and
///   `*const T`, else the scalar of that name. Scalars carry their bit pattern zero-extended to 64 bits: an `i32`
///   -1 is `0xFFFFFFFF`, an `f32` its IEEE bits (`struct.unpack("<I", struct.pack("<f", v))`); bits above a 32-bit
///   kind's width are an error. A pointer's `bytes` is the extent of its buffer: a checked launch fails on any
///   access outside it; a NULL pointer must have `bytes` 0.
/// - `dims`: 6 `uint32_t`, grid x, y, z then block x, y, z. No grid dimension may be 0; a block has 1 to 1024
///   threads.
/// - `shared_mem_bytes`: the dynamic shared memory per CTA, at most `rk_host_max_shared_mem_bytes()` (232448,
///   227 KiB, the H100/H200 opt-in maximum); more is refused before anything is allocated.
/// - `flags`: bit 0 (`checked`) bounds-checks every element access (`DevicePtr` loads and stores, atomics) against
///   the pointer arguments and shared memory, else the kernel is trusted; bit 1 (`cooperative`) runs every CTA at
///   once, as `grid::sync` needs (at most `host::MAX_COOPERATIVE_THREADS` threads in all). Other bits are an error.
/// - `error`, `error_capacity`: receives a NUL-terminated UTF-8 message: "" on success, else the error, truncated
///   to `error_capacity - 1` bytes at a character boundary. Nothing is written when `error` is NULL or
///   `error_capacity` is 0. Every message names the kernel, e.g. `kernel scale_entry_point: interrupted`.
///
/// Returns (constants in [`host::abi`](crate::host::abi)):
/// - 0 (`OK`): success.
/// - 1 (`INVALID`): refused before anything ran: argument count (`kernel K takes 3 arguments but 2 were passed`),
///   an argument (`kernel K: parameter n is i32 but was passed F32(1.0)`, `kernel K: argument 1 (n, i32): unknown
///   kind 9 (0 ptr, ...)`, `kernel K: argument 1 (n, i32): bits 0x100000000 do not fit a i32 ...`), dimensions
///   (`kernel K: grid (4,0,1) has a zero dimension`, `kernel K: block (32,33,1) has 1056 threads; a block has 1 to
///   1024`), shared memory (`kernel K: 1099511627776 bytes of dynamic shared memory requested; a block has at most
///   232448 (227 KiB)`), `flags`, a NULL `dims` or `args`.
/// - 2 (`FAILED`): kernel code failed: out-of-bounds or misaligned access (checked launches), threads that never
///   meet at a barrier, a `grid::sync` that some CTA never reaches or in a launch that is not cooperative, a panic
///   in kernel code. Buffers may be partly written.
/// - 3 (`INTERRUPTED`): `rk_host_cancel()` was called during the launch; the message is `kernel K: interrupted`.
/// - 4 (`PANICKED`): a panic inside the emulator itself (a bug), caught at the boundary.
///
/// No panic crosses the C boundary. Safety: every pointer argument must address at least `bytes` bytes that stay
/// valid, and are not freed or moved, until `rk_host_launch` returns; an unchecked launch trusts the kernel.
///
/// # `rk_host_cancel`
///
/// Interrupts every launch of this library in progress: each notices at its threads' next element access,
/// barrier, warp operation or thread/block index read, or before its next CTA or thread start, and returns 3 once
/// every thread of the CTA has left (typically within a few milliseconds; longer on a loaded machine, where the
/// CTA's threads wait for a core to leave on). Launches started afterwards are not affected, so a cancel that comes
/// before a launch has started is lost: to interrupt a launch running on a worker thread (Ctrl-C), call it
/// repeatedly until that launch returns. A kernel thread spinning in a loop that touches none of the above cannot
/// be interrupted. It is per library: each loaded library has its own copy of the emulator (load them with
/// `RTLD_LOCAL`, ctypes' default).
#[macro_export]
macro_rules! export_host_launch {
    ($entry:ident $(,)?) => {
        #[cfg(all(not(target_arch = "nvptx64"), panic = "abort"))]
        ::core::compile_error!(
            "cuda_std::export_host_launch! needs panic = \"unwind\": the host emulator's threads leave a failed \
             launch by unwinding"
        );

        #[cfg(not(target_arch = "nvptx64"))]
        const _: () = {
            static STRINGS: $crate::host::abi::KernelStrings = $crate::host::abi::KernelStrings::new();

            /// Launches the kernel in the host emulator (see `cuda_std::export_host_launch!`).
            ///
            /// # Safety
            /// Every pointer argument addresses at least its `bytes` bytes until the call returns; `args` holds
            /// `n_args` arguments, `dims` 6 values, `error` is NULL or writable for `error_capacity` bytes.
            #[unsafe(no_mangle)]
            pub unsafe extern "C" fn rk_host_launch(
                args: *const $crate::host::abi::RawArg,
                n_args: usize,
                dims: *const u32,
                shared_mem_bytes: u64,
                flags: u32,
                error: *mut u8,
                error_capacity: usize,
            ) -> i32 {
                unsafe {
                    $crate::host::abi::launch(
                        &$crate::__host_kernel_static!($entry),
                        args,
                        n_args,
                        dims,
                        shared_mem_bytes,
                        flags,
                        error,
                        error_capacity,
                    )
                }
            }

            #[unsafe(no_mangle)]
            pub extern "C" fn rk_host_cancel() {
                $crate::host::cancel_launches()
            }

            #[unsafe(no_mangle)]
            pub extern "C" fn rk_host_abi_version() -> u32 {
                $crate::host::abi::ABI_VERSION
            }

            #[unsafe(no_mangle)]
            pub extern "C" fn rk_host_max_shared_mem_bytes() -> u64 {
                $crate::host::abi::max_shared_mem_bytes()
            }

            #[unsafe(no_mangle)]
            pub extern "C" fn rk_host_kernel_name() -> *const ::core::ffi::c_char {
                STRINGS.kernel_name(&$crate::__host_kernel_static!($entry))
            }

            #[unsafe(no_mangle)]
            pub extern "C" fn rk_host_param_count() -> usize {
                $crate::__host_kernel_static!($entry).params.len()
            }

            #[unsafe(no_mangle)]
            pub extern "C" fn rk_host_param_name(i: usize) -> *const ::core::ffi::c_char {
                STRINGS.param_name(&$crate::__host_kernel_static!($entry), i)
            }

            #[unsafe(no_mangle)]
            pub extern "C" fn rk_host_param_type(i: usize) -> *const ::core::ffi::c_char {
                STRINGS.param_type(&$crate::__host_kernel_static!($entry), i)
            }
        };
    };
}
