import re
from pathlib import Path

import pytest

from rust_kernels import resources
from rust_kernels.errors import ArgumentError, SpecError
from rust_kernels.spec import load_specs, parse_specs

FAMILY = resources.codegen() / "batch_norm"
GOOD = (FAMILY / "batch_norm_2d_nchw_backward.toml").read_text()
TEMPLATE = (FAMILY / "batch_norm_2d_nchw_backward.rs.j2").read_text()


def write(tmp_path: Path, text: str, name: str = "spec.toml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    (tmp_path / "batch_norm_2d_nchw_backward.rs.j2").write_text(TEMPLATE)
    return path


def test_the_catalogue_parses():
    names = [s.name for s in load_specs(FAMILY)]
    assert names == [
        "batch_norm_2d_add_relu_mask",
        "batch_norm_2d_backward_elementwise",
        "batch_norm_2d_backward_elementwise_act",
        "batch_norm_2d_backward_reduce",
        "batch_norm_2d_backward_reduce_act",
        "batch_norm_2d_batch_stats",
        "batch_norm_2d_block_backward",
        "batch_norm_2d_block_backward_act",
        "batch_norm_2d_block_forward",
        "batch_norm_2d_block_forward_act",
        "batch_norm_2d_cooperative_backward_channels_last",
        "batch_norm_2d_cooperative_backward_channels_last_act",
        "batch_norm_2d_cooperative_forward_channels_last",
        "batch_norm_2d_cooperative_forward_channels_last_act",
        "batch_norm_2d_frozen_backward_channels_last",
        "batch_norm_2d_frozen_backward_channels_last_act",
        "batch_norm_2d_frozen_backward_grouped",
        "batch_norm_2d_frozen_backward_grouped_act",
        "batch_norm_2d_frozen_forward",
        "batch_norm_2d_frozen_forward_act",
        "batch_norm_2d_frozen_forward_act_packed",
        "batch_norm_2d_frozen_forward_add_relu",
        "batch_norm_2d_frozen_forward_add_relu_packed",
        "batch_norm_2d_frozen_forward_channels_last",
        "batch_norm_2d_frozen_forward_channels_last_packed",
        "batch_norm_2d_fused_backward",
        "batch_norm_2d_fused_backward_act",
        "batch_norm_2d_fused_backward_channels_last",
        "batch_norm_2d_fused_backward_channels_last_act",
        "batch_norm_2d_fused_forward",
        "batch_norm_2d_fused_forward_act",
        "batch_norm_2d_fused_forward_channels_last",
        "batch_norm_2d_fused_forward_channels_last_act",
        "batch_norm_2d_moments",
        "batch_norm_2d_nchw_backward",
        "batch_norm_2d_nchw_backward_split",
        "batch_norm_2d_nchw_backward_split_act",
        "batch_norm_2d_nchw_backward_warp",
        "batch_norm_2d_nchw_forward_inference",
        "batch_norm_2d_nchw_forward_inference_flat",
        "batch_norm_2d_nchw_forward_inference_tiled",
        "batch_norm_2d_normalize",
        "batch_norm_2d_normalize_act",
        "batch_norm_2d_normalize_add_relu",
        "batch_norm_2d_persistent_backward_channels_last",
        "batch_norm_2d_persistent_backward_channels_last_act",
        "batch_norm_2d_persistent_forward_channels_last",
        "batch_norm_2d_persistent_forward_channels_last_act",
        "batch_norm_2d_warp_backward",
        "batch_norm_2d_warp_backward_act",
        "batch_norm_2d_warp_backward_channels_last",
        "batch_norm_2d_warp_backward_channels_last_act",
        "batch_norm_2d_warp_forward",
        "batch_norm_2d_warp_forward_act",
        "batch_norm_2d_warp_forward_channels_last",
        "batch_norm_2d_warp_forward_channels_last_act",
    ]
    # An activation or a layout is a variant declared in its base's file, not a copy of that file.
    assert not list(FAMILY.glob("*_act.toml"))


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
        # issue 9.8: each of these was accepted before
        ('name = "batch_norm_2d_nchw_backward"', 'name = "_"', "kernel name '_'"),
        ('name = "batch_norm_2d_nchw_backward"', 'name = "zz\\n"', r"kernel name 'zz\\n'"),
        ('name = "batch_norm_2d_nchw_backward"', 'name = "kernel"', "shadow rust_kernels' own class Kernel"),
        ('name = "BLOCK_HW"', 'name = "D"', "const 'D' clashes"),
        ("max = 1024\n", "", "needs a max"),
        ('type = "*mut D"', 'type = "*const D"', "pointers are `\\*mut`"),
        ('template = "batch_norm_2d_nchw_backward.rs.j2"', 'template = "../x.rs.j2"', "outside the spec's directory"),
        ('type = "*mut D"\noutput = true', 'type = "i32"\noutput = true', "only pointers are outputs"),
        # a misspelt key of an entry: `ouput` left the pointer unchecked as an output, `power_of_2` enumerated 1024
        (
            'type = "*mut D"\noutput = true',
            'type = "*mut D"\nouput = true',
            r"\[\[args\]\] entry 'dx_ptr': unknown keys \['ouput'\]",
        ),
        ("power_of_two = true", "power_of_2 = true", r"\[\[consts\]\] entry 'BLOCK_HW': unknown keys \['power_of_2'\]"),
        ('name = "dx_ptr"', 'name = "dx_ptr"\nafter = "x_ptr"', r"entry 'dx_ptr': unknown keys \['after'\]"),
    ],
)
def test_bad_specs_are_refused_at_generation(tmp_path, old, new, message):
    assert old in GOOD
    with pytest.raises(SpecError, match=message):
        parse_specs(write(tmp_path, GOOD.replace(old, new, 1)))


