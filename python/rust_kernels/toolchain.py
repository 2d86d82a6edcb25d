"""Finding a stock Rust toolchain that can build nvptx64 PTX, and the CUDA tools beside it.

Two kinds work: a rustup toolchain with the nvptx64-nvidia-cuda target installed, or a rustc that ships its library
source (Debian 12: rustc-web + rust-web-src), for which the target's `core` and `compiler_builtins` are built once
per toolchain and arch into the cache. Both need LLVM's llvm-link, opt and llc of rustc's LLVM major version (the
target's bitcode linker, see ptx_linker.py).
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import tomllib
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from rust_kernels import cache as kcache
from rust_kernels import config
from rust_kernels.errors import BuildError, ToolchainMissing
from rust_kernels.progress import say, step

TARGET = "nvptx64-nvidia-cuda"
LLVM_TOOLS = config.LLVM_TOOLS
INSTALL_HINT = (
    "Install one with: apt-get install -y rustc-web rust-web-src cargo-web llvm-22   (Debian 12), "
    "or: rustup target add nvptx64-nvidia-cuda plus LLVM's llvm-link/opt/llc of rustc's LLVM version. "
    "Point RUST_KERNELS_RUSTC (and RUST_KERNELS_LLVM_BIN) at a specific one."
)


@dataclass(frozen=True)
class Toolchain:
    rustc: Path
    cargo: Path
    llvm_bin: Path
    rust_src: Path | None  # library source, when the target's core must be built here
    identity: str  # `rustc -vV` and the LLVM tools' version: part of the cache key

    @property
    def key(self) -> str:
        return kcache.sha256(self.identity.encode())[:16]

    def sysroot(self, arch: str) -> Path | None:
        """The --sysroot holding the target's core for `arch`, built once; None when rustc has the target."""
        return None if self.rust_src is None else _ensure_sysroot(self, arch)


def _output(*cmd: str | Path) -> str:
    return subprocess.run([str(c) for c in cmd], capture_output=True, text=True, check=True).stdout


def _llvm_bin(rustc_sysroot: Path, llvm_major: str) -> Path | None:
    configured = config.settings().llvm_bin  # validated: holds the tools; used alone when set
    if configured is not None:
        return configured
    host = next(iter(rustc_sysroot.glob("lib/rustlib/*/bin")), None)  # rustup's llvm-tools component
    candidates = [f"/usr/lib/llvm-{llvm_major}/bin", host]
    for candidate in filter(None, candidates):
        directory = Path(candidate)
        if all((directory / t).is_file() for t in LLVM_TOOLS):
            return directory
    return None


def _probe(rustc: Path) -> Toolchain | str:
    """A toolchain built around `rustc`, or the reason it cannot build PTX."""
    try:
        version = _output(rustc, "-vV")
        sysroot = Path(_output(rustc, "--print", "sysroot").strip())
    except (OSError, subprocess.CalledProcessError) as err:
        return f"{rustc}: does not run ({err})"
    has_target = any((sysroot / "lib" / "rustlib" / TARGET / "lib").glob("libcore-*.rlib"))
    rust_src = sysroot / "lib" / "rustlib" / "src" / "rust" / "library"
    if not has_target and not (rust_src / "core" / "src" / "lib.rs").is_file():
        return f"{rustc}: has neither the {TARGET} target nor its library source (rust-src)"
    match = re.search(r"^LLVM version: (\d+)", version, re.M)
    llvm_major = match.group(1) if match else "?"
    llvm_bin = _llvm_bin(sysroot, llvm_major)
    if llvm_bin is None:
        return f"{rustc}: LLVM {llvm_major}'s llvm-link, opt and llc not found (e.g. apt-get install llvm-{llvm_major})"
    cargo_next_to_rustc = rustc.parent / "cargo"
    cargo = config.settings().cargo or (
        str(cargo_next_to_rustc) if cargo_next_to_rustc.is_file() else shutil.which("cargo")
    )
    if not cargo:
        return f"{rustc}: no cargo beside it or on PATH"
    llc_version = _output(llvm_bin / "llc", "--version").splitlines()
    identity = version + "\n".join(line.strip() for line in llc_version[:3])
    return Toolchain(rustc, Path(cargo), llvm_bin, None if has_target else rust_src, identity)


