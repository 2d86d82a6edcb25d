"""Build: a kernel instance -> generated crate -> cargo (nvptx64) -> PTX (+ cubin) in the content-hash cache."""

from __future__ import annotations

import os
import re
import subprocess
from functools import cache
from pathlib import Path

from rust_kernels import cache as kcache
from rust_kernels import codegen, config
from rust_kernels.errors import BuildError, CacheError, ToolchainMissing
from rust_kernels.kernels import Kernel
from rust_kernels.paths import CUDA_STD, CUDA_STD_MACROS, PTX_LINKER, TEMPLATES, WORKSPACE
from rust_kernels.progress import say, step
from rust_kernels.toolchain import PTXAS_HINT, TARGET, Toolchain, find_ptxas, find_toolchain
from rust_kernels.version import __version__

DEFAULT_ARCH = config.DEFAULT_ARCH
# Everything passed to rustc for the target besides the sysroot and linker paths (part of the cache key).
RUSTFLAGS = ("-Zcrate-attr=feature(abi_ptx)",)


def default_arch() -> str:
    return config.settings().arch


@cache
def _tree_digest() -> str:
    """Hash of the sources that decide the PTX besides the kernel: the device-support crate and its macro, the
    linker, the crate templates and the workspace lock file (dependency versions). The crate's host emulator
    (src/host, compiled for every target but nvptx64) does not reach the PTX and is left out."""
    host_only = CUDA_STD / "src" / "host"
    files = {
        str(p.relative_to(root.parent)): p
        for root in (CUDA_STD, CUDA_STD_MACROS)
        for p in sorted(root.rglob("*"))
        if p.is_file() and "target" not in p.parts and host_only not in p.parents
    }
    for p in (PTX_LINKER, TEMPLATES / "crate_Cargo.toml.j2", TEMPLATES / "crate_lib.rs.j2", WORKSPACE / "Cargo.lock"):
        if p.is_file():
            files[p.name] = p
    digest = [f"{name}:{kcache.sha256(p.read_bytes())}" for name, p in files.items()]
    return kcache.sha256("\n".join(digest).encode())


def source_key(kernel: Kernel, arch: str | None = None) -> str:
    """Hash of everything that decides the PTX except the toolchain (which a machine without Rust cannot name)."""
    arch = config.resolve_arch(arch)
    parts = [
        __version__,
        arch,
        " ".join(RUSTFLAGS),
        _tree_digest(),
        kernel.source,
        performance_directives(kernel),
    ]
    return kcache.sha256("\0".join(parts).encode())


def content_hash(kernel: Kernel, arch: str | None = None) -> str:
    """The cache key: source_key plus the toolchain's identity (rustc -vV and its LLVM tools)."""
    arch = config.resolve_arch(arch)
    return kcache.sha256(f"{source_key(kernel, arch)}\0{find_toolchain().identity}".encode())


def build(kernel: Kernel, arch: str | None = None) -> Path:
    """Returns the path of the kernel's PTX, building it (and a cubin, where ptxas is found) if not cached."""
    return _built_entry(kernel, config.resolve_arch(arch)).file("kernel.ptx")


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
    if cubin in entry.meta["files"] or (ptxas := find_ptxas()) is None:
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
    sysroot = toolchain.sysroot(arch)
    package = f"rk_{key[:16]}"
    crate = kcache.cache_dir() / "build" / package
    crate.mkdir(parents=True, exist_ok=True)
    files = codegen.crate_files(kernel, package)
    for name, text in files.items():
        (crate / name).write_text(text)
    lock = WORKSPACE / "Cargo.lock"
    if lock.is_file():  # the workspace's pinned dependency versions
        (crate / "Cargo.lock").write_bytes(lock.read_bytes())
    target_dir = kcache.cache_dir() / "target" / f"{toolchain.key}-{arch}"
    with step(f"building {kernel.id} for {arch} with cargo"):
        _cargo(toolchain, crate, target_dir, arch, sysroot)
    ptx = (target_dir / TARGET / "release" / f"{package}.ptx").read_text()
    _check_ptx(kernel, ptx, crate)
    ptx = _with_directives(kernel, ptx)
    out = {"kernel.ptx": ptx.encode(), "lib.rs": files["lib.rs"].encode()}
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


def _cargo(toolchain: Toolchain, crate: Path, target_dir: Path, arch: str, sysroot: Path | None) -> None:
    rustflags = [f"-Ctarget-cpu={arch}", f"-Clinker={PTX_LINKER}", *RUSTFLAGS]
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
    cmd = [str(toolchain.cargo), "build", "--release", "--target", TARGET, "--manifest-path", str(crate / "Cargo.toml")]
    done = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if done.returncode:
        raise BuildError(_explain(done.stderr, crate))


def _explain(stderr: str, crate: Path) -> str:
    """cargo's errors, each followed by the generated lines it points at."""
    lib = crate / "lib.rs"
    lines = lib.read_text().splitlines() if lib.is_file() else []
    out = [f"cargo failed building the generated crate at {crate} (kept for inspection):", stderr.strip()]
    for match in dict.fromkeys(re.findall(r"--> (?:.*/)?lib\.rs:(\d+):\d+", stderr)):
        line = int(match)
        snippet = "\n".join(f"{n:5} | {lines[n - 1]}" for n in range(max(1, line - 2), min(len(lines), line + 2) + 1))
        out.append(f"generated {lib}, line {line}:\n{snippet}")
    return "\n\n".join(out)


def performance_directives(kernel: Kernel) -> str:
    """PTX performance directives for the entry, from the spec (stock rustc has no launch-bounds attribute): the
    CTA shape, which the launcher enforces, so ptxas allocates registers for exactly that many threads. (Asking
    for more CTAs per SM with .minnctapersm made ptxas spill the unrolled loop and halved throughput on the H200.)"""
    x, y, z = kernel.block_dim
    return f".maxntid {x}, {y}, {z}"


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


def _ptxas(ptxas: Path, crate: Path, arch: str, ptx: str) -> bytes:
    source, cubin = crate / "kernel.ptx", crate / f"kernel.{arch}.cubin"
    source.write_text(ptx)
    with step(f"ptxas -arch={arch}"):
        done = subprocess.run(
            [str(ptxas), f"-arch={arch}", str(source), "-o", str(cubin)], capture_output=True, text=True
        )
    if done.returncode:
        raise BuildError(f"ptxas rejected the PTX of {crate}:\n{done.stderr.strip()}")
    return cubin.read_bytes()


def cached_entry(kernel: Kernel, arch: str | None = None) -> kcache.Entry:
    """The kernel's cache entry: built here when a toolchain exists, else a carried one found by source key."""
    arch = config.resolve_arch(arch)
    try:
        return _built_entry(kernel, arch)
    except ToolchainMissing as missing:
        key = kcache.resolve(source_key(kernel, arch))
        entry = kcache.read_entry(key) if key else None
        if entry is None:
            raise CacheError(
                f"{kernel.id} ({arch}) has no valid entry in the cache at {kcache.cache_dir()} and cannot be built "
                f"here: {missing} Build it where Rust is installed (python -m rust_kernels build) and carry the "
                "cache directory (RUST_KERNELS_CACHE_DIR)."
            ) from None
        return _with_cubin(key, entry, arch)
