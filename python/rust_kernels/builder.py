"""Build: a kernel instance -> generated crate -> cargo -> PTX (+ cubin) for a GPU arch, or a shared library for the
host emulator (target "host") -> the content-hash cache. Prebuilt entries shipped in the wheel are used first."""

from __future__ import annotations

import itertools
import os
import re
import subprocess
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from functools import cache
from pathlib import Path

from rust_kernels import barriers, codegen, config, resources
from rust_kernels import cache as kcache
from rust_kernels.errors import BuildError, CacheError, KernelUnavailable, ToolchainMissing
from rust_kernels.kernels import Kernel
from rust_kernels.progress import say, step
from rust_kernels.toolchain import PTXAS_HINT, TARGET, Toolchain, find_ptxas, find_toolchain
from rust_kernels.version import __version__

DEFAULT_ARCH = config.DEFAULT_ARCH
HOST = "host"  # the target name of a build for the host emulator (in place of a GPU arch)
# GPU archs a prebuilt wheel carries, newest first: a device of another arch JITs the PTX of the newest one below it.
PREBUILT_ARCHS = ("sm_100", "sm_90", "sm_80")
# Everything passed to rustc for the target besides the sysroot and linker paths (part of the cache key).
RUSTFLAGS = ("-Zcrate-attr=feature(abi_ptx)",)


def default_arch() -> str:
    return config.settings().arch


@cache
def tree_digest(target: str) -> str:
    """Hash of the sources that decide the build besides the kernel: the device-support crate and its macro, the
    linker, the crate templates and the lock file (dependency versions). The crate's host emulator (src/host) is
    left out of PTX builds, which it never reaches; the linker is left out of host builds."""
    cuda_std, macros = resources.cuda_std(), resources.cuda_std_macros()
    host_only = cuda_std / "src" / "host"
    files = {
        str(p.relative_to(root.parent)): p
        for root in (cuda_std, macros)
        for p in sorted(root.rglob("*"))
        if p.is_file() and "target" not in p.parts and (target == HOST or host_only not in p.parents)
    }
    extra = [resources.cargo_lock(), *(resources.templates() / t for t in codegen.CRATE_TEMPLATES.values())]
    if target != HOST:
        extra.append(resources.ptx_linker())
    for p in extra:
        if p.is_file():
            files[p.name] = p
    digest = [f"{name}:{kcache.sha256(p.read_bytes())}" for name, p in files.items()]
    return kcache.sha256("\n".join(digest).encode())


def source_key(kernel: Kernel, arch: str | None = None) -> str:
    """Hash of everything that decides the PTX except the toolchain (which a machine without Rust cannot name)."""
    arch = resolve_target(arch)
    parts = [
        __version__,
        arch,
        " ".join(RUSTFLAGS) if arch != HOST else "",
        tree_digest(arch),
        kernel.source,
        performance_directives(kernel) if arch != HOST else "",
    ]
    return kcache.sha256("\0".join(parts).encode())


def content_hash(kernel: Kernel, arch: str | None = None) -> str:
    """The cache key: source_key plus the toolchain's identity (rustc -vV and its LLVM tools)."""
    arch = resolve_target(arch)
    return kcache.sha256(f"{source_key(kernel, arch)}\0{find_toolchain().identity}".encode())


def build(kernel: Kernel, arch: str | None = None) -> Path:
    """Returns the path of the kernel's PTX, building it (and a cubin, where ptxas is found) if not cached."""
    return _built_entry(kernel, config.resolve_arch(arch)).file("kernel.ptx")


def resolve_target(arch: str | None) -> str:
    """A validated GPU arch (default: config's), or HOST."""
    return HOST if arch == HOST else config.resolve_arch(arch)


def build_host(kernel: Kernel) -> Path:
    """Returns the path of the kernel's shared library for the host emulator, building it if not cached."""
    entry = _built_entry(kernel, HOST)
    return entry.file(HOST_LIBRARY)


HOST_LIBRARY = kcache.HOST_LIBRARY


