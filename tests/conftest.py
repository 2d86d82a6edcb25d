from __future__ import annotations

import os
from pathlib import Path

import pytest

from rust_kernels import cache as kcache


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """GPU tests skip cleanly, with the reason, where no CUDA device can be used."""
    if not any("gpu" in item.keywords for item in items):
        return
    from rust_kernels.driver import gpu_available

    ok, why = gpu_available()
    if not ok:
        skip = pytest.mark.skip(reason=f"gpu test not run: {why}")
        for item in items:
            if "gpu" in item.keywords:
                item.add_marker(skip)


@pytest.fixture
def fresh_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty kernel cache that reuses the toolchain-keyed parts (target core, cargo target dir) of the usual one,
    so a test pays for building its kernel, not for building `core` again."""
    shared = kcache.cache_dir()
    for part in ("sysroot", "target"):
        (shared / part).mkdir(exist_ok=True)
        os.symlink(shared / part, tmp_path / part)
    monkeypatch.setenv("RUST_KERNELS_CACHE_DIR", str(tmp_path))
    return tmp_path
