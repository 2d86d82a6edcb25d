"""The package's settings: every RUST_KERNELS_* environment variable is read here and nowhere else.

| variable | meaning (default) |
|---|---|
| `RUST_KERNELS_CACHE_DIR` | the build cache; created if absent, must be writable (`~/.cache/rust_kernels`) |
| `RUST_KERNELS_ARCH` | arch built when no `arch` is passed: `sm_NN` or `sm_NNa`, e.g. `sm_90a`, `sm_100` (`sm_90`) |
| `RUST_KERNELS_RUSTC` | the rustc to build with; no fallback to another when set (`rustc` on PATH, `/usr/bin/rustc`) |
| `RUST_KERNELS_CARGO` | the cargo to build with (cargo beside rustc, then on PATH) |
| `RUST_KERNELS_LLVM_BIN` | directory of `llvm-link`, `opt`, `llc` of rustc's LLVM version (`/usr/lib/llvm-N/bin`) |
| `RUST_KERNELS_PTXAS` | the ptxas that validates PTX and makes cubins; no fallback when set (PATH, CUDA, nvcc wheel) |
| `RUST_KERNELS_QUIET` | `1` silences the progress lines on stderr (`0`) |
| `RUST_KERNELS_TUNING` | the autotuner (tuning.py): `off`, `on` or `force` (`on`) |
| `RUST_KERNELS_PERSISTENT` | `0`: the autotuner and the rule leave out the persistent and cooperative kernels (`1`) |
| `RUST_KERNELS_BLOCK` | `0`: the autotuner and the rule leave out the NCHW training block kernels (`1`) |

TUNING `off` runs the families' rules; `on` measured plans (the tuning cache's and shipped tables' timings, missing
candidates timed on first use); `force` times every candidate afresh once per process.
PERSISTENT `0` is for comparing plans with and without those kernels (timed like any other candidate; the shipped
H200 table holds their timings). BLOCK `0` likewise for the block kernels: on an H100 they made the training
rule's forward + backward 1.01-2.14x (bf16) and 1.07-1.25x (f32) faster on the suite shapes timed
(docs/results/h100-2026-12-06-block/). The shipped H200 table has not timed them: on the keys it serves they are left
out (tuning.newer_than_table), elsewhere timed with the other candidates.
RUSTC, CARGO and PTXAS take a path to an executable or a command name looked up on PATH.
An empty variable counts as unset. A bad value raises ConfigError naming the variable and what to fix, at the first
use of the settings, before any work. (ptx_linker.py runs as rustc's linker in a separate process and reads
RUST_KERNELS_LLVM_BIN itself: the build sets it there to the LLVM directory of the toolchain it found.)

Other modules call `settings()` (a frozen Settings) and `resolve_arch(arch)` (an `arch` argument, validated, or the
configured default). `settings()` re-reads the variables on each call (cheap) and validates each distinct set of
values once, so a change of the environment (monkeypatch.setenv in a test) takes effect at the next call;
`reload()` forgets the validations, e.g. after a tool was installed at a configured path.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from rust_kernels.errors import ArgumentError, ArgumentTypeError, ConfigError

VARIABLES = (
    "RUST_KERNELS_CACHE_DIR",
    "RUST_KERNELS_ARCH",
    "RUST_KERNELS_RUSTC",
    "RUST_KERNELS_CARGO",
    "RUST_KERNELS_LLVM_BIN",
    "RUST_KERNELS_PTXAS",
    "RUST_KERNELS_QUIET",
    "RUST_KERNELS_TUNING",
    "RUST_KERNELS_PERSISTENT",
    "RUST_KERNELS_BLOCK",
)
TUNING_MODES = ("off", "on", "force")
DEFAULT_ARCH = "sm_90"
ARCH_FORMAT = "sm_NN or sm_NNa (e.g. sm_90, sm_90a, sm_100)"
_ARCH = re.compile(r"sm_[0-9]{2,3}a?")  # ASCII digits only; used with fullmatch (no trailing newline)
LLVM_TOOLS = ("llvm-link", "opt", "llc")


@dataclass(frozen=True)
class Settings:
    cache_dir: Path  # exists and is writable
    arch: str  # the default arch, validated
    rustc: Path | None  # None: search PATH and /usr/bin
    cargo: Path | None
    llvm_bin: Path | None
    ptxas: Path | None
    quiet: bool
    tuning: str  # one of TUNING_MODES
    persistent: bool  # the persistent and cooperative channels_last kernels among the candidates (and in the rule)
    block: bool  # the NCHW block kernels among the candidates and in the rule


def settings() -> Settings:
    """The validated settings for the current environment (raises ConfigError naming a bad variable)."""
    return _load(tuple(os.environ.get(name, "") for name in VARIABLES), os.environ.get("HOME", ""))


def reload() -> None:
    """Forgets every validated set of settings: the next settings() validates the environment again."""
    _load.cache_clear()


def is_arch(value: object) -> bool:
    return isinstance(value, str) and _ARCH.fullmatch(value) is not None


def resolve_arch(arch: str | None = None) -> str:
    """The arch to build for: `arch` if given, validated (it becomes part of cache paths), else RUST_KERNELS_ARCH or
    sm_90. The one check behind every public entry (build, content_hash, cached_entry, the CLI's --arch)."""
    if arch is None:
        return settings().arch
    if not isinstance(arch, str):
        raise ArgumentTypeError(f"arch: expected a string, {ARCH_FORMAT}, got {type(arch).__name__}")
    if not is_arch(arch):
        raise ArgumentError(f"arch: expected {ARCH_FORMAT}, got {arch!r}")
    return arch


@lru_cache(maxsize=16)
def _load(values: tuple[str, ...], home: str) -> Settings:
    env = dict(zip(VARIABLES, values, strict=True))
    arch = env["RUST_KERNELS_ARCH"] or DEFAULT_ARCH
    if not is_arch(arch):
        raise ConfigError(f"RUST_KERNELS_ARCH={arch!r}: expected {ARCH_FORMAT}; fix or unset it")
    tuning = env["RUST_KERNELS_TUNING"] or "on"
    if tuning not in TUNING_MODES:
        raise ConfigError(f"RUST_KERNELS_TUNING={tuning!r}: expected one of {', '.join(TUNING_MODES)}; fix or unset it")
    return Settings(
        cache_dir=_cache_dir(env["RUST_KERNELS_CACHE_DIR"]),
        arch=arch,
        rustc=_executable("RUST_KERNELS_RUSTC", env["RUST_KERNELS_RUSTC"], "rustc"),
        cargo=_executable("RUST_KERNELS_CARGO", env["RUST_KERNELS_CARGO"], "cargo"),
        llvm_bin=_llvm_bin(env["RUST_KERNELS_LLVM_BIN"]),
        ptxas=_executable("RUST_KERNELS_PTXAS", env["RUST_KERNELS_PTXAS"], "ptxas"),
        quiet=_switch(env, "RUST_KERNELS_QUIET", "quiet", False),
        tuning=tuning,
        persistent=_switch(env, "RUST_KERNELS_PERSISTENT", "on", True),
        block=_switch(env, "RUST_KERNELS_BLOCK", "on", True),
    )


def _switch(env: dict[str, str], name: str, meaning: str, default: bool) -> bool:
    """A variable that is 1 (`meaning`) or 0, `default` where unset."""
    value = env[name]
    if value not in ("", "0", "1"):
        raise ConfigError(f"{name}={value!r}: expected 1 ({meaning}) or 0; fix or unset it")
    return default if value == "" else value == "1"


def _cache_dir(value: str) -> Path:
    name = "RUST_KERNELS_CACHE_DIR"
    shown = f"{name}={value!r}" if value else f"{name} (unset: default ~/.cache/rust_kernels)"
    root = Path(value).expanduser() if value else Path.home() / ".cache" / "rust_kernels"
    fix = f"set {name} to a writable directory"
    try:
        root.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        raise ConfigError(f"{shown}: {root} exists and is not a directory; {fix}") from None
    except OSError as err:
        raise ConfigError(f"{shown}: cannot create {root} ({err.strerror}); {fix}") from None
    try:
        with tempfile.TemporaryFile(dir=root):
            pass
    except OSError as err:
        raise ConfigError(f"{shown}: cannot write in {root} ({err.strerror}); {fix}") from None
    return root.absolute()


def _executable(name: str, value: str, what: str) -> Path | None:
    if not value:
        return None
    path = Path(value).expanduser()
    fix = f"point {name} at a {what} executable or unset it"
    if os.sep not in value:  # a bare command name: looked up on PATH
        found = shutil.which(value)
        if found is None:
            raise ConfigError(f"{name}={value!r}: not found on PATH; {fix}")
        return Path(found)
    if not path.exists():
        raise ConfigError(f"{name}={value!r}: no such file; {fix}")
    if not path.is_file() or not os.access(path, os.X_OK):
        raise ConfigError(f"{name}={value!r}: not an executable file; {fix}")
    return path.absolute()


def _llvm_bin(value: str) -> Path | None:
    if not value:
        return None
    name, directory = "RUST_KERNELS_LLVM_BIN", Path(value).expanduser()
    fix = f"point {name} at the directory holding LLVM's {', '.join(LLVM_TOOLS)} (of rustc's LLVM version) or unset it"
    if not directory.is_dir():
        raise ConfigError(f"{name}={value!r}: not a directory; {fix}")
    missing = [t for t in LLVM_TOOLS if not (directory / t).is_file() or not os.access(directory / t, os.X_OK)]
    if missing:
        raise ConfigError(f"{name}={value!r}: lacks {', '.join(missing)}; {fix}")
    return directory.absolute()
