"""The examples/ programs written with the public API alone, run as a user would (CPU: the host emulator)."""

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest

from rust_kernels import ArgumentError, ops

torch = pytest.importorskip("torch")
EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def load(path: Path):
    spec = importlib.util.spec_from_file_location(f"example_{path.parent.name}", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def test_a_users_kernel_becomes_a_torch_op_from_its_declaration():
    example = load(EXAMPLES / "torch_op" / "op.py")
    assert example.main() == 0  # opcheck (schema, fake, autograd registration, dynamic shapes) and the values
    x = torch.randn(4, 9).bfloat16()
    torch.testing.assert_close(torch.ops.rust_kernels.scale(x, -3.0), x * -3.0)
    with pytest.raises(ArgumentError, match="alpha: expected a number, got True"):
        ops.scale(x.float().numpy(), True, backend="host")
    compiled = torch.compile(lambda t: torch.ops.rust_kernels.scale(t, 0.5) + 1, fullgraph=True)
    torch.testing.assert_close(compiled(x.float()), x.float() * 0.5 + 1)
    assert example.main() == 0  # defining it again is a no-op


@pytest.fixture(scope="module")
def rows():
    return load(EXAMPLES / "rows" / "run.py")


@pytest.mark.parametrize("block", [32, 128])
def test_the_row_kernels_pass_their_checks_in_the_emulator(rows, block, capsys):
    """bias + GELU (both forms), softmax, LayerNorm and RMSNorm in every dtype, rows shorter and longer than the
    CTA, starting off a 16-byte boundary."""
    assert rows.main(["--block", str(block)]) == 0, capsys.readouterr().out


@pytest.mark.parametrize("name", ["softmax", "layer_norm_forward", "rms_norm_forward", "bias_gelu"])
def test_the_row_bounds_catch_an_error_of_a_part_in_ten_thousand(rows, name):
    case = next(c for c in rows.CASES if c.name == name)
    data = {k: v.astype(np.float64) for k, v in rows.make_inputs(case, 3, 1001, np.float32).items()}
    want = case.reference(data["x"], *(data[e] for e in case.extra))
    tol = case.bound(data["x"], data, want, rows.UNIT["f32"], 128, "f32")
    assert (np.abs(want) * 1e-4 > tol).any()


def test_the_readme_shows_the_softmax_body_as_it_is():
    readme = (EXAMPLES.parent / "README.md").read_text()
    shown = readme.split("The softmax body, whole", 1)[1].split("```rust\n", 1)[1].split("```", 1)[0]
    assert shown == (EXAMPLES / "rows" / "softmax.rs.j2").read_text()


@pytest.mark.parametrize(("n", "elements", "finite"), [(1001, 32, 3), (5000, 8, 40)])
def test_a_softmax_row_masked_with_minus_infinity_matches_torch(rows, n, elements, finite):
    """Masked positions (-inf) are 0 and the rest a softmax of the finite values, also where whole threads of the
    CTA hold nothing but -inf; a row masked entirely is NaN, as torch's. N = 1001 with 32 a thread: the row held in
    registers; 5000 with 8: streamed."""
    import rust_kernels

    case = next(c for c in rows.CASES if c.name == "softmax")
    x = np.random.default_rng(3).normal(0, 4, (3, n)).astype(np.float32)
    x[0, :-finite] = -np.inf  # the first row: finite values in its last threads' elements only
    x[1, ::2] = -np.inf
    x[2] = -np.inf
    kernel = rows.kernel_for(case, "f32", 32, {"elements": elements, "rows": 1})
    y = np.zeros_like(x)
    rust_kernels.compile(kernel, target="host").get_kernel().launch(
        *rows.dims(3, 32, {"rows": 1}), rows.launch_args(case, kernel, {"x": x}, y)
    )
    want = torch.softmax(torch.from_numpy(x).double(), dim=1).numpy()
    np.testing.assert_allclose(y[:2], want[:2], rtol=1e-5, atol=1e-7)
    assert np.isnan(y[2]).all() and np.isnan(want[2]).all()


@pytest.mark.parametrize("dtype", ["bf16", "f32"])
def test_the_softmax_writes_each_pack_of_its_tile_in_one_16_byte_store(rows, dtype):
    """The row held in registers is written a 16-byte pack a store: its lanes written one by one (as before
    pack::store_whole), LLVM split each pack into 8-, 4- and 2-byte stores, and bf16 softmax's long rows ran at
    0.61-0.75 of a copy (docs/results/h100-2026-12-06-rows-store/)."""
    import re

    import rust_kernels

    case = next(c for c in rows.CASES if c.name == "softmax")
    lanes = 16 // {"bf16": 2, "f32": 4}[dtype]
    threads, consts = rows.plan(case, 16384, lanes)
    ptx = rust_kernels.build(rows.kernel_for(case, dtype, threads, consts), "sm_90").read_text()
    partial = re.findall(r"st\.global\.v[24]\.b16|st\.global\.v2\.b32", ptx)
    packs = consts["elements"] // lanes
    assert not partial and ptx.count("st.v4.b32") == packs, (partial, ptx.count("st.v4.b32"))


@pytest.mark.parametrize("name", ["softmax", "layer_norm_forward", "rms_norm_forward"])
def test_a_row_kernel_with_rows_of_more_than_one_warp_sharing_a_cta_is_refused_naming_the_rule(name):
    """Several rows a CTA (ROWS) reduce within their warps: with BLOCK > 32 they would share the reductions'
    shared memory and barriers, so the template refuses to build, naming its line."""
    import rust_kernels

    program = rust_kernels.Program(EXAMPLES / "rows")
    with pytest.raises(rust_kernels.BuildError, match=r"(?s)ROWS > 1 needs BLOCK = 32.*from template .*rs\.j2, line"):
        rust_kernels.compile(program.kernel(name, block=64, elements=16, rows=2, dtype="f32"), target="host")
    rust_kernels.compile(program.kernel(name, block=32, elements=16, rows=2, dtype="f32"), target="host")


def test_a_cta_of_more_than_1024_threads_is_refused_when_the_kernel_is_named():
    import rust_kernels

    program = rust_kernels.Program(EXAMPLES / "rows")
    with pytest.raises(rust_kernels.ArgumentError, match=r"block: bias_gelu's CTA is BLOCK=512 x ROWS=4 x 1 = 2048"):
        program.kernel("bias_gelu", block=512, approximate=0, rows=4, dtype="f32")
