"""The content-addressed build cache.

Layout under the cache directory (RUST_KERNELS_CACHE_DIR, default ~/.cache/rust_kernels; see config.py):
  kernels/<content hash>/   one entry: kernel.ptx, kernel.<arch>.cubin where ptxas was found, lib.rs, meta.json
  by-source/<source key>    the content hash last built for a toolchain-independent key, so a machine without Rust
                            (the GPU machine) can find a carried entry
  tmp/<name>/, tmp/<name>.lock   staging directories, each with the lock file its owner holds while it lives
  locks/, build/, target/, sysroot/   build machinery
Entries are written to a staging directory and renamed into place (atomic); builds of one key are serialised by a
file lock; meta.json records each file's SHA-256, so a truncated or altered entry is detected and rebuilt. A
staging directory whose owner died (SIGKILL) is removed when the next one is created: flock locks die with their
process, so a free lock file means a dead owner.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import shutil
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path

from rust_kernels import config
from rust_kernels.errors import CacheError

# A staging directory without a lock file (left by an older version, or a removal that failed) is removed only
# after this long, so that a build by an older version sharing the cache is never disturbed.
STALE_UNLOCKED_S = 3600.0
_KEY = re.compile(r"[0-9a-f]{64}")
_FILE_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*")
HOST_LIBRARY = "kernel.host.so"  # what an entry for the host emulator (arch "host", builder.HOST) holds, not PTX


def cache_dir() -> Path:
    root = config.settings().cache_dir  # validated (created, writable) at the settings' first use
    try:
        root.mkdir(parents=True, exist_ok=True)  # again: it may have been removed since
    except OSError as err:
        raise CacheError(
            f"the cache directory {root} cannot be created ({err.strerror}); "
            "set RUST_KERNELS_CACHE_DIR to a writable directory"
        ) from None
    return root


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _is_key(value: object) -> bool:
    return isinstance(value, str) and _KEY.fullmatch(value) is not None


@contextmanager
def locked(name: str, root: Path | None = None) -> Iterator[None]:
    """Holds an exclusive lock named `name` across processes (flock; released if the process dies)."""
    locks = (root or cache_dir()) / "locks"
    locks.mkdir(parents=True, exist_ok=True)
    with open(locks / f"{name}.lock", "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


@contextmanager
def staging(prefix: str, root: Path | None = None) -> Iterator[Path]:
    """A fresh private directory under tmp/ of the cache (its file system, so renames out of it are atomic), removed
    on exit unless it was renamed into place. Its owner holds tmp/<name>.lock while it lives; creating one first
    removes those whose owner is gone."""
    tmp = (root or cache_dir()) / "tmp"
    tmp.mkdir(parents=True, exist_ok=True)
    with locked("staging", root):  # creation and sweeping exclude each other
        _sweep(tmp)
        path = Path(tempfile.mkdtemp(prefix=prefix, dir=tmp))
        lock = tmp / f"{path.name}.lock"
        try:
            owner = open(lock, "w")  # noqa: SIM115 (held until the directory is gone)
            fcntl.flock(owner, fcntl.LOCK_EX)
        except BaseException:
            shutil.rmtree(path, ignore_errors=True)
            raise
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)  # gone already when it was renamed into place
        lock.unlink(missing_ok=True)
        owner.close()


def _owner_gone(lock: Path) -> bool:
    """True if nobody holds `lock` (its owner died, or just finished)."""
    try:
        fd = os.open(lock, os.O_RDWR)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except OSError:  # held: the owner lives
        return False
    finally:
        os.close(fd)


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


def _sweep(tmp: Path) -> None:
    """Removes what dead owners left in tmp/: directories whose lock file is free, lock files without a directory
    whose lock is free, and anything without a lock file older than STALE_UNLOCKED_S. Call under the staging lock."""
    now = time.time()
    for item in list(tmp.iterdir()):
        try:
            if item.name.endswith(".lock"):
                owned = tmp / item.name[: -len(".lock")]
                if not owned.exists() and not owned.is_symlink() and _owner_gone(item):
                    item.unlink(missing_ok=True)
                continue
            lock = tmp / f"{item.name}.lock"
            if lock.exists():
                if _owner_gone(lock):
                    _remove(item)
                    lock.unlink(missing_ok=True)
            elif now - item.lstat().st_mtime > STALE_UNLOCKED_S:
                _remove(item)
        except FileNotFoundError:  # removed meanwhile by its owner
            continue


def write_atomic(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "wb") as handle:
            os.fchmod(handle.fileno(), 0o644)  # shared like the rest of the entry; mkstemp makes files private
            handle.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


@dataclass(frozen=True)
class Entry:
    path: Path
    meta: dict

    def file(self, name: str) -> Path:
        return self.path / name


def _verified(path: Path, key: str) -> Entry | None:
    """The entry at `path` if its meta.json is an object naming `key` and a source key, whose `files` maps plain
    file names to the SHA-256 of the files beside it, among them the file the entry is for: HOST_LIBRARY where its
    arch is "host", else kernel.ptx. Else None (corrupt)."""
    try:
        meta = json.loads((path / "meta.json").read_text())
        if not isinstance(meta, dict) or meta.get("content_hash") != key or not _is_key(meta.get("source_key")):
            return None
        files = meta.get("files")
        main = HOST_LIBRARY if meta.get("arch") == "host" else "kernel.ptx"
        if not isinstance(files, dict) or main not in files:
            return None
        for name, digest in files.items():
            if name == "meta.json" or not _FILE_NAME.fullmatch(name) or not isinstance(digest, str):
                return None
            if sha256((path / name).read_bytes()) != digest:
                return None
    except (OSError, ValueError):
        return None
    return Entry(path, meta)


def read_entry(key: str, root: Path | None = None) -> Entry | None:
    """The verified entry for `key` (in the cache, or in the cache directory `root`), or None if it is absent or
    corrupt (see _verified): the caller rebuilds it."""
    return _verified((root or cache_dir()) / "kernels" / key, key) if _is_key(key) else None


def _publish(staged: Path, final: Path, root: Path | None = None) -> None:
    """Renames a complete staged entry into place, moving a corrupt one there aside first. Call with the key's lock
    held (the caller found no valid entry, or one to replace, under it)."""
    final.parent.mkdir(parents=True, exist_ok=True)
    if final.exists() or final.is_symlink():
        with staging(f"corrupt-{final.name[:16]}-", root) as trash:  # dropped on exit
            os.replace(final, trash / "entry")
    os.replace(staged, final)


def write_entry(key: str, files: dict[str, bytes], meta: dict) -> Entry:
    """Publishes an entry atomically, replacing a corrupt one. Call with the key's lock held."""
    final = cache_dir() / "kernels" / key
    meta = {**meta, "content_hash": key, "files": {name: sha256(data) for name, data in files.items()}}
    with staging(f"entry-{key[:16]}-") as stage:
        stage.chmod(0o755)  # entries are shared; mkdtemp makes directories private
        for name, data in files.items():
            (stage / name).write_bytes(data)
        (stage / "meta.json").write_text(json.dumps(meta, indent=2, sort_keys=True))
        _publish(stage, final)
    return Entry(final, meta)


