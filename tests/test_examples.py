"""The examples/ programs written with the public API alone, run as a user would (CPU: the host emulator)."""

import importlib.util
from pathlib import Path

import pytest

from rust_kernels import ArgumentError, ops

torch = pytest.importorskip("torch")
EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def load(path: Path):
    spec = importlib.util.spec_from_file_location(f"example_{path.parent.name}", path)
    module = importlib.util.module_from_spec(spec)
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
