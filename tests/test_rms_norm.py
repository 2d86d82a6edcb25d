"""The RMSNorm forward family, added end to end without touching a generic module: its spec and template
(codegen/rms_norm), its op, plans and verification (rust_kernels.families.rms_norm) and its benchmark
(rust_kernels.bench.baselines.rms_norm). Everything here runs in the host emulator."""

from __future__ import annotations

import io
import itertools

import numpy as np
import pytest

import rust_kernels
from rust_kernels import check, fuzz, kernels, ops, registry, runtime
from rust_kernels.dtypes import DTYPES
from rust_kernels.families.rms_norm import forward

NAME = "rms_norm_forward"
FAMILY = registry.family(NAME)
FUZZ_SEED, FUZZ_CASES = 1, 60


def data(shape: tuple[int, int], key: str = "f32") -> tuple[np.ndarray, np.ndarray]:
    inputs = FAMILY.inputs(shape, key)
    return inputs["x"], inputs["weight"]


@pytest.fixture
def no_launch(monkeypatch: pytest.MonkeyPatch) -> None:
    """Any attempt to load (and so launch) a kernel fails the test."""

    def refuse(*args: object) -> None:
        raise AssertionError("a kernel was loaded: the arguments were not checked before the launch")

    monkeypatch.setattr(runtime, "_loaded", refuse)


def test_the_family_its_op_kernel_and_benchmark_are_registered():
    assert NAME in [f.name for f in registry.families()]
    assert NAME in dir(ops) and ops.rms_norm_forward is registry.op(NAME)
    assert "RmsNormForward" in kernels.CATALOGUE
    from rust_kernels.bench import baselines

    baseline = baselines.baseline(NAME)
    assert baseline.dtypes == FAMILY.dtypes == ("f32", "f64", "bf16", "f16", "bf16-f32", "f16-f32")
    # read x, write y, read weight
    assert baseline.moved_bytes((4096, 1024), "bf16-f32") == 2 * 4096 * 1024 * 2 + 1024 * 4


def test_check_passes_every_case_on_the_host():
    out = io.StringIO()
    results = check.run("host", [FAMILY], out=out)
    assert results and all(r.passed for r in results), out.getvalue()
    assert {r.dtype for r in results} == set(FAMILY.dtypes)
    assert {r.shape for r in results} == set(FAMILY.suites["host"])
    # `where` keeps the plans it accepts: here one dtype's.
    bf16 = check.run("host", [FAMILY], out=io.StringIO(), where=lambda plan: plan.kernel.dtype_key == "bf16")
    assert bf16 and [r for r in results if r.dtype == "bf16"] == bf16