@cache
def find_toolchain() -> Toolchain:
    """The first usable toolchain: $RUST_KERNELS_RUSTC alone when set (no fallback), else rustc on PATH, then
    /usr/bin/rustc (Debian's)."""
    configured = config.settings().rustc
    if configured is not None:
        found = _probe(configured)
        if isinstance(found, Toolchain):
            return found
        raise ToolchainMissing(
            f"RUST_KERNELS_RUSTC={str(configured)!r} cannot build {TARGET} PTX ({found}). {INSTALL_HINT}"
        )
    candidates = [shutil.which("rustc"), "/usr/bin/rustc"]
    reasons = []
    for candidate in dict.fromkeys(filter(None, candidates)):
        if not Path(candidate).is_file():
            reasons.append(f"{candidate}: not found")
            continue
        found = _probe(Path(candidate))
        if isinstance(found, Toolchain):
            return found
        reasons.append(found)
    raise ToolchainMissing(
        f"No Rust toolchain that can build {TARGET} PTX was found ({'; '.join(reasons) or 'no rustc'}). " + INSTALL_HINT
    )


def _edition(crate_dir: Path) -> str:
    return tomllib.loads((crate_dir / "Cargo.toml").read_text())["package"].get("edition", "2015")


def _ensure_sysroot(toolchain: Toolchain, arch: str) -> Path:
    root = kcache.cache_dir() / "sysroot" / f"{toolchain.key}-{arch}"
    libdir = Path("lib", "rustlib", TARGET, "lib")
    crates = [
        ("core", toolchain.rust_src / "core", []),
        (
            "compiler_builtins",
            toolchain.rust_src / "compiler-builtins" / "compiler-builtins",
            ["--cfg", 'feature="compiler-builtins"'],
        ),
    ]
    done = root / "complete"
    if done.is_file():
        return root
    with kcache.locked(f"sysroot-{toolchain.key}-{arch}"):
        if done.is_file():
            return root
        with kcache.staging("sysroot-") as staging:  # removed if this fails; swept if this process is killed
            (staging / libdir).mkdir(parents=True)
            env = {**os.environ, "RUSTC_BOOTSTRAP": "1"}
            for name, crate_dir, extra in crates:
                say(f"building {name} for {TARGET} ({arch}), once per toolchain ...")
                with step(f"built {name} for {TARGET} ({arch})"):
                    cmd = [
                        str(toolchain.rustc), "--edition", _edition(crate_dir), "--crate-type", "rlib",
                        "--crate-name", name, "-O", "-C", "panic=abort", "--target", TARGET, "-C",
                        f"target-cpu={arch}", "--sysroot", str(staging), *extra, str(crate_dir / "src" / "lib.rs"),
                        "-o", str(staging / libdir / f"lib{name}.rlib"),
                    ]  # fmt: skip
                    done_run = subprocess.run(cmd, capture_output=True, text=True, env=env)
                    if done_run.returncode:
                        raise BuildError(f"building {name} for {TARGET} failed:\n{done_run.stderr[-4000:]}")
            (staging / "complete").write_text(toolchain.identity)
            if root.exists():  # an incomplete earlier attempt
                shutil.rmtree(root)
            root.parent.mkdir(exist_ok=True)
            os.replace(staging, root)
    return root


def find_ptxas() -> Path | None:
    """ptxas from $RUST_KERNELS_PTXAS (alone when set: validated by config), else PATH, /usr/local/cuda, or the
    nvidia-cuda-nvcc wheel."""
    configured = config.settings().ptxas
    if configured is not None:
        return configured
    candidates = [shutil.which("ptxas"), "/usr/local/cuda/bin/ptxas"]
    spec = importlib.util.find_spec("nvidia")
    for location in (spec.submodule_search_locations or []) if spec else []:
        candidates += sorted(str(p) for p in Path(location).glob("*/bin/ptxas"))
    for candidate in filter(None, candidates):
        if Path(candidate).is_file() and os.access(candidate, os.X_OK):
            return Path(candidate)
    return None


PTXAS_HINT = "pip install nvidia-cuda-nvcc==13.0.88 (or set RUST_KERNELS_PTXAS)"
