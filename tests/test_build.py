import multiprocessing
import re
import subprocess
import time
from pathlib import Path

import pytest

import rust_kernels
from rust_kernels import builder
from rust_kernels import cache as kcache
from rust_kernels.builder import content_hash
from rust_kernels.errors import BuildError, ToolchainMissing
from rust_kernels.kernels import BatchNorm2dNchwBackward
from rust_kernels.toolchain import find_ptxas


@pytest.mark.parametrize("dtype", ["f32", "f64"])
def test_ptx_has_the_entry_with_12_params_and_ptxas_accepts_it(dtype, tmp_path):
    k = BatchNorm2dNchwBackward(block_hw=256, dtype=dtype)
    ptx = rust_kernels.build(k).read_text()
    match = re.search(r"\.visible \.entry batch_norm_2d_nchw_backward_entry_point\((.*?)\)", ptx, re.S)
    assert match, "no .visible .entry for the entry point"
    params = [p.strip() for p in match.group(1).split(",")]
    assert len(params) == 12
    assert all(".u64" in p for p in params[:8]) and all(".u32" in p for p in params[8:11])
    assert ".f32" in params[11]  # eps is a 4-byte float even in the f64 kernel
    assert ".extern .func" not in ptx
    assert ".target sm_90" in ptx
    ptxas = find_ptxas()
    assert ptxas is not None, "ptxas is part of the set-up (nvidia-cuda-nvcc)"
    (tmp_path / "k.ptx").write_text(ptx)
    done = subprocess.run([ptxas, "-arch=sm_90", tmp_path / "k.ptx", "-o", tmp_path / "k.cubin"], capture_output=True)
    assert done.returncode == 0, done.stderr.decode()
    assert (rust_kernels.build(k).parent / "kernel.sm_90.cubin").read_bytes()[:4] == b"\x7fELF"


def test_build_is_cached_by_content(fresh_cache):
    k = BatchNorm2dNchwBackward(block_hw=64)
    first = rust_kernels.build(k)
    assert first.parent.name == content_hash(k)
    mtime = first.stat().st_mtime_ns
    assert rust_kernels.build(k) == first and first.stat().st_mtime_ns == mtime  # no rebuild


def _build_in_child(block_hw: int) -> str:
    return str(rust_kernels.build(BatchNorm2dNchwBackward(block_hw=block_hw)))


def test_concurrent_builds_of_one_kernel_leave_one_valid_entry(fresh_cache):
    with multiprocessing.get_context("spawn").Pool(3) as pool:
        paths = pool.map(_build_in_child, [128, 128, 128])
    assert len(set(paths)) == 1
    entries = list((fresh_cache / "kernels").iterdir())
    assert len(entries) == 1
    key = entries[0].name
    assert kcache.read_entry(key) is not None
    assert not list((fresh_cache / "tmp").glob("entry-*")), "no staging directory left behind"


def test_parallel_builds_keep_the_order_each_worker_in_its_own_target_directory(fresh_cache):
    kernels = [BatchNorm2dNchwBackward(block_hw=b) for b in (64, 128, 256, 512)]
    finished = []
    entries = builder.cached_entries([(k, "host") for k in kernels], 2, lambda k, arch: finished.append((k, arch)))
    assert [e.meta["id"] for e in entries] == [k.id for k in kernels]
    assert sorted(finished, key=lambda done: kernels.index(done[0])) == [(k, "host") for k in kernels]
    assert any(p.name.endswith("-host-1") for p in (fresh_cache / "target").iterdir()), "the second worker's"
    assert [e.path for e in entries] == [builder.cached_entry(k, "host").path for k in kernels]


def test_a_failed_parallel_build_is_raised_and_stops_the_builds_not_started(monkeypatch):
    started = []

    def build(kernel, arch):
        started.append(kernel)
        time.sleep(0.02)
        if kernel == "broken":
            raise BuildError("broken: cargo failed")
        return kernel

    monkeypatch.setattr(builder, "cached_entry", build)
    with pytest.raises(BuildError, match="broken: cargo failed"):
        builder.cached_entries([("broken", "host")] + [(i, "host") for i in range(40)], 2)
    assert len(started) < 10


def test_truncated_entry_is_detected_and_rebuilt(fresh_cache):
    k = BatchNorm2dNchwBackward(block_hw=512)
    ptx = rust_kernels.build(k)
    good = ptx.read_bytes()
    ptx.write_bytes(good[: len(good) // 2])
    assert kcache.read_entry(content_hash(k)) is None
    rebuilt = rust_kernels.build(k)
    assert rebuilt.read_bytes() == good


def test_removed_meta_is_detected(fresh_cache):
    k = BatchNorm2dNchwBackward(block_hw=512)
    entry = rust_kernels.build(k).parent
    (entry / "meta.json").unlink()
    assert kcache.read_entry(content_hash(k)) is None
    assert rust_kernels.build(k).is_file()


def test_missing_toolchain_names_what_is_missing(monkeypatch, tmp_path):
    from rust_kernels import toolchain

    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("RUST_KERNELS_RUSTC", raising=False)  # a set one that is missing is a ConfigError
    monkeypatch.setattr(toolchain, "_probe", lambda rustc: f"{rustc}: stand-in without nvptx64")
    toolchain.find_toolchain.cache_clear()
    try:
        with pytest.raises(ToolchainMissing, match="apt-get install -y rustc-web rust-web-src"):
            toolchain.find_toolchain()
    finally:
        toolchain.find_toolchain.cache_clear()


def test_rustc_errors_point_at_the_generated_line(fresh_cache, monkeypatch):
    k = BatchNorm2dNchwBackward(block_hw=32)
    broken = k.kernel_source.replace("let mut sum_dy = D::Acc::ZERO;", "let mut sum_dy = undefined_name;")
    monkeypatch.setattr(type(k), "kernel_source", property(lambda self: broken))
    with pytest.raises(BuildError) as info:
        rust_kernels.build(k)
    message = str(info.value)
    assert "undefined_name" in message
    line = int(re.search(r"generated .*lib\.rs, line (\d+):", message).group(1))
    assert f"{line:5} |     let mut sum_dy = undefined_name;" in message
    assert not list((fresh_cache / "kernels").glob("*")), "a failed build publishes nothing"


def test_carried_cache_is_usable_without_rust(fresh_cache, monkeypatch):
    from rust_kernels import builder

    k = BatchNorm2dNchwBackward(block_hw=256)
    built = rust_kernels.build(k).parent

    def no_toolchain():
        raise ToolchainMissing("no rustc here")

    monkeypatch.setattr(builder, "find_toolchain", no_toolchain)
    assert builder.cached_entry(k).path == built
    with pytest.raises(rust_kernels.CacheError, match="carry the cache"):
        builder.cached_entry(BatchNorm2dNchwBackward(block_hw=1024, dtype="f64"))
    assert isinstance(Path(built), Path)