def test_fuzz_has_no_failures_and_transposed_x_is_refused():
    assert fuzz.fuzz([FAMILY], "host", FUZZ_CASES, FUZZ_SEED) == (FUZZ_CASES, 0)
    # The seed's cases include transposed views that are not C-contiguous (a transposed view with a dimension of 0
    # or 1 is, and is read as it must be): each was refused by the launch's contiguity check, naming x.
    refused = 0
    for case in itertools.islice(fuzz.draws([FAMILY], "host", FUZZ_SEED), FUZZ_CASES):
        x = check.placed(FAMILY.inputs(case.shape, case.dtype, case.seed)["x"], "host", case.offset, case.layout.order)
        if not case.layout.accepted and not x.flags.c_contiguous:
            result, why = fuzz.run_case(case, "host")
            assert not why and "x_ptr" in result.error and "C-contiguous" in result.error, (str(case), result.error)
            refused += 1
    assert refused >= 1, "the seed draws no transposed x to refuse: pick another"


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda x, w: (x[None], w, {}), r"x: expected a 2-D \[rows, cols\] array, got shape \(1, 3, 7\)"),
        (lambda x, w: (x[0], w, {}), r"x: expected a 2-D \[rows, cols\] array, got shape \(7,\)"),
        (lambda x, w: (x, w[:-1], {}), r"weight: expected shape \(7,\) \(x's columns\), got \(6,\)"),
        (lambda x, w: (x, np.ones((1, 7), np.float32), {}), r"weight: expected shape \(7,\)"),
        (lambda x, w: (x, w.astype(np.float64), {}), r"weight: expected dtype f32 with x in f32, got f64"),
        (lambda x, w: (x.astype(np.float64), w, {}), r"weight: expected dtype f64 with x in f64, got f32"),
        (lambda x, w: (x.astype(np.float16), w.astype(DTYPES["bf16"].numpy_dtype()), {}),
         r"weight: expected dtype f16 or f32 with x in f16, got bf16"),
        (lambda x, w: (x.astype(np.int32), w, {}), r"x: expected a floating dtype"),
        (lambda x, w: (x, w, {"eps": -1e-6}), r"eps: expected a non-negative number, got -1e-06"),
        (lambda x, w: (x, w, {"eps": float("nan")}), r"eps: expected a non-negative number, got nan"),
        (lambda x, w: (x, w, {"eps": True}), r"eps: expected a non-negative number, got True"),
        (lambda x, w: (x, w, {"block": "64"}), r"block: expected None or an int .*, got '64'"),
        (lambda x, w: (x, w, {"block": 48}), r"block: expected a power of two from 32 to 1024, got 48"),
        (lambda x, w: (x, w, {"block": 2048}), r"block: expected a power of two from 32 to 1024, got 2048"),
        (lambda x, w: (x, w, {"backend": "gpu"}), r"backend: expected one of \['cuda', 'host'\], got 'gpu'"),
    ],
    ids=["x 3-D", "x 1-D", "weight short", "weight 2-D", "weight f64 with x f32", "weight f32 with x f64",
         "weight bf16 with x f16", "x int", "eps negative", "eps nan", "eps bool", "block str", "block 48",
         "block 2048", "backend"],
)  # fmt: skip
def test_argument_errors_name_the_argument_before_any_launch(no_launch, change, message):
    x, weight, options = change(*data((3, 7)))
    with pytest.raises(rust_kernels.ArgumentError, match=message):
        ops.rms_norm_forward(x, weight, **{"backend": "host", **options})


def test_more_elements_than_32_bit_indexing_are_refused_before_any_launch(no_launch):
    x = np.broadcast_to(np.zeros(1, np.float32), (2**16, 2**15))  # 2**31 elements, no memory behind them
    with pytest.raises(rust_kernels.ArgumentError, match=r"x: rows \* cols = 2147483648 exceeds"):
        ops.rms_norm_forward(x, np.ones(2**15, np.float32), backend="host")


def test_transposed_x_is_refused_naming_the_kernel_argument():
    x, _ = data((7, 3))
    with pytest.raises(rust_kernels.ArgumentError, match=r"x_ptr.*C-contiguous"):
        ops.rms_norm_forward(x.T, np.ones(7, np.float32), backend="host")


@pytest.mark.parametrize("shape", [(0, 7), (0, 0), (3, 0)])
@pytest.mark.parametrize("key", ["f32", "bf16-f32"])
def test_empty_x_gives_an_empty_y_without_a_launch(no_launch, shape, key):
    x, weight = data(shape, key)
    y = ops.rms_norm_forward(x, weight, backend="host")
    assert y.shape == shape and y.dtype == x.dtype


@pytest.mark.parametrize("key", ["bf16", "f16-f32", "f64"])
def test_results_are_bit_identical_run_to_run_in_x_dtype(key):
    x, weight = data((5, 257), key)
    first, again = (ops.rms_norm_forward(x, weight, eps=1e-5, backend="host") for _ in range(2))
    assert first.dtype == x.dtype and first.shape == x.shape
    assert np.array_equal(first.view(np.uint8), again.view(np.uint8))


