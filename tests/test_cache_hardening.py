"""The cache under hostile conditions (issue 9, items 5, 6 and 11): corrupt meta.json, entries built without ptxas,
processes killed while staging, exports over corrupt entries, concurrent completions."""

import json
import multiprocessing
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

import rust_kernels
from rust_kernels import builder, toolchain
from rust_kernels import cache as kcache
from rust_kernels.builder import content_hash
from rust_kernels.errors import BuildError, CacheError
from rust_kernels.kernels import BatchNorm2dNchwBackward

PACKAGE_PARENT = Path(kcache.__file__).parents[1]
CUBIN = "kernel.sm_90.cubin"  # the default arch


def _meta(entry: Path) -> dict:
    return json.loads((entry / "meta.json").read_text())


# --- C: meta.json that is valid JSON but not a valid entry ----------------------------------------------------------


def _corrupt_metas(good: dict, key: str = "") -> dict[str, object]:
    lib_only = {"lib.rs": good["files"]["lib.rs"]}
    return {
        "null": None,
        "list": [good],
        "number": 42,
        "string": "kernel.ptx",
        "files-null": {**good, "files": None},
        "files-list": {**good, "files": list(good["files"])},
        "files-string": {**good, "files": "kernel.ptx"},
        "files-empty": {**good, "files": {}},
        "files-without-kernel.ptx": {**good, "files": lib_only},
        "gpu-entry-listing-the-host-library": {**good, "files": {**lib_only, kcache.HOST_LIBRARY: kcache.sha256(b"")}},
        # defects in meta.json alone (the files are intact): an entry must name only its own files and a source key
        "file-name-with-a-path": {**good, "files": {**good["files"], f"../{key}/lib.rs": good["files"]["lib.rs"]}},
        "no-source-key": {k: v for k, v in good.items() if k != "source_key"},
        "source-key-with-a-path": {**good, "source_key": "../../../x"},
    }


CASES = list(_corrupt_metas({"files": {"lib.rs": "", "kernel.ptx": ""}, "source_key": ""}))
GARBAGE_PTX_CASES = CASES[: CASES.index("gpu-entry-listing-the-host-library") + 1]


@pytest.mark.parametrize("case", CASES)
def test_meta_json_not_a_valid_entry_is_corrupt_and_rebuilt(case, fresh_cache):
    k = BatchNorm2dNchwBackward(block_hw=64, dtype="f64")
    entry = rust_kernels.build(k).parent
    good_meta, good_ptx = _meta(entry), (entry / "kernel.ptx").read_bytes()
    if case in GARBAGE_PTX_CASES:
        (entry / "kernel.ptx").write_text("garbage, never to be served")
        (entry / kcache.HOST_LIBRARY).write_bytes(b"")
    (entry / "meta.json").write_text(json.dumps(_corrupt_metas(good_meta, entry.name)[case]))
    assert kcache.read_entry(content_hash(k)) is None
    assert rust_kernels.build(k) == entry / "kernel.ptx"
    assert (entry / "kernel.ptx").read_bytes() == good_ptx
    assert _meta(entry) == good_meta
    assert kcache.read_entry(content_hash(k)) is not None


def test_garbage_kernel_ptx_is_not_served_under_an_empty_file_list(fresh_cache):
    k = BatchNorm2dNchwBackward(block_hw=64, dtype="f64")
    entry = rust_kernels.build(k).parent
    meta = {**_meta(entry), "files": {}}
    (entry / "meta.json").write_text(json.dumps(meta))
    (entry / "kernel.ptx").write_text("garbage")
    assert kcache.read_entry(content_hash(k)) is None
    assert ".visible .entry" in rust_kernels.build(k).read_text()


