import hashlib

import pytest

from rust_kernels.builder import content_hash
from rust_kernels.errors import ArgumentError
from rust_kernels.kernels import CATALOGUE, BatchNorm2dNchwBackward, instances

ARGS_F32 = (
    ("dy_ptr", "*mut f32"),
    ("x_ptr", "*mut f32"),
    ("dx_ptr", "*mut f32"),
    ("weight_ptr", "*mut f32"),
    ("running_mean_ptr", "*mut f32"),
    ("running_var_ptr", "*mut f32"),
    ("dweight_ptr", "*mut f32"),
    ("dbias_ptr", "*mut f32"),
    ("B", "i32"),
    ("C", "i32"),
    ("HW", "i32"),
    ("eps", "f32"),
)


def test_fields_mirror_the_original():
    k = BatchNorm2dNchwBackward(block_hw=256, dtype="f32")
    assert k.name == "batch_norm_2d_nchw_backward"
    assert k.id == "batch_norm_2d_nchw_backward__f32__256"
    assert k.block_hw == 256 and k.dtype == "f32"
    assert k.entry_point_name() == "batch_norm_2d_nchw_backward_entry_point"
    assert k.source == k.kernel_source + "\n\n" + k.entry_point_source
    assert k.args == ARGS_F32


def test_positional_const_like_new():
    assert BatchNorm2dNchwBackward(128).id == "batch_norm_2d_nchw_backward__f32__128"


def test_f64_args_and_scalars_stay_f32():
    k = BatchNorm2dNchwBackward(block_hw=64, dtype="f64")
    assert k.args[:8] == tuple((name, "*mut f64") for name, _ in ARGS_F32[:8])
    assert k.args[8:] == ARGS_F32[8:]  # scalar hyper-parameters are f32 even for f64 kernels


def test_entry_point_text():
    k = BatchNorm2dNchwBackward(block_hw=256, dtype="f32")
    params = ", ".join(f"{n}: {t}" for n, t in ARGS_F32)
    assert "#[kernel]\n#[no_mangle]\n" in k.entry_point_source
    assert f'pub unsafe extern "C" fn batch_norm_2d_nchw_backward_entry_point({params})' in k.entry_point_source
    names = ", ".join(n for n, _ in ARGS_F32)
    assert f"batch_norm_2d_nchw_backward::<f32, 256>({names})" in k.entry_point_source


def test_generated_code_has_no_asm_or_target_checks():
    for k in instances():
        for banned in ("asm!", "target_arch", "cfg(", "nvptx"):
            assert banned not in k.source, (k.id, banned)


def test_kernel_source_is_generic_and_shared_by_instances():
    a, b = BatchNorm2dNchwBackward(block_hw=32), BatchNorm2dNchwBackward(block_hw=1024, dtype="f64")
    assert a.kernel_source == b.kernel_source
    assert "pub unsafe fn batch_norm_2d_nchw_backward<D: Float, const BLOCK_HW: u32>(" in a.kernel_source


@pytest.mark.parametrize("bad", [0, 16, 48, 100, 2048, -256, 256.0, "256", True, None])
def test_block_hw_must_be_a_power_of_two_from_32_to_1024(bad):
    with pytest.raises(ArgumentError, match="block_hw"):
        BatchNorm2dNchwBackward(block_hw=bad)


def test_every_valid_block_hw():
    seed = [k for k in instances(dtypes=("f32",)) if k.name == "batch_norm_2d_nchw_backward"]
    assert [k.block_hw for k in seed] == [32, 64, 128, 256, 512, 1024]


@pytest.mark.parametrize("bad", ["f128", "float32", "", None])
def test_unknown_dtype(bad):
    with pytest.raises(ArgumentError, match="dtype"):
        BatchNorm2dNchwBackward(block_hw=256, dtype=bad)


def test_unknown_or_missing_const():
    with pytest.raises(ArgumentError, match="block_n"):
        BatchNorm2dNchwBackward(block_n=256)
    with pytest.raises(ArgumentError, match="block_hw"):
        BatchNorm2dNchwBackward()


def test_content_hash_is_the_key_not_the_id():
    k = BatchNorm2dNchwBackward(block_hw=256)
    key = content_hash(k)
    assert len(key) == 64 and int(key, 16) >= 0
    assert key == content_hash(BatchNorm2dNchwBackward(block_hw=256))
    assert key != hashlib.sha256(k.id.encode()).hexdigest()
    others = {
        content_hash(BatchNorm2dNchwBackward(block_hw=128)),
        content_hash(BatchNorm2dNchwBackward(block_hw=256, dtype="f64")),
        content_hash(k, "sm_80"),
    }
    assert key not in others and len(others) == 3


def test_content_hash_follows_the_source(monkeypatch):
    k = BatchNorm2dNchwBackward(block_hw=256)
    before = content_hash(k)
    monkeypatch.setattr(type(k), "kernel_source", property(lambda self: "// edited body\n"))
    assert k.id == "batch_norm_2d_nchw_backward__f32__256"  # same readable id...
    assert content_hash(k) != before  # ...but a different key: an edited kernel never serves stale PTX


def test_content_hash_follows_the_toolchain(monkeypatch):
    from rust_kernels import builder, toolchain

    k = BatchNorm2dNchwBackward(block_hw=256)
    before = content_hash(k)
    real = toolchain.find_toolchain()
    other = toolchain.Toolchain(real.rustc, real.cargo, real.llvm_bin, real.rust_src, real.identity + " (patched)")
    monkeypatch.setattr(builder, "find_toolchain", lambda: other)
    assert content_hash(k) != before


def test_catalogue_classes_are_named_in_pascal_case():
    assert "BatchNorm2dNchwBackward" in CATALOGUE
    assert BatchNorm2dNchwBackward.__name__ == "BatchNorm2dNchwBackward"


def test_content_hash_ignores_the_host_emulator_but_not_the_device_code(tmp_path, monkeypatch):
    import shutil

    from rust_kernels import builder, resources

    copy = tmp_path / "cuda_std"
    shutil.copytree(resources.cuda_std(), copy, ignore=shutil.ignore_patterns("target"))
    monkeypatch.setattr(resources, "cuda_std", lambda: copy)
    k = BatchNorm2dNchwBackward(block_hw=256)

    def key() -> str:
        builder.tree_digest.cache_clear()
        return content_hash(k)

    try:
        before = key()
        assert before == content_hash(k)  # the copy hashes like the original
        (copy / "src" / "host" / "mod.rs").write_text("// edited emulator\n", encoding="utf-8")
        assert key() == before
        (copy / "src" / "device" / "mod.rs").write_text("// edited device code\n", encoding="utf-8")
        assert key() != before
    finally:
        builder.tree_digest.cache_clear()