def _built_entry(kernel: Kernel, arch: str) -> kcache.Entry:
    key = content_hash(kernel, arch)
    entry = kcache.read_entry(key)
    if entry is None:
        with kcache.locked(key):
            entry = kcache.read_entry(key) or _build_entry(kernel, arch, key)
    entry = _with_cubin(key, entry, arch)
    kcache.point(source_key(kernel, arch), key)
    return entry


def _with_cubin(key: str, entry: kcache.Entry, arch: str) -> kcache.Entry:
    """The entry, completed with its cubin (ptxas's validation) if it was built where ptxas was missing and ptxas is
    found now: ptxas runs on the entry's PTX under the key's lock, then the cubin is published atomically."""
    cubin = f"kernel.{arch}.cubin"
    if arch == HOST or cubin in entry.meta["files"] or (ptxas := find_ptxas()) is None:
        return entry
    with kcache.locked(key):
        current = kcache.read_entry(key)
        if current is None or cubin in current.meta["files"]:
            return current or entry
        with kcache.staging(f"ptxas-{key[:16]}-") as scratch:
            data = _ptxas(ptxas, scratch, arch, current.file("kernel.ptx").read_text())
        return kcache.add_files(current, {cubin: data})


def _build_entry(kernel: Kernel, arch: str, key: str) -> kcache.Entry:
    toolchain = find_toolchain()
    package = f"rk_{key[:16]}"
    crate = kcache.cache_dir() / "build" / package
    crate.mkdir(parents=True, exist_ok=True)
    files = codegen.crate_files(kernel, package, _crate_target(arch))
    for name, text in files.items():
        (crate / name).write_text(text)
    lock = resources.cargo_lock()
    if lock.is_file():  # the workspace's pinned dependency versions
        (crate / "Cargo.lock").write_bytes(lock.read_bytes())
    slot = getattr(_worker, "slot", 0)
    target_dir = kcache.cache_dir() / "target" / (f"{toolchain.key}-{arch}" + (f"-{slot}" if slot else ""))
    out = {"lib.rs": files["lib.rs"].encode()}
    if arch == HOST:
        with step(f"built {kernel.id} for the host emulator"):
            _cargo(toolchain, kernel, crate, target_dir, HOST, None)
        out[HOST_LIBRARY] = _output(toolchain, target_dir / "release" / f"lib{package}.so").read_bytes()
    else:
        sysroot = toolchain.sysroot(arch)
        with step(f"built {kernel.id} for {arch}"):
            _cargo(toolchain, kernel, crate, target_dir, arch, sysroot)
        ptx = _output(toolchain, target_dir / TARGET / "release" / f"{package}.ptx").read_text()
        _check_ptx(kernel, ptx, crate)
        ptx = _with_directives(kernel, ptx)
        out["kernel.ptx"] = ptx.encode()
        ptxas = find_ptxas()
        if ptxas is None:
            say(f"ptxas not found: no cubin for {arch} (the driver will JIT the PTX); {PTXAS_HINT}")
        else:
            out[f"kernel.{arch}.cubin"] = _ptxas(ptxas, crate, arch, ptx)
    meta = {
        "id": kernel.id,
        "entry_point": kernel.entry_point_name(),
        "arch": arch,
        "source_key": source_key(kernel, arch),
        "toolchain": toolchain.identity,
        "generator": __version__,
    }
    return kcache.write_entry(key, out, meta)


def _crate_target(arch: str) -> str:
    """The crate templates' target for a build for `arch`: "host" (the emulator) or "ptx"."""
    return "host" if arch == HOST else "ptx"


def _output(toolchain: Toolchain, path: Path) -> Path:
    """What cargo must have written; its absence (a cargo that is not cargo) is a BuildError, not a traceback."""
    if not path.is_file():
        raise BuildError(f"{toolchain.cargo} reported success but wrote no {path.name} (expected at {path}); is it "
                         "cargo? (RUST_KERNELS_CARGO)")  # fmt: skip
    return path