def test_keys_and_pointers_that_are_not_hashes_lead_nowhere(fresh_cache):
    """A by-source pointer (e.g. in a carried cache) naming a path is refused, even where a well-formed entry waits
    at the end of that path, outside kernels/."""
    outside = fresh_cache / "outside"
    outside.mkdir()
    (outside / "kernel.ptx").write_text("not from this cache")
    files = {"kernel.ptx": kcache.sha256(b"not from this cache")}
    (outside / "meta.json").write_text(
        json.dumps({"content_hash": "../outside", "files": files, "source_key": "1" * 64})
    )
    (fresh_cache / "by-source").mkdir()
    (fresh_cache / "by-source" / ("1" * 64)).write_text("../outside")
    assert kcache.resolve("1" * 64) is None
    assert kcache.read_entry("../outside") is None


# --- D: an entry built while ptxas was missing is completed when ptxas appears ------------------------------------


def _build_without_ptxas(k, monkeypatch) -> Path:
    with monkeypatch.context() as patch:
        patch.setattr(builder, "find_ptxas", lambda: None)
        ptx = rust_kernels.build(k)
    assert not (ptx.parent / CUBIN).exists()
    assert CUBIN not in _meta(ptx.parent)["files"]
    return ptx


def test_entry_built_without_ptxas_gets_its_cubin_when_ptxas_appears(fresh_cache, monkeypatch):
    assert toolchain.find_ptxas() is not None, "ptxas is part of the set-up (nvidia-cuda-nvcc)"
    k = BatchNorm2dNchwBackward(block_hw=128, dtype="f64")
    ptx = _build_without_ptxas(k, monkeypatch)
    ptx_mtime = ptx.stat().st_mtime_ns
    assert rust_kernels.build(k) == ptx
    assert (ptx.parent / CUBIN).read_bytes()[:4] == b"\x7fELF"
    entry = kcache.read_entry(content_hash(k))
    assert entry is not None and CUBIN in entry.meta["files"]
    assert ptx.stat().st_mtime_ns == ptx_mtime, "completed, not rebuilt"
    assert (ptx.parent / CUBIN).stat().st_mode & 0o777 == 0o644
    assert list((fresh_cache / "tmp").iterdir()) == []


def test_carried_entry_without_cubin_is_completed_where_ptxas_is(fresh_cache, monkeypatch):
    k = BatchNorm2dNchwBackward(block_hw=128, dtype="f32")
    ptx = _build_without_ptxas(k, monkeypatch)

    def no_toolchain():
        raise rust_kernels.ToolchainMissing("no rustc here")

    monkeypatch.setattr(builder, "find_toolchain", no_toolchain)
    entry = builder.cached_entry(k)
    assert entry.path == ptx.parent and CUBIN in entry.meta["files"]
    assert (ptx.parent / CUBIN).read_bytes()[:4] == b"\x7fELF"


def _build_in_child(block_hw: int) -> str:
    entry = rust_kernels.build(BatchNorm2dNchwBackward(block_hw=block_hw, dtype="f64")).parent
    return str(entry) if (entry / CUBIN).is_file() else "no cubin"


def test_concurrent_completions_leave_one_valid_entry(fresh_cache, monkeypatch):
    k = BatchNorm2dNchwBackward(block_hw=512, dtype="f64")
    ptx = _build_without_ptxas(k, monkeypatch)
    with multiprocessing.get_context("spawn").Pool(3) as pool:
        paths = pool.map(_build_in_child, [512, 512, 512])
    assert paths == [str(ptx.parent)] * 3
    entry = kcache.read_entry(content_hash(k))
    assert entry is not None and CUBIN in entry.meta["files"]
    assert [p.name for p in (fresh_cache / "kernels").iterdir()] == [entry.path.name]
    assert list((fresh_cache / "tmp").iterdir()) == []


