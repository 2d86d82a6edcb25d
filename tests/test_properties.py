"""Property-based tests: random cases of every registered family, drawn by hypothesis from rust_kernels.fuzz's
distribution (each family's shape space with zero-size dimensions; dtypes; scalars; misaligned inputs and the layouts
the family refuses; the op's own plan and every plan of the family's), against the float64 references and the families'
tolerances.

The "ci" profile (default) runs a fixed set of examples in the host emulator; HYPOTHESIS_PROFILE=gpu runs many fresh
ones on the GPU (see conftest.py)."""

from __future__ import annotations

import dataclasses
import os

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from rust_kernels import arrays, check, cli, fuzz, registry
from rust_kernels.dtypes import DTYPES
from rust_kernels.families.batch_norm import backward, common
from rust_kernels.registry import Family

BACKEND = "cuda" if os.environ.get("HYPOTHESIS_PROFILE") == "gpu" else "host"
pytestmark = [pytest.mark.gpu] if BACKEND == "cuda" else []
FAMILIES = registry.families()


@st.composite
def cases(draw: st.DrawFn, family: Family) -> fuzz.Case:
    return fuzz.draw(family, BACKEND, lambda low, high: draw(st.integers(low, high)))


@pytest.mark.parametrize("family", FAMILIES, ids=lambda f: f.name)
@given(data=st.data())
def test_random_cases_match_the_reference_or_are_refused_as_they_must(family, data):
    case = data.draw(cases(family), label="case")
    _, why = fuzz.run_case(case, BACKEND)
    assert not why, f"{case}: {why}"