def add_files(entry: Entry, files: dict[str, bytes]) -> Entry:
    """Completes a published entry (e.g. with a cubin made later): each file is written atomically, then meta.json is
    replaced atomically to list them, which publishes them. Readers see the old entry or the new one, never a
    mix, and the entry is never absent. Call with the key's lock held."""
    for name, data in files.items():
        write_atomic(entry.path / name, data)
    meta = {**entry.meta, "files": {**entry.meta["files"], **{name: sha256(data) for name, data in files.items()}}}
    write_atomic(entry.path / "meta.json", json.dumps(meta, indent=2, sort_keys=True).encode())
    return Entry(entry.path, meta)


def point(source_key: str, key: str) -> None:
    write_atomic(cache_dir() / "by-source" / source_key, key.encode())


def resolve(source_key: str, root: Path | None = None) -> str | None:
    try:
        key = ((root or cache_dir()) / "by-source" / source_key).read_text().strip()
    except (OSError, ValueError):
        return None
    return key if _is_key(key) else None


def export(entries: list[Entry], destination: Path) -> None:
    """Copies entries (and their source-key pointers) into another cache directory, e.g. to carry to a GPU machine
    without Rust. An entry already there is kept only if it verifies and holds every file of the one exported;
    anything else is replaced atomically (copied into the destination's tmp/, verified, renamed into place).
    Raises CacheError when the destination cannot be written or a source entry no longer verifies."""
    destination = Path(destination).expanduser().absolute()
    try:
        for entry in entries:
            key = entry.path.name
            target = destination / "kernels" / key
            with locked(key, destination):
                there = _verified(target, key)
                if there is None or not entry.meta["files"].items() <= there.meta["files"].items():
                    with staging(f"export-{key[:16]}-", destination) as stage:
                        copy = stage / "entry"
                        copy.mkdir(mode=0o755)
                        for name in entry.meta["files"]:
                            shutil.copyfile(entry.path / name, copy / name)
                        (copy / "meta.json").write_text(json.dumps(entry.meta, indent=2, sort_keys=True))
                        if _verified(copy, key) is None:
                            raise CacheError(
                                f"{entry.path} no longer matches its meta.json: rebuild it (python -m rust_kernels "
                                "build) before exporting"
                            )
                        _publish(copy, target, destination)
            write_atomic(destination / "by-source" / entry.meta["source_key"], key.encode())
        with suppress(OSError):
            (destination / "tmp").rmdir()  # when empty: a carried cache (or the wheel's _prebuilt/) stays lean
    except OSError as err:
        raise CacheError(
            f"exporting the cache to {destination} failed: {err}; export to a writable directory"
        ) from None