def test_a_ptxas_that_rejects_the_ptx_is_an_error_and_leaves_the_entry(fresh_cache, monkeypatch, tmp_path):
    k = BatchNorm2dNchwBackward(block_hw=128, dtype="f32")
    ptx = _build_without_ptxas(k, monkeypatch)
    bad = tmp_path / "ptxas"
    bad.write_text("#!/bin/sh\necho 'ptxas fatal: stand-in' >&2\nexit 1\n")
    bad.chmod(0o755)
    monkeypatch.setenv("RUST_KERNELS_PTXAS", str(bad))
    with pytest.raises(BuildError, match="ptxas rejected the PTX"):
        rust_kernels.build(k)
    assert kcache.read_entry(content_hash(k)) is not None and not (ptx.parent / CUBIN).exists()
    assert list((fresh_cache / "tmp").iterdir()) == []


# --- E: staging directories of killed processes are removed --------------------------------------------------------


def _kill_while(code: str, cache: Path, marker: Path) -> None:
    """Runs `code` in a child process with the cache at `cache`, waits for it to create `marker`, then SIGKILLs it
    (and everything it started)."""
    env = {**os.environ, "RUST_KERNELS_CACHE_DIR": str(cache), "RUST_KERNELS_QUIET": "1"}
    env["PYTHONPATH"] = str(PACKAGE_PARENT)
    child = subprocess.Popen([sys.executable, "-c", textwrap.dedent(code)], env=env, start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while not marker.exists():
            assert child.poll() is None, "the child ended early"
            assert time.monotonic() < deadline, "the child never reached the marker"
            time.sleep(0.05)
    finally:
        os.killpg(child.pid, signal.SIGKILL)
        child.wait()


def _fake_rust_src(tmp_path: Path) -> Path:
    src = tmp_path / "library"
    for crate in ("core", "compiler-builtins/compiler-builtins"):
        (src / crate / "src").mkdir(parents=True)
        (src / crate / "Cargo.toml").write_text('[package]\nname = "x"\nedition = "2021"\n')
        (src / crate / "src" / "lib.rs").write_text("")
    return src


def _fake_toolchain(rustc: Path, src: Path) -> toolchain.Toolchain:
    return toolchain.Toolchain(rustc, Path("/bin/true"), Path("/bin"), src, "stand-in toolchain")


def test_sysroot_staging_of_a_killed_build_is_removed(monkeypatch, tmp_path):
    cache = tmp_path / "cache"
    monkeypatch.setenv("RUST_KERNELS_CACHE_DIR", str(cache))
    src, marker = _fake_rust_src(tmp_path), tmp_path / "rustc-started"
    slow = tmp_path / "slow-rustc"
    slow.write_text(f"#!/bin/sh\ntouch {marker}\nexec sleep 120\n")
    slow.chmod(0o755)
    _kill_while(
        f"""
        from pathlib import Path
        from rust_kernels import toolchain
        toolchain._ensure_sysroot(toolchain.Toolchain(
            Path({str(slow)!r}), Path("/bin/true"), Path("/bin"), Path({str(src)!r}), "stand-in toolchain"), "sm_90")
        """,
        cache,
        marker,
    )
    assert [p.name for p in (cache / "tmp").glob("sysroot-*") if p.is_dir()], "the kill left its staging directory"
    # the next sysroot build (failing here: a rustc that exits 1) removes it, and cleans up after itself
    failing = tmp_path / "failing-rustc"
    failing.write_text("#!/bin/sh\necho stand-in failure >&2\nexit 1\n")
    failing.chmod(0o755)
    with pytest.raises(BuildError, match="stand-in failure"):
        toolchain._ensure_sysroot(_fake_toolchain(failing, src), "sm_90")
    assert list((cache / "tmp").iterdir()) == []


def test_entry_staging_of_a_killed_build_is_removed(monkeypatch, tmp_path):
    cache = tmp_path / "cache"
    monkeypatch.setenv("RUST_KERNELS_CACHE_DIR", str(cache))
    marker = tmp_path / "staged"
    _kill_while(
        f"""
        import os, time
        from pathlib import Path
        from rust_kernels import cache
        def stuck(*args):  # killed between staging the entry and renaming it into place
            Path({str(marker)!r}).touch()
            time.sleep(120)
        os.replace = stuck
        cache.write_entry({"a" * 64!r}, {{"kernel.ptx": b"x"}}, {{"source_key": {"b" * 64!r}}})
        """,
        cache,
        marker,
    )
    assert list((cache / "tmp").glob("entry-*")), "the kill left its staging directory"
    with kcache.locked("c" * 64):
        kcache.write_entry("c" * 64, {"kernel.ptx": b"y"}, {"source_key": "d" * 64})
    assert list((cache / "tmp").iterdir()) == []
    assert kcache.read_entry("c" * 64) is not None
    assert not (cache / "kernels" / ("a" * 64)).exists()


def _hold_staging(cache: str, ready, release) -> None:
    os.environ["RUST_KERNELS_CACHE_DIR"] = cache
    with kcache.staging("entry-live-") as path:
        (path / "kernel.ptx").write_text("in progress")
        ready.set()
        release.wait(60)


def test_a_live_owners_staging_is_kept(monkeypatch, tmp_path):
    cache = tmp_path / "cache"
    monkeypatch.setenv("RUST_KERNELS_CACHE_DIR", str(cache))
    context = multiprocessing.get_context("spawn")
    ready, release = context.Event(), context.Event()
    child = context.Process(target=_hold_staging, args=(str(cache), ready, release))
    child.start()
    try:
        assert ready.wait(60)
        (live,) = [p for p in (cache / "tmp").glob("entry-live-*") if p.is_dir()]
        old = time.time() - 10 * kcache.STALE_UNLOCKED_S
        os.utime(live, (old, old))  # old, but its owner lives: kept
        with kcache.staging("other-"):
            pass
        assert (live / "kernel.ptx").read_text() == "in progress"
    finally:
        release.set()
        child.join(60)
    assert child.exitcode == 0
    assert list((cache / "tmp").iterdir()) == []


def test_old_staging_without_a_lock_file_is_removed_young_kept(monkeypatch, tmp_path):
    """Left by an older version (no lock file): removed once older than STALE_UNLOCKED_S, so a concurrent build by
    that version is never disturbed."""
    cache = tmp_path / "cache"
    monkeypatch.setenv("RUST_KERNELS_CACHE_DIR", str(cache))
    old, young = cache / "tmp" / "sysroot-old", cache / "tmp" / "sysroot-young"
    for path in (old, young):
        (path / "lib").mkdir(parents=True)
    when = time.time() - 2 * kcache.STALE_UNLOCKED_S
    os.utime(old, (when, when))
    with kcache.staging("x-"):
        pass
    assert not old.exists() and young.is_dir()


def test_staging_is_removed_when_its_work_fails(fresh_cache):
    with pytest.raises(RuntimeError), kcache.staging("entry-fail-") as path:
        (path / "half").write_text("written")
        raise RuntimeError("the work failed")
    assert list((fresh_cache / "tmp").iterdir()) == []


# --- E: build --export verifies or replaces what is at the target --------------------------------------------------


def _export_one(fresh_cache: Path, monkeypatch, block_hw: int = 256) -> tuple[kcache.Entry, Path]:
    k = BatchNorm2dNchwBackward(block_hw=block_hw)
    rust_kernels.build(k)
    entry = kcache.read_entry(content_hash(k))
    destination = fresh_cache / "exported"
    kcache.export([entry], destination)
    return entry, destination


def _exported_entry(destination: Path, entry: kcache.Entry, monkeypatch) -> kcache.Entry | None:
    monkeypatch.setenv("RUST_KERNELS_CACHE_DIR", str(destination))
    try:
        assert kcache.resolve(entry.meta["source_key"]) == entry.path.name
        return kcache.read_entry(entry.path.name)
    finally:
        monkeypatch.setenv("RUST_KERNELS_CACHE_DIR", str(entry.path.parents[1]))


def test_export_writes_verified_entries(fresh_cache, monkeypatch):
    entry, destination = _export_one(fresh_cache, monkeypatch)
    exported = _exported_entry(destination, entry, monkeypatch)
    assert exported is not None and exported.meta == entry.meta
    assert not (destination / "tmp").exists(), "no empty staging folder left in a carried cache"


@pytest.mark.parametrize("damage", ["truncated-ptx", "meta-null", "missing-cubin", "no-meta"])
def test_export_replaces_a_corrupt_entry_at_the_target(damage, fresh_cache, monkeypatch):
    entry, destination = _export_one(fresh_cache, monkeypatch)
    target = destination / "kernels" / entry.path.name
    if damage == "truncated-ptx":
        (target / "kernel.ptx").write_bytes((target / "kernel.ptx").read_bytes()[:100])
    elif damage == "meta-null":
        (target / "meta.json").write_text("null")
    elif damage == "missing-cubin":  # a valid entry lacking a file the exported one has
        (target / CUBIN).unlink()
        meta = _meta(target)
        del meta["files"][CUBIN]
        (target / "meta.json").write_text(json.dumps(meta))
    else:
        (target / "meta.json").unlink()
    assert _exported_entry(destination, entry, monkeypatch) is None or damage == "missing-cubin"
    kcache.export([entry], destination)
    exported = _exported_entry(destination, entry, monkeypatch)
    assert exported is not None and exported.meta == entry.meta
    assert (target / CUBIN).read_bytes() == entry.file(CUBIN).read_bytes()


def test_export_keeps_a_valid_entry_at_the_target(fresh_cache, monkeypatch):
    entry, destination = _export_one(fresh_cache, monkeypatch)
    target = destination / "kernels" / entry.path.name
    before = {p.name: p.stat().st_ino for p in target.iterdir()}
    kcache.export([entry], destination)
    assert {p.name: p.stat().st_ino for p in target.iterdir()} == before


def test_export_to_a_destination_that_cannot_be_written_fails_loudly(fresh_cache, monkeypatch):
    k = BatchNorm2dNchwBackward(block_hw=256)
    rust_kernels.build(k)
    entry = kcache.read_entry(content_hash(k))
    (fresh_cache / "file").write_text("x")
    with pytest.raises(CacheError, match=r"^exporting the cache to .*file/carried failed"):
        kcache.export([entry], fresh_cache / "file" / "carried")


def test_export_of_an_entry_corrupted_since_it_was_read_fails_loudly(fresh_cache, monkeypatch):
    k = BatchNorm2dNchwBackward(block_hw=256)
    rust_kernels.build(k)
    entry = kcache.read_entry(content_hash(k))
    entry.file("kernel.ptx").write_text("garbage")
    with pytest.raises(CacheError, match=r"no longer matches its meta\.json"):
        kcache.export([entry], fresh_cache / "carried")
    assert not (fresh_cache / "carried" / "kernels" / entry.path.name).exists()
    assert list((fresh_cache / "carried" / "tmp").glob("*")) == []


def test_cli_export_repairs_the_target_and_reports_errors(fresh_cache, monkeypatch, capsys):
    """`build --export` over a corrupt target: repaired; to an unwritable target: `error:` and exit status 2."""
    from rust_kernels import cli

    one = [BatchNorm2dNchwBackward(block_hw=256)]
    monkeypatch.setattr(cli, "instances", lambda: one)  # the catalogue is hundreds of builds
    destination = fresh_cache / "carried"
    assert cli.main(["build", "--export", str(destination)]) == 0
    assert "(1 instances x" in capsys.readouterr().out
    entry = kcache.read_entry(content_hash(one[0]))
    (destination / "kernels" / entry.path.name / "kernel.ptx").write_text("garbage")
    assert cli.main(["build", "--export", str(destination)]) == 0
    assert _exported_entry(destination, entry, monkeypatch) is not None
    (fresh_cache / "file").write_text("x")
    capsys.readouterr()
    assert cli.main(["build", "--export", str(fresh_cache / "file" / "carried")]) == 2
    assert capsys.readouterr().err.splitlines()[-1].startswith("error: exporting the cache to ")  # after progress
