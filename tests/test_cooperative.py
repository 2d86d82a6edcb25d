"""Cooperative launches (a spec's `cooperative = true`): every CTA of the grid resident at once, so `grid::sync` may
wait for all of them (tests/kernels/grid_share). In the emulator everywhere; on a GPU where one is present."""

from pathlib import Path

import numpy as np
import pytest

import rust_kernels
from rust_kernels import ArgumentError, LaunchError, SpecError

PROGRAM = rust_kernels.Program(Path(__file__).parent / "kernels")
DTYPES = {"f32": np.float32, "f64": np.float64}
N, CTAS, SYNCS = 1000, 5, 3


def arrays(dtype: str) -> dict[str, np.ndarray]:
    x = np.random.default_rng(7).random(N) + 0.5
    return {
        "x": x.astype(DTYPES[dtype]),
        "y": np.zeros(N, DTYPES[dtype]),
        "partial": np.full(CTAS, np.nan, DTYPES[dtype]),
        "sum": np.zeros(1, DTYPES[dtype]),
        "state": np.zeros(1, np.uint32),
    }


def launch_twice(fn, data: dict, to_numpy=np.asarray) -> list[list[int]]:
    """The barrier word after each of two launches (the same word serves the next launch)."""
    args = [data["x"], data["y"], data["partial"], data["sum"], data["state"], N]
    states = []
    for _ in range(2):
        fn.launch(CTAS, 64, args)
        states.append(to_numpy(data["state"]).tolist())
    return states


def expect(data: dict, dtype: str, states: list[list[int]], to_numpy=np.asarray) -> None:
    x, y = to_numpy(data["x"]).astype(np.float64), to_numpy(data["y"])
    tight = dtype == "f64"
    np.testing.assert_allclose(y, x / x.sum(), rtol=1e-12 if tight else 1e-5)
    assert abs(float(to_numpy(data["sum"])[0]) - 1) < (1e-12 if tight else 1e-5)
    # each grid::sync flips the word's top bit and leaves its low bits at zero: SYNCS (odd) flips a launch
    assert states == [[1 << 31], [0]]


@pytest.mark.parametrize("dtype", list(DTYPES))
def test_grid_sync_in_the_emulator(dtype):
    kernel = PROGRAM.kernel("grid_share", dtype=dtype)
    assert kernel.spec.cooperative
    data = arrays(dtype)
    states = launch_twice(rust_kernels.compile(kernel, target="host").get_kernel(), data)
    expect(data, dtype, states)


def test_the_emulator_refuses_a_grid_it_cannot_run_at_once():
    data = arrays("f32")
    fn = rust_kernels.compile(PROGRAM.kernel("grid_share", dtype="f32"), target="host").get_kernel()
    with pytest.raises(LaunchError, match=r"a cooperative launch of grid \(257,1,1\) and block \(64,1,1\) has 16448"):
        fn.launch(257, 64, [data["x"], data["y"], data["partial"], data["sum"], data["state"], N])


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("cooperative = 1", "cooperative must be true or false, got 1"),
        ("cooperativ = true", r"unknown fields \['cooperativ'\]"),
    ],
)
def test_spec_fields_are_checked(tmp_path, line, message):
    spec = (Path(__file__).parent / "kernels" / "grid_share.toml").read_text()
    (tmp_path / "grid_share.toml").write_text(spec.replace("cooperative = true", line))
    (tmp_path / "grid_share.rs.j2").write_text("")
    with pytest.raises(SpecError, match=message):
        rust_kernels.Program(tmp_path)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", list(DTYPES))
def test_grid_sync_on_the_gpu(dtype):
    torch = pytest.importorskip("torch")
    fn = rust_kernels.compile(PROGRAM.kernel("grid_share", dtype=dtype), arch="sm_90").get_kernel()

    data = {name: torch.from_numpy(a).cuda() for name, a in arrays(dtype).items()}
    states = launch_twice(fn, data, lambda t: t.cpu().numpy())
    expect(data, dtype, states, lambda t: t.cpu().numpy())
    with pytest.raises(ArgumentError, match=r"grid: grid_share__.* is cooperative"):
        fn.launch(1 << 20, 64, [data["x"], data["y"], data["partial"], data["sum"], data["state"], N])
