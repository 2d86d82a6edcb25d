from __future__ import annotations

import os
from pathlib import Path

import pytest

from rust_kernels import cache as kcache

# Property tests (test_properties.py): "ci", the default, draws a fixed (derandomized) set of examples on the host
# emulator, so CI is repeatable and bounded; "gpu" (HYPOTHESIS_PROFILE=gpu) draws many fresh ones on the GPU, and a
# failure prints the seed to reproduce it with (pytest --hypothesis-seed=N) and the shrunk case.
try:
    from hypothesis import HealthCheck, settings
except ImportError:  # a machine without it (the GPU machine, offline) runs everything else
    collect_ignore = ["test_properties.py"]
else:
    _SLOW = [HealthCheck.too_slow, HealthCheck.data_too_large]
    settings.register_profile("ci", max_examples=200, deadline=None, derandomize=True, database=None,
                              suppress_health_check=_SLOW, print_blob=True)  # fmt: skip
    settings.register_profile("gpu", max_examples=2000, deadline=None, database=None,
                              suppress_health_check=_SLOW, print_blob=True)  # fmt: skip
    settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


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


@pytest.fixture(autouse=True)
def _rules_not_tuning(monkeypatch: pytest.MonkeyPatch) -> None:
    """Plans are the families' rules in tests (the autotuner's choice depends on the GPU's timings); test_tuning
    turns it on where it tests it."""
    monkeypatch.setenv("RUST_KERNELS_TUNING", "off")