def test_missing_fields_and_bad_toml(tmp_path):
    with pytest.raises(SpecError, match="missing fields"):
        parse_specs(write(tmp_path, 'name = "k"\n'))
    with pytest.raises(SpecError, match="not valid TOML"):
        parse_specs(write(tmp_path, "name = \n"))


def test_two_specs_with_one_class_name_are_refused(tmp_path):
    write(tmp_path, GOOD, "a.toml")
    write(
        tmp_path,
        GOOD.replace('name = "batch_norm_2d_nchw_backward"', 'name = "batch_norm_2d_nchw__backward"'),
        "b.toml",
    )
    with pytest.raises(SpecError, match="both map to 'BatchNorm2dNchwBackward'"):
        load_specs(tmp_path)


VARIANT = '''
[[variants]]
name = "nchw_backward_act"
doc = """
The seed backward with a bias.
"""
dtypes = ["f32", "bf16"]
shared_accumulators_per_warp = 3

[[variants.consts]]
name = "BLOCK_HW"
doc = "threads per CTA"
min = 64
max = 256
power_of_two = true
[[variants.consts]]
name = "ACTIVATION"
max = 4

[[variants.args]]
name = "bias_ptr"
type = "*mut D"
after = "weight_ptr"
'''


def test_a_variant_is_the_base_spec_with_its_changes(tmp_path):
    """[[variants]]: another kernel of the same file, the base's spec but for its name, doc, the fields it gives and
    its consts and args (replaced in place by name, inserted after `after`, or appended)."""
    from rust_kernels.kernels import kernel_class

    (plain,) = parse_specs(write(tmp_path, GOOD))
    base, variant = parse_specs(write(tmp_path, GOOD + VARIANT))
    assert base == plain  # the base is as it was without variants
    assert (base.name, variant.name, variant.doc) == ("batch_norm_2d_nchw_backward", "nchw_backward_act",
                                                      "The seed backward with a bias.")  # fmt: skip
    assert variant.path == base.path and variant.template == base.template and variant.grid == base.grid
    assert (variant.dtypes, variant.shared_accumulators_per_warp) == (("f32", "bf16"), 3)
    assert [(c.name, c.min, c.max, c.power_of_two) for c in variant.consts] == [
        ("BLOCK_HW", 64, 256, True), ("ACTIVATION", 1, 4, False)
    ]  # fmt: skip
    names = [a.name for a in base.args]
    assert [a.name for a in variant.args] == [*names[:4], "bias_ptr", *names[4:]]
    k = kernel_class(variant)(128, 2, dtype="bf16")
    assert k.id == "nchw_backward_act__bf16__128__2" and k.args[4] == ("bias_ptr", "*mut bf16")
    assert k.shared_mem_bytes == 3 * 4 * 4  # 3 accumulators (f32 for bf16) per warp of 128 threads
    assert [s.name for s in load_specs(tmp_path)] == ["batch_norm_2d_nchw_backward", "nchw_backward_act"]