def test_block_fixes_the_cta_size_and_the_default_follows_the_columns():
    assert [forward.default_block(c) for c in (1, 128, 129, 257, 4096, 4097, 10**6)] == [32, 32, 64, 128, 1024,
                                                                                          1024, 1024]  # fmt: skip
    x, weight = data((2, 130))
    arrays = {"x": x, "weight": weight}
    assert FAMILY.choose(arrays, "host").kernel.block == 64
    plan = FAMILY.op.plan_for(*FAMILY.op.problem((x, weight), (1e-6, 256), "host"), "host")
    assert plan.kernel.block == 256 and plan.grid == (2, 1, 1)
    forced = ops.rms_norm_forward(x, weight, block=256, backend="host")
    own = ops.rms_norm_forward(x, weight, backend="host")
    reference = FAMILY.reference(arrays, plan)[0]
    for y, used in ((forced, plan), (own, FAMILY.choose(arrays, "host"))):
        assert np.all(np.abs(y - reference) <= FAMILY.tolerances(used, x.shape, arrays, (reference,))[0])


def test_the_benchmark_columns_run_on_cpu_tensors():
    torch = pytest.importorskip("torch")
    from rust_kernels.bench import baselines
    from rust_kernels.bench import ops as bench_ops

    x, weight = data((4, 33), "bf16-f32")
    tensors = {"x": torch.from_numpy(x.view(np.int16)).view(torch.bfloat16), "weight": torch.from_numpy(weight)}
    calls = baselines.baseline(NAME).bench_calls(tensors)
    assert set(bench_ops.REQUIRED) <= set(calls)
    with pytest.warns(UserWarning, match="Mismatch dtype"):  # torch's unfused path for bf16 x with f32 weight
        want = calls["torch"]()
    assert want.dtype == torch.bfloat16 and want.shape == (4, 33)
    ours = ops.rms_norm_forward(x, weight, backend="host")
    # both within a bf16 rounding (2^-8) and a few f32 ones of the exact value
    assert np.allclose(ours.astype(np.float64), want.float().numpy(), rtol=2**-7 + 2**-16, atol=0)
    assert calls["bound"]().shape == (4, 33)


@pytest.mark.parametrize("key", ["f32", "bf16-f32"])
def test_the_torch_operator_matches_the_op_and_passes_opcheck_on_cpu(key):
    torch = pytest.importorskip("torch")
    import rust_kernels.torch  # noqa: F401 (defines torch.ops.rust_kernels)

    x, weight = data((5, 33), key)
    want = ops.rms_norm_forward(x, weight, eps=1e-5, backend="host")
    as_tensor = {"f32": torch.from_numpy, "bf16-f32": lambda a: torch.from_numpy(a.view(np.int16)).view(torch.bfloat16)}
    tx, tweight = as_tensor[key](x), torch.from_numpy(weight)
    got = torch.ops.rust_kernels.rms_norm_forward(tx, tweight, 1e-5)
    assert got.dtype == tx.dtype and np.array_equal(got.float().numpy(), want.astype(np.float32))  # the same kernel
    torch.library.opcheck(torch.ops.rust_kernels.rms_norm_forward, (tx, tweight, 1e-5))


def test_differentiating_the_torch_operator_raises_rather_than_giving_no_gradient():
    """The op declares no gradient: autograd's fallback would leave x.grad None with a warning."""
    torch = pytest.importorskip("torch")
    import rust_kernels.torch  # noqa: F401 (defines torch.ops.rust_kernels)

    x, weight = (torch.from_numpy(a) for a in data((3, 8)))
    y = torch.ops.rust_kernels.rms_norm_forward(x.requires_grad_(), weight)
    with pytest.raises(NotImplementedError, match="rms_norm_forward: it has no backward"):
        y.sum().backward()
    with torch.no_grad():  # inference with parameters that require gradients runs
        assert torch.ops.rust_kernels.rms_norm_forward(x, weight.requires_grad_()).shape == (3, 8)
