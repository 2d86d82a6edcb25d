"""The content-addressed build cache.

Layout under the cache directory (RUST_KERNELS_CACHE_DIR, default ~/.cache/rust_kernels):
  kernels/<content hash>/   one entry: kernel.ptx, kernel.<arch>.cubin where ptxas was found, lib.rs, meta.json
  by-source/<source key>    the content hash last built for a toolchain-independent key, so a machine without Rust
                            (the GPU machine) can find a carried entry
  locks/, tmp/, build/, target/, sysroot/   build machinery
Entries are written to tmp/ and renamed into place (atomic); builds of one key are serialised by a file lock;
meta.json records each file's SHA-256, so a truncated or altered entry is detected and rebuilt.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path


def cache_dir() -> Path:
    configured = os.environ.get("RUST_KERNELS_CACHE_DIR")
    root = Path(configured).expanduser() if configured else Path.home() / ".cache" / "rust_kernels"
    root.mkdir(parents=True, exist_ok=True)
    return root


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@contextmanager
def locked(name: str) -> Iterator[None]:
    """Holds an exclusive lock named `name` across processes (flock; released if the process dies)."""
    locks = cache_dir() / "locks"
    locks.mkdir(exist_ok=True)
    with open(locks / f"{name}.lock", "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def scratch_dir(prefix: str) -> Path:
    """A fresh private directory on the cache's file system (so renames out of it are atomic)."""
    tmp = cache_dir() / "tmp"
    tmp.mkdir(exist_ok=True)
    return Path(tempfile.mkdtemp(prefix=prefix, dir=tmp))


def write_atomic(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)
    os.replace(tmp, path)


@dataclass(frozen=True)
class Entry:
    path: Path
    meta: dict

    def file(self, name: str) -> Path:
        return self.path / name


def read_entry(key: str, root: Path | None = None) -> Entry | None:
    """The verified entry for `key` (in the cache, or in the cache directory `root`), or None if it is absent or any
    of its files fails its recorded hash."""
    path = (root or cache_dir()) / "kernels" / key
    try:
        meta = json.loads((path / "meta.json").read_text())
        if meta.get("content_hash") != key:
            return None
        for name, digest in meta["files"].items():
            if sha256((path / name).read_bytes()) != digest:
                return None
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return Entry(path, meta)


def write_entry(key: str, files: dict[str, bytes], meta: dict) -> Entry:
    """Publishes an entry atomically, replacing a corrupt one. Call with the key's lock held."""
    staging = scratch_dir(f"entry-{key[:16]}-")
    staging.chmod(0o755)  # entries are shared; mkdtemp makes directories private
    for name, data in files.items():
        (staging / name).write_bytes(data)
    meta = {**meta, "content_hash": key, "files": {name: sha256(data) for name, data in files.items()}}
    (staging / "meta.json").write_text(json.dumps(meta, indent=2, sort_keys=True))
    final = cache_dir() / "kernels" / key
    final.parent.mkdir(exist_ok=True)
    if final.exists():  # corrupt (the caller found no valid entry under the lock): move it aside, then drop it
        trash = scratch_dir(f"corrupt-{key[:16]}-")
        os.replace(final, trash / "entry")
        shutil.rmtree(trash, ignore_errors=True)
    os.replace(staging, final)
    return Entry(final, meta)


def point(source_key: str, key: str) -> None:
    write_atomic(cache_dir() / "by-source" / source_key, key.encode())


def resolve(source_key: str, root: Path | None = None) -> str | None:
    try:
        return ((root or cache_dir()) / "by-source" / source_key).read_text().strip() or None
    except OSError:
        return None


def export(entries: list[Entry], destination: Path) -> None:
    """Copies entries (and their source-key pointers) into another cache directory, e.g. to carry to a GPU machine
    without Rust."""
    for entry in entries:
        target = destination / "kernels" / entry.path.name
        if not target.exists():
            shutil.copytree(entry.path, target)
        pointer = destination / "by-source" / entry.meta["source_key"]
        pointer.parent.mkdir(parents=True, exist_ok=True)
        pointer.write_text(entry.path.name)