BASE_REQUIRES = """
[[requires]]
check = "B > 0"
message = "B must be positive"
"""


@pytest.mark.parametrize(("keep", "expected"), [("", ["C > 1"]), ("requires_base = false\n", ["C > 1"]),
                                                ("requires_base = true\n", ["B > 0", "C > 1"])])  # fmt: skip
def test_a_variants_requires_replace_the_bases_unless_it_keeps_them(tmp_path, keep, expected):
    """[[variants.requires]] replace the base's wholesale; with requires_base = true the base's hold too, ahead of the
    variant's own (a narrower kernel that needs what its base needs and more)."""
    variant = f'[[variants]]\nname = "v"\ndoc = "d"\n{keep}[[variants.requires]]\ncheck = "C > 1"\nmessage = "m"\n'
    base, derived = parse_specs(write(tmp_path, GOOD + BASE_REQUIRES + variant))
    assert [r.check for r in base.requires] == ["B > 0"]
    assert [r.check for r in derived.requires] == expected


def test_requires_base_is_a_variants_key_and_a_bool(tmp_path):
    path = write(tmp_path, "requires_base = true\n" + GOOD)
    with pytest.raises(SpecError, match=r"unknown fields \['requires_base'\]"):
        parse_specs(path)
    path = write(tmp_path, GOOD + '[[variants]]\nname = "v"\ndoc = "d"\nrequires_base = "yes"\n')
    with pytest.raises(SpecError, match=r"variant 'v': requires_base must be true or false, got 'yes'"):
        parse_specs(path)


@pytest.mark.parametrize(
    ("variant", "message"),
    [
        ('name = "v"\ndoc = "d"\ncolour = 1', r"variant 'v': unknown fields \['colour'\]"),
        ('name = "v"\ndoc = "d"\n[[variants.variants]]\nname = "w"', r"variant 'v': unknown fields \['variants'\]"),
        ('name = "v"', r"variant 'v': missing fields \['doc'\]"),
        ('doc = "d"', r"\[\[variants\]\] entry 1: missing fields \['name'\]"),
        (
            'name = "v"\ndoc = "d"\n[[variants.args]]\nname = "bias_ptr"\ntype = "*mut D"\nafter = "w_ptr"',
            r"variant 'v': args entry 'bias_ptr': after 'w_ptr' names none of \['dy_ptr', ",
        ),
        (
            'name = "v"\ndoc = "d"\n[[variants.consts]]\nname = "BLOCK_HW"\nmax = 64\nafter = "X"',
            r"variant 'v': consts entry 'BLOCK_HW' replaces the base's in place",
        ),
        (
            'name = "v"\ndoc = "d"\n[[variants.consts]]\nname = "B"\nmax = 4',
            r"variant 'v': argument and const names must be unique",
        ),
        ('name = "v"\ndoc = "d"\ntemplate = "missing.rs.j2"', r"variant 'v': template 'missing.rs.j2' not found"),
        (
            'name = "batch_norm_2d_nchw_backward"\ndoc = "d"',
            r"variant 'batch_norm_2d_nchw_backward': kernel 'batch_norm_2d_nchw_backward' collides with kernel "
            r"'batch_norm_2d_nchw_backward' of .*spec.toml",
        ),
        (
            'name = "v_w"\ndoc = "d"\n[[variants]]\nname = "v__w"\ndoc = "e"',
            r"variant 'v__w': kernel 'v__w' collides with kernel 'v_w' of .* \(both map to 'VW'\)",
        ),
    ],
)
def test_bad_variants_are_refused_naming_the_file_and_the_variant(tmp_path, variant, message):
    path = write(tmp_path, GOOD + "\n[[variants]]\n" + variant + "\n")
    with pytest.raises(SpecError, match="^" + re.escape(f"{path}: ") + message):
        parse_specs(path)


