"""cuda_std's math library through a kernel: every function within its documented ulp bound against mpmath (40
digits), in the emulator here; the GPU run (examples/math/ulp.py --backend cuda) is recorded in docs/math.md."""

import importlib.util
from pathlib import Path

import numpy as np
import pytest

ULP = Path(__file__).resolve().parents[1] / "examples" / "math" / "ulp.py"


@pytest.fixture(scope="module")
def ulp():
    spec = importlib.util.spec_from_file_location("example_math_ulp", ULP)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("dtype", ["f32", "f64"])
def test_every_function_is_within_its_bound_in_the_emulator(ulp, dtype, capsys):
    assert ulp.main(["--n", "1024", "--dtype", dtype]) == 0, capsys.readouterr().out


def test_the_measure_fails_a_function_over_its_bound(ulp):
    x, y = ulp.inputs("exp", "f32", 64)
    wrong = (np.exp(x.astype(np.float64)) * (1 + 2.0**-21)).astype(np.float32)  # 2-8 ulp off
    err = ulp.ulps("exp", "f32", x, y, wrong)
    assert err.max() > ulp.BOUNDS["f32"]["exp"]
    assert ulp.ulps("exp", "f32", x, y, np.exp(x.astype(np.float64)).astype(np.float32)).max() <= 0.5


@pytest.mark.parametrize("dtype", ["f32", "f64"])
def test_the_math_kernel_builds_to_ptx_that_ptxas_accepts(dtype):
    """The device side of every function: PTX without calls out (no libm), the .approx instructions for FastMath on
    f32, assembled by ptxas into a cubin."""
    import rust_kernels

    kernel = rust_kernels.Program(ULP.parent).kernel("math_eval", dtype=dtype)
    ptx_path = rust_kernels.build(kernel)
    ptx = ptx_path.read_text()
    assert ".extern .func" not in ptx
    assert f"fma.rn.{dtype}" in ptx and f"div.rn.{dtype}" in ptx
    approx = ["ex2.approx.ftz.f32", "lg2.approx.ftz.f32", "tanh.approx.f32", "sin.approx.ftz.f32", "rcp.approx.ftz.f32"]
    assert all(insn in ptx for insn in approx) == (dtype == "f32")
    assert (ptx_path.parent / "kernel.sm_90.cubin").read_bytes()[:4] == b"\x7fELF"


def test_the_limits_check_catches_a_wrong_limit_and_a_lost_sign(ulp):
    # SPECIALS: -inf, inf, NaN, -0, 0
    assert ulp.limits_missed("exp_fast", "f32", np.array([0, np.inf, np.nan, 1, 1], np.float32)) == []
    missed = ulp.limits_missed("exp_fast", "f32", np.array([np.nan, np.inf, np.nan, 1, 1], np.float32))
    assert len(missed) == 1 and missed[0].startswith("exp_fast(-inf) = nan")
    assert len(ulp.limits_missed("sin", "f64", np.array([np.nan, np.nan, np.nan, 0.0, 0.0]))) == 1  # sin(-0) = +0