def _cargo(
    toolchain: Toolchain, kernel: Kernel, crate: Path, target_dir: Path, arch: str, sysroot: Path | None
) -> None:
    """cargo build --release of `kernel`'s `crate`: for nvptx64 at `arch`, or for the host when arch is HOST."""
    rustflags = [] if arch == HOST else [f"-Ctarget-cpu={arch}", f"-Clinker={resources.ptx_linker()}", *RUSTFLAGS]
    if sysroot is not None:
        rustflags += ["--sysroot", str(sysroot)]
    env = {
        **os.environ,
        "RUSTC": str(toolchain.rustc),
        "RUSTC_BOOTSTRAP": "1",  # for abi_ptx, asm on nvptx and -Z flags, on a stable rustc
        "RUST_KERNELS_LLVM_BIN": str(toolchain.llvm_bin),
        "CARGO_TARGET_DIR": str(target_dir),
        "CARGO_ENCODED_RUSTFLAGS": "\x1f".join(rustflags),
    }
    env.pop("RUSTFLAGS", None)
    cmd = [str(toolchain.cargo), "build", "--release", "--manifest-path", str(crate / "Cargo.toml")]
    if arch != HOST:
        cmd += ["--target", TARGET]
    done = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if done.returncode:
        raise BuildError(_explain(done.stderr, crate, kernel, _crate_target(arch)))


def _explain(stderr: str, crate: Path, kernel: Kernel, target: str) -> str:
    """cargo's errors, each followed by the generated lines it points at and the template line that produced them
    (traced only now: a build that succeeds pays nothing for it)."""
    lib = crate / "lib.rs"
    generated = lib.read_text() if lib.is_file() else ""
    lines = generated.splitlines()
    out = [f"cargo failed building the generated crate at {crate} (kept for inspection):", stderr.strip()]
    errors = [int(n) for n in dict.fromkeys(re.findall(r"--> (?:.*/)?lib\.rs:(\d+):\d+", stderr))]
    origins = codegen.template_lines(kernel, crate.name, target, generated) if errors else None
    for line in errors:
        snippet = "\n".join(f"{n:5} | {lines[n - 1]}" for n in range(max(1, line - 2), min(len(lines), line + 2) + 1))
        where = origins[line - 1] if origins and line <= len(origins) else None
        if where is not None:  # the template line, then the macro calls that expanded it
            for label, at in (("from", where.at), *(("called from", call) for call in where.calls)):
                snippet += f"\n{label} template {at.filename}, line {at.line}:\n{at.line:5} | {at.text}"
        out.append(f"generated {lib}, line {line}:\n{snippet}")
    if errors and origins is None:
        out.append("(the generated lines could not be traced back to their templates)")
    return "\n\n".join(out)


def performance_directives(kernel: Kernel) -> str:
    """PTX performance directives for the entry, from the spec (stock rustc has no launch-bounds attribute): the
    CTA shape, which the launcher enforces, so ptxas allocates registers for exactly that many threads, and the
    spec's register cap where one applies to this instance ([[registers]]: a cap above what ptxas picks lets it keep
    more loads in flight). (Asking for more CTAs per SM with .minnctapersm made ptxas spill the unrolled loop and
    halved throughput on the H200.)"""
    x, y, z = kernel.block_dim
    cap = kernel.spec.max_registers(kernel.spec_names)
    return f".maxntid {x}, {y}, {z}" + ("" if cap is None else f"\n.maxnreg {cap}")


def _with_directives(kernel: Kernel, ptx: str) -> str:
    """Inserts the performance directives between the entry's parameter list and its body."""
    head = f".visible .entry {kernel.entry_point_name()}("
    start = ptx.index(head)
    body = ptx.index("\n{", start)
    return ptx[:body] + "\n" + performance_directives(kernel) + ptx[body:]


def _check_ptx(kernel: Kernel, ptx: str, crate: Path) -> None:
    entry = kernel.entry_point_name()
    if f".visible .entry {entry}(" not in ptx:
        raise BuildError(f"the PTX built from {crate} has no `.visible .entry {entry}`: is it marked #[kernel]?")
    if ".extern .func" in ptx:
        raise BuildError(f"the PTX built from {crate} references unresolved external functions (.extern .func)")
    hazards = barriers.divergent_barriers(ptx, kernel.block_dim[0])
    if hazards:
        (crate / "kernel.ptx").write_text(ptx)
        first = hazards[0]
        raise BuildError(
            f"{kernel.id}: its PTX ({crate / 'kernel.ptx'}) has an aligned barrier, `{' '.join(first.text.split())}` "
            f"at line {first.barrier} ({len(hazards)} in all), inside a branch on a lane-dependent condition (line "
            f"{first.branch}): a warp whose lanes take different sides reaches different copies of the barrier and "
            "hangs on the GPU, where the emulator passes. Keep every branch between two barriers uniform across a "
            "warp: test tid / 32, not the lane (docs/spec.md, Barriers)."
        )