def test_variants_must_be_tables(tmp_path):
    with pytest.raises(SpecError, match="variants must be a list of"):
        parse_specs(write(tmp_path, "variants = 1\n" + GOOD))


def test_a_variant_named_as_another_files_kernel_is_refused(tmp_path):
    write(tmp_path, GOOD, "a.toml")
    other = GOOD.replace('name = "batch_norm_2d_nchw_backward"', 'name = "other"')
    write(tmp_path, other + '\n[[variants]]\nname = "batch_norm_2d_nchw_backward"\ndoc = "d"\n', "b.toml")
    message = r"kernel 'batch_norm_2d_nchw_backward' collides with kernel 'batch_norm_2d_nchw_backward' of .*a\.toml"
    with pytest.raises(SpecError, match=message):
        load_specs(tmp_path)


ACTIVATION = 'name = "ACTIVATION"\nmax = 4'  # VARIANT's entry
SHARED = """[[consts]]
name = "ACTIVATION"
type = "u32"
doc = "the activation"
min = 1
max = 4
"""


def test_a_shared_const_is_the_definition_in_the_directorys_consts_toml(tmp_path):
    """`shared = true`: the const as consts.toml defines it, the same as declaring it in place; consts.toml is no
    spec of its own."""
    inline = GOOD + VARIANT.replace(ACTIVATION, 'name = "ACTIVATION"\ntype = "u32"\ndoc = "the activation"\nmax = 4')
    (_, expected) = parse_specs(write(tmp_path, inline))
    write(tmp_path, SHARED, "consts.toml")
    taken = VARIANT.replace(ACTIVATION, 'name = "ACTIVATION"\nshared = true')
    (_, variant) = parse_specs(write(tmp_path, GOOD + taken))
    assert variant == expected
    assert [s.name for s in load_specs(tmp_path)] == ["batch_norm_2d_nchw_backward", "nchw_backward_act"]
    # the catalogue's: training.ACTIVATIONS numbers the ops' activations as the templates do, over the shared range
    from rust_kernels.families.batch_norm import training

    (activation,) = [c for k in load_specs(FAMILY) for c in k.consts if c.name == "ACTIVATION"][:1]
    assert sorted(training.ACTIVATIONS.values()) == activation.values()


def test_a_kernel_doc_that_lists_the_fused_activations_lists_every_one():
    """The docs of batch_norm's kernels with ACTIVATION that name its activations name all that the shared const
    numbers (`1 ReLU, 2 SiLU, ...`), so a new activation cannot leave them stale (Hardswish was missing from 12)."""
    (activation,) = [c for k in load_specs(FAMILY) for c in k.consts if c.name == "ACTIVATION"][:1]
    names = re.findall(r"\d ([A-Za-z0-9]+)", activation.doc)
    assert names == ["ReLU", "SiLU", "ReLU6", "Hardswish"]
    listing = [k for k in load_specs(FAMILY) if activation in k.consts and "SiLU" in k.doc]
    assert len(listing) >= 15
    stale = {k.name: [n for n in names if n not in k.doc] for k in listing}
    assert {name: missing for name, missing in stale.items() if missing} == {}


