from pathlib import Path

import pytest
from rust_kernels.paths import SPECS

from rust_kernels.errors import SpecError
from rust_kernels.spec import load_specs, parse_spec

GOOD = (SPECS / "batch_norm_2d_nchw_backward.toml").read_text()


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "spec.toml"
    path.write_text(text)
    return path


def test_the_catalogue_parses():
    names = [s.name for s in load_specs()]
    assert names == [
        "batch_norm_2d_nchw_backward",
        "batch_norm_2d_nchw_backward_split",
        "batch_norm_2d_nchw_backward_warp",
    ]


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        ('name = "batch_norm_2d_nchw_backward"', 'name = "batch-norm"', "kernel name 'batch-norm'"),
        ('name = "batch_norm_2d_nchw_backward"', 'name = "2d_norm"', "kernel name '2d_norm'"),
        ('name = "batch_norm_2d_nchw_backward"', 'name = "fn"', "kernel name 'fn'"),
        ('name = "batch_norm_2d_nchw_backward"', 'name = "BatchNorm"', "kernel name 'BatchNorm'"),
        ('name = "dy_ptr"', 'name = "dy ptr"', "argument 'dy ptr'"),
        ('name = "dy_ptr"', 'name = "type"', "argument 'type'"),
        ('name = "BLOCK_HW"', 'name = "block-hw"', "const 'block-hw'"),
        ('type = "*mut D"', 'type = "&mut [D]"', "dy_ptr has type"),
        ('name = "x_ptr"', 'name = "dy_ptr"', "unique"),
        ('dtypes = ["f32", "f64", "bf16", "f16"]', 'dtypes = ["f32", "f128"]', "dtypes"),
        ('template = "batch_norm_2d_nchw_backward.rs.j2"', 'template = "missing.rs.j2"', "not found"),
        ('grid = ["C", 1, 1]', 'grid = ["K", 1, 1]', "grid entry 'K'"),
        ('block = ["BLOCK_HW", 1, 1]', "block = [0, 1, 1]", "block entry 0"),
    ],
)
def test_bad_specs_are_refused_at_generation(tmp_path, old, new, message):
    assert old in GOOD
    with pytest.raises(SpecError, match=message):
        parse_spec(write(tmp_path, GOOD.replace(old, new, 1)))


def test_missing_fields_and_bad_toml(tmp_path):
    with pytest.raises(SpecError, match="missing fields"):
        parse_spec(write(tmp_path, 'name = "k"\n'))
    with pytest.raises(SpecError, match="not valid TOML"):
        parse_spec(write(tmp_path, "name = \n"))