@pytest.mark.parametrize("family", FAMILIES, ids=lambda f: f.name)
@settings(max_examples=max(1, settings.default.max_examples // 4))
@given(data=st.data())
def test_the_op_runs_the_plan_its_family_says_it_chooses(family, data):
    """The plan `choose` names (the reference and tolerances follow it) is the one the op launches: same bits."""
    case = dataclasses.replace(data.draw(cases(family), label="case"), layout=family.layouts[0])
    assume(family.refusal(case.shape) is None)  # a shape the op refuses has no plan
    inputs = family.inputs(case.shape, case.dtype, case.seed)
    placed = {name: check.placed(a, BACKEND, case.offset) for name, a in inputs.items()}
    own = family.run(None, placed, BACKEND)
    chosen = family.run(family.choose(placed, BACKEND), placed, BACKEND)
    for a, b in zip(own, chosen, strict=True):
        assert np.array_equal(arrays.to_host(a).view(np.uint8), arrays.to_host(b).view(np.uint8)), case


ZERO_DIMS = [(f, dim) for f in FAMILIES for dim in range(len(f.spaces[BACKEND].dims))]


@pytest.mark.parametrize(("family", "dim"), ZERO_DIMS, ids=lambda v: v.name if isinstance(v, Family) else f"dim{v}=0")
def test_zero_size_dimensions_give_empty_outputs_and_zero_sums(family, dim):
    """As PyTorch: outputs shaped like an empty input are empty, sums over it (dweight, dbias) are zeros, and so are
    training mode's saved statistics (in the accumulation type); the running statistics a family also compares are
    left as they were (nothing launched: the reference says so)."""
    shape = tuple(0 if i == dim else n for i, n in enumerate(family.suites["host"][1]))
    for dtype in family.dtypes:
        inputs = family.inputs(shape, dtype)
        data = {name: check.placed(a, BACKEND) for name, a in inputs.items()}
        got = [arrays.to_host(a) for a in family.run(None, data, BACKEND)]
        want = family.reference(inputs, family.choose(data, BACKEND))
        assert [o.shape for o in got] == [r.shape for r in want]
        outputs = got[: len(family.op.outputs)]  # the op's own; the rest are mutated inputs
        assert all(
            np.array_equal(o.astype(np.float64), r)
            for o, r in zip(got[len(outputs) :], want[len(outputs) :], strict=True)
        )
        kinds = dtype.split("-")  # mixed keys: activations-parameters
        storage = {DTYPES[d].numpy_dtype() for d in kinds} | {np.dtype(DTYPES[d].acc_numpy) for d in kinds}
        assert all(o.dtype in storage and not np.any(o.astype(np.float64)) for o in outputs)


REFUSED = [(f, layout) for f in FAMILIES for layout in f.layouts if not layout.accepted]


@pytest.mark.parametrize(("family", "layout"), REFUSED, ids=lambda v: v.name)
def test_layouts_the_family_refuses_are_refused(family, layout):
    case = fuzz.Case(family, family.suites["host"][1], "f32", None, (), 0, layout, 0)
    result, why = fuzz.run_case(case, BACKEND)
    assert not why and "contiguous" in result.error


@pytest.mark.parametrize(
    ("dtype", "offset"), [("f32", 1), ("f32", 2), ("f64", 1), ("bf16", 1), ("bf16", 4), ("f16", 6)]
)
def test_vectorized_plans_refuse_misaligned_inputs_and_the_op_picks_a_pack_that_fits(dtype, offset):
    """dy and x start `offset` elements past a 64-byte boundary: a 16- or 8-byte pack that does not divide that is
    refused by the kernel's launch precondition, one that does runs; the op's own choice always fits."""
    family, shape = registry.family(backward.NCHW.name), (2, 3, 4, 8)
    misaligned_by = offset * DTYPES[dtype].size
    inputs = family.inputs(shape, dtype, seed=1)
    data = {name: check.placed(a, BACKEND, offset) for name, a in inputs.items()}
    own = family.choose(data, BACKEND)
    assert misaligned_by % (common.unit_elements(own.kernel.vectorized, dtype) * DTYPES[dtype].size) == 0
    assert check.attempt(family, own, shape, inputs, data, BACKEND, forced=False).passed
    for plan in family.plans(BACKEND, shape, dtype):
        if getattr(plan.kernel, "vectorized", 0) == 0:
            continue
        pack = common.unit_elements(plan.kernel.vectorized, dtype) * DTYPES[dtype].size
        result = check.attempt(family, plan, shape, inputs, data, BACKEND)
        if misaligned_by % pack:
            assert fuzz.PRECONDITION in result.error and f"{pack}-byte aligned" in result.error, (plan.label, result)
        else:
            assert result.passed, (plan.label, result)


def test_the_same_seed_draws_the_same_cases():
    first = [str(c) for _, c in zip(range(50), fuzz.draws(FAMILIES, "cuda", 11), strict=False)]
    again = [str(c) for _, c in zip(range(50), fuzz.draws(FAMILIES, "cuda", 11), strict=False)]
    other = [str(c) for _, c in zip(range(50), fuzz.draws(FAMILIES, "cuda", 12), strict=False)]
    assert first == again != other


def test_cuda_cases_stay_within_their_element_budget_and_cover_the_space():
    drawn = [c for _, c in zip(range(3000), fuzz.draws(FAMILIES, "cuda", 5), strict=False)]
    assert all(np.prod(c.shape) <= 2 ** c.family.spaces["cuda"].max_log2_elements for c in drawn)
    assert all(len(c.shape) == len(c.family.spaces["cuda"].dims) for c in drawn)
    assert any(0 in c.shape for c in drawn) and any(c.offset for c in drawn) and any(c.plan is None for c in drawn)
    assert any(c.layout is not c.family.layouts[0] for c in drawn)
    assert any(len(c.shape) == 4 and c.shape[2] * c.shape[3] == 1 for c in drawn)  # H*W = 1 (BatchNorm2d)
    assert {c.family.name for c in drawn} == {f.name for f in FAMILIES}


@pytest.mark.skipif(BACKEND != "host", reason="the fuzz command on the host backend")
def test_fuzz_command_on_the_host(capsys):
    """Cases drawn uniformly (hypothesis favours small values and shrinks): the distribution's far corners too."""
    assert cli.main(["fuzz", "--backend", "host", "--cases", "120", "--seed", "2026"]) == 0
    assert capsys.readouterr().out.strip().splitlines()[-1] == "120 passed, 0 failed (seed 2026)"


def test_fuzz_reports_each_failure_with_its_case_and_exits_1(capsys, monkeypatch):
    def fails_the_third(case, backend, calls=[]):  # noqa: B006 (counts calls)
        calls.append(case)
        return None, "wrong" if len(calls) == 3 else ""

    monkeypatch.setattr(fuzz, "run_case", fails_the_third)
    assert fuzz.main(["--backend", "host", "--cases", "5", "--seed", "9"]) == 1
    captured = capsys.readouterr()
    third = [c for _, c in zip(range(3), fuzz.draws(FAMILIES, "host", 9), strict=False)][2]
    assert f"FAIL case 2: {third}: wrong" in captured.err
    assert "--seed 9 --only 2" in captured.out
    assert captured.out.strip().splitlines()[-1] == "4 passed, 1 failed (seed 9)"