@pytest.mark.parametrize(
    ("consts", "entry", "message"),
    [
        (None, "shared = true", r"consts\.toml: cannot be read"),
        (SHARED, "shared = true\nmax = 2", r"entry 'ACTIVATION': a shared const's entry holds its name and `shared"),
        (SHARED, "shared = false", r"entry 'ACTIVATION': a shared const's entry holds its name and `shared"),
        (SHARED.replace('"ACTIVATION"', '"ACT"'), "shared = true", r"'ACTIVATION' is not defined in .*\['ACT'\]"),
        (SHARED.replace("max = 4", "max = 4\nshared = true"), "shared = true", r"none of them is shared itself"),
        ("colour = 1\n" + SHARED, "shared = true", r"consts\.toml: unknown fields \['colour'\]"),
        (SHARED.replace("max = 4", ""), "shared = true", r"consts\.toml: const ACTIVATION needs a max"),
    ],
)
def test_bad_shared_consts_are_refused_naming_the_file(tmp_path, consts, entry, message):
    if consts is not None:
        write(tmp_path, consts, "consts.toml")
    with pytest.raises(SpecError, match=message):
        parse_specs(write(tmp_path, GOOD + VARIANT.replace(ACTIVATION, 'name = "ACTIVATION"\n' + entry)))


def test_a_const_without_max_is_refused_quickly(tmp_path):
    """Issue 9.8: a const without max enumerated 2^31 values at import (MemoryError after 17 s)."""
    import time

    start = time.perf_counter()
    with pytest.raises(SpecError, match="needs a max"):
        parse_specs(write(tmp_path, GOOD.replace("max = 1024\n", "")))
    big = GOOD.replace("max = 1024\npower_of_two = true", "max = 100000")
    with pytest.raises(SpecError, match="at most 4096"):
        parse_specs(write(tmp_path, big))
    assert time.perf_counter() - start < 1


@pytest.mark.parametrize(
    ("requirement", "message"),
    [
        ('check = "HW %% 2 == 0"', "missing"),
        ('check = "__import__(1)"\nmessage = "m"', "Call is not allowed"),
        ('check = "Q == 1"\nmessage = "m"', "unknown name 'Q'"),
        ('check = "HW == 1.5"\nmessage = "m"', "only integer constants"),
        ('check = "HW > 0"\nmessage = "m"\nwhn = "HW > 1"', r"\[\[requires\]\] entry .*unknown keys \['whn'\]"),
    ],
)
def test_bad_requirements_are_refused(tmp_path, requirement, message):
    text = GOOD + "\n[[requires]]\n" + requirement.replace("%%", "%") + "\n"
    if "message" not in requirement:
        message = "needs `check` and `message`"
    with pytest.raises(SpecError, match=message):
        parse_specs(write(tmp_path, text))


def test_a_parameter_dtype_is_a_spec_axis_not_a_copy():
    """bf16/f16 activations with f32 parameters (autocast's pairing) are instances of the one spec: P is D or a
    dtype of D's accumulation type; the ids and entry points say which."""
    from rust_kernels.kernels import BatchNorm2dNchwBackwardSplit, instances

    spec = BatchNorm2dNchwBackwardSplit.spec
    assert [spec.params_for(d) for d in ("f32", "f64", "bf16", "f16")] == [
        ("f32",), ("f64",), ("bf16", "f32"), ("f16", "f32")
    ]  # fmt: skip
    k = BatchNorm2dNchwBackwardSplit(128, 1, 1, dtype="bf16", param_dtype="f32")
    assert k.id == "batch_norm_2d_nchw_backward_split__bf16-f32__128__1__1" and k.dtype_key == "bf16-f32"
    assert dict(k.args)["weight_ptr"] == "*mut f32" and dict(k.args)["x_ptr"] == "*mut bf16"
    assert "::<bf16, f32, 128, 1, 1>" in k.entry_point_source
    assert "P: Float<Acc = D::Acc>" in k.kernel_source
    assert BatchNorm2dNchwBackwardSplit(128, 1, 1, dtype="bf16") != k
    with pytest.raises(ArgumentError, match=r"param_dtype: expected one of \['f64'\]"):
        BatchNorm2dNchwBackwardSplit(128, 1, 1, dtype="f64", param_dtype="f32")
    assert sum(i.dtype_key == "bf16-f32" for i in instances([BatchNorm2dNchwBackwardSplit])) == 3 * 3 * 2
    assert not list(FAMILY.glob("*_mixed.toml"))