def _ptxas(ptxas: Path, crate: Path, arch: str, ptx: str) -> bytes:
    source, cubin = crate / "kernel.ptx", crate / f"kernel.{arch}.cubin"
    source.write_text(ptx)
    with step(f"ptxas -arch={arch} for {crate.name}"):
        done = subprocess.run(
            [str(ptxas), f"-arch={arch}", str(source), "-o", str(cubin)], capture_output=True, text=True
        )
    if done.returncode:
        raise BuildError(f"ptxas rejected the PTX of {crate}:\n{done.stderr.strip()}")
    return cubin.read_bytes()


# A parallel build's worker thread: its slot numbers its cargo target directory (cargo locks a target directory for a
# whole build, so workers sharing one would build one at a time; each fills its own with cuda_std once).
_worker = threading.local()


def default_jobs() -> int:
    """Parallel builds by default: one per CPU this process may run on."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def cached_entries(work: Sequence[tuple[Kernel, str]], jobs: int,
                   done: Callable[[Kernel, str], None] | None = None) -> list[kcache.Entry]:  # fmt: skip
    """cached_entry of each (kernel, arch) in `work`, in its order, `jobs` at a time; `done(kernel, arch)` as each
    ends (in this thread). The first failure stops the builds not yet started and is raised."""
    slots = itertools.count()

    def start() -> None:
        _worker.slot = next(slots)

    with ThreadPoolExecutor(jobs, thread_name_prefix="rust_kernels-build", initializer=start) as pool:
        futures = {pool.submit(cached_entry, kernel, arch): (kernel, arch) for kernel, arch in work}
        try:
            for future in as_completed(futures):
                future.result()
                if done is not None:
                    done(*futures[future])
        except BaseException:
            pool.shutdown(cancel_futures=True)
            raise
    return [future.result() for future in futures]


def cached_entry(kernel: Kernel, arch: str | None = None) -> kcache.Entry:
    """The kernel's entry for `arch` (or HOST): prebuilt in the wheel, else built here when a toolchain exists, else a
    carried one found by source key."""
    arch = resolve_target(arch)
    prebuilt = _prebuilt(kernel, arch)
    if prebuilt is not None:
        return prebuilt
    try:
        return _built_entry(kernel, arch)
    except ToolchainMissing as missing:
        key = kcache.resolve(source_key(kernel, arch))
        entry = kcache.read_entry(key) if key else None
        if entry is None:
            raise KernelUnavailable(
                f"{kernel.id} ({arch}) has no valid entry in the cache at {kcache.cache_dir()} and cannot be built "
                f"here: {missing} Build it where Rust is installed (python -m rust_kernels build) and carry the "
                "cache directory (RUST_KERNELS_CACHE_DIR), or install a wheel with prebuilt kernels."
            ) from None
        return _with_cubin(key, entry, arch)


def _prebuilt(kernel: Kernel, arch: str) -> kcache.Entry | None:
    root = resources.prebuilt()
    if not root.is_dir():
        return None
    key = kcache.resolve(source_key(kernel, arch), root)
    return kcache.read_entry(key, root) if key else None


def entry_for_arch(kernel: Kernel, arch: str) -> kcache.Entry:
    """The entry to load on a device of `arch`: its own (built, prebuilt or carried); where none can be had, the
    PTX of the newest prebuilt arch below it, which the driver JIT-compiles."""
    try:
        return cached_entry(kernel, arch)
    except CacheError:
        number = int(arch.removeprefix("sm_").rstrip("a"))
        for lower in PREBUILT_ARCHS:
            if int(lower.removeprefix("sm_")) < number and (entry := _prebuilt(kernel, lower)) is not None:
                return entry
        raise