def test_an_instance_failing_a_precondition_over_its_consts_alone_is_not_in_the_catalogue():
    """VECTORIZED = 3 (packs over the flat NCHW tensor) only with CHANNELS_LAST = 0: the other combination is left
    out of instances(), named by the precondition's message; the rest stay."""
    from rust_kernels.kernels import BatchNorm2dNormalize, instances  # type: ignore[attr-defined]

    listed = {k.const_values for k in instances([BatchNorm2dNormalize], dtypes=("f32",))}
    assert listed == {(256, v, cl) for v in range(4) for cl in (0, 1)} - {(256, 3, 1)}
    flat_cl = BatchNorm2dNormalize(256, 3, 1, dtype="f32")
    assert flat_cl.spec.impossible(flat_cl.spec_names) == ("VECTORIZED = 3 is NCHW's (CHANNELS_LAST = 0): "
                                                           "channels_last has its own packs (1, 2)")  # fmt: skip
    flat_nchw = BatchNorm2dNormalize(256, 3, 0, dtype="f32")
    assert flat_nchw.spec.impossible(flat_nchw.spec_names) is None


def test_param_dtypes_need_a_p_argument(tmp_path):
    text = GOOD.replace('dtypes = ["f32", "f64", "bf16", "f16"]', 'dtypes = ["bf16"]\nparam_dtypes = ["f32"]')
    with pytest.raises(SpecError, match="param_dtypes is set but no argument has type P"):
        parse_specs(write(tmp_path, text))


def test_a_register_cap_applies_where_its_condition_holds(tmp_path):
    """[[registers]]: the first entry whose `when` holds puts `.maxnreg` beside `.maxntid` in that instance's PTX
    directives (and so in its source key: a capped build never serves an uncapped one)."""
    from rust_kernels import builder
    from rust_kernels.kernels import kernel_class

    capped = GOOD + '\n[[registers]]\nwhen = "BLOCK_HW >= 256 and DSIZE == 4"\nmax = 96\n[[registers]]\nmax = 64\n'
    (spec,) = parse_specs(write(tmp_path, capped))
    assert [spec.max_registers({"BLOCK_HW": b, "DSIZE": s}) for b, s in ((256, 4), (128, 4), (256, 2))] == [96, 64, 64]
    plain, cls = kernel_class(parse_specs(write(tmp_path, GOOD))[0]), kernel_class(spec)
    assert builder.performance_directives(cls(256, dtype="f32")) == ".maxntid 256, 1, 1\n.maxnreg 96"
    assert builder.source_key(cls(256, dtype="f32"), "sm_90") != builder.source_key(plain(256, dtype="f32"), "sm_90")
    ptx = ".visible .entry batch_norm_2d_nchw_backward_entry_point(\n\t.param .u64 a\n)\n{\n\tret;\n}\n"
    assert "\n.maxntid 256, 1, 1\n.maxnreg 96\n{" in builder._with_directives(cls(256, dtype="f32"), ptx)


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ("max = 8", r"must lie in \[16, 255\]"),
        ("max = 300", r"must lie in \[16, 255\]"),
        ('when = "BLOCK_HW == 256"', "needs `max`"),
        ("max = 64\nlimit = 1", "needs `max`"),
        ('max = 64\nwhen = "HW == 4"', "unknown name 'HW'"),  # an argument: the cap is decided at build time
    ],
)
def test_bad_register_caps_are_refused(tmp_path, entry, message):
    with pytest.raises(SpecError, match=message):
        parse_specs(write(tmp_path, GOOD + "\n[[registers]]\n" + entry + "\n"))


def test_a_register_cap_whose_condition_cannot_be_evaluated_is_named(tmp_path):
    (spec,) = parse_specs(write(tmp_path, GOOD + '\n[[registers]]\nwhen = "256 % (BLOCK_HW - 256) == 0"\nmax = 64\n'))
    with pytest.raises(SpecError, match=r"\[\[registers\]\] when .* cannot be evaluated with \{'BLOCK_HW': 256"):
        spec.max_registers({"BLOCK_HW": 256, "DSIZE": 4})
