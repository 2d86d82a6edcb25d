"""Hostile or mistaken specs and templates (the authoring issue's defects), each refused with an error naming the
file or argument, before anything runs: sandboxed and scoped templates, nothing read from outside a kernel's
directory, reserved names, ranges, bounds."""

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import rust_kernels
from rust_kernels import ArgumentError, SpecError, codegen, driver, resources
from rust_kernels.dtypes import DTYPES
from rust_kernels.kernels import BatchNorm2dNchwBackward, Kernel
from rust_kernels.spec import RESERVED_FIELDS

SPEC = """name = "user_scale"
template = "user_scale.rs.j2"
doc = "y = x * 2"
dtypes = ["f32"]
grid = ["*", 1, 1]
block = ["BLOCK", 1, 1]

[[consts]]
name = "BLOCK"
max = 256
power_of_two = true

[[args]]
name = "x_ptr"
type = "*mut D"
[[args]]
name = "y_ptr"
type = "*mut D"
output = true
[[args]]
name = "N"
type = "i32"
"""
BODY = """let i = thread::index_1d() as usize;
if i < N as usize {
    y_ptr.store(i, D::from_acc(x_ptr.load(i).to_acc() + x_ptr.load(i).to_acc()));
}
"""


def program(tmp_path: Path, body: str = BODY, spec: str = SPEC) -> rust_kernels.Program:
    (tmp_path / "user_scale.toml").write_text(spec)
    (tmp_path / "user_scale.rs.j2").write_text(body)
    return rust_kernels.Program(tmp_path)


def source(tmp_path: Path, body: str, spec: str = SPEC) -> str:
    return program(tmp_path, body, spec).kernel("user_scale", 64).source


def test_templates_are_sandboxed(tmp_path):
    marker = tmp_path / "ran"
    body = "{{ cycler.__init__.__globals__.os.system('touch " + str(marker) + "') }}\n" + BODY
    with pytest.raises(SpecError, match=r"user_scale\.rs\.j2.*SecurityError"):
        source(tmp_path, body)
    assert not marker.exists()


def test_an_include_may_not_leave_the_kernels_directory(tmp_path):
    outside = tmp_path / "outside.txt"
    outside.write_text("SECRET")
    (tmp_path / "kernel").mkdir()
    os.symlink(outside, tmp_path / "kernel" / "linked.rs.j2")
    with pytest.raises(SpecError, match=r"user_scale\.rs\.j2:1: TemplateNotFound: linked\.rs\.j2"):
        source(tmp_path / "kernel", '{% include "linked.rs.j2" %}\n' + BODY)
    with pytest.raises(SpecError, match="TemplateNotFound"):
        source(tmp_path / "kernel", '{% include "../outside.txt" %}\n' + BODY)


@pytest.mark.parametrize("read", ['include_bytes!("/etc/hostname")', 'include_str!("x")', 'include!("y.rs")',
                                  '#[path = "/tmp/x.rs"] mod m;'])  # fmt: skip
def test_generated_rust_may_not_read_files_at_build_time(tmp_path, read):
    with pytest.raises(SpecError, match="reads a file at build time"):
        source(tmp_path, f"let _ = {read};\n" + BODY if "!" in read else read + "\n" + BODY)


@pytest.mark.parametrize(("text", "read"), [("include!(a)", "include!"), ("x.include_str !(a)", "include_str !"),
                                             ("# [ path = 1]", "# [ path"), ("my_include!(a)", None),
                                             ("include_strs!(a)", None), ("#[paths]", None)])  # fmt: skip
def test_file_reads_are_told_from_other_names(text, read):
    found = codegen.FILE_READS.search(text)
    assert (found and found.group(0)) == read


def test_a_user_template_cannot_shadow_the_packages(tmp_path):
    """A kernel directory's own kernel.rs.j2 or reduce.rs.j2 is its own: the shared ones live under rust_kernels/."""
    (tmp_path / "kernel.rs.j2").write_text("HIJACKED")
    (tmp_path / "reduce.rs.j2").write_text("{% macro block_sum() %}HIJACKED{% endmacro %}")
    text = source(tmp_path, '{%- from "rust_kernels/reduce.rs.j2" import block_sum -%}\n' + BODY)
    assert "HIJACKED" not in text and "pub unsafe fn user_scale<D: Float, const BLOCK: u32>" in text
    spec = SPEC.replace('template = "user_scale.rs.j2"', 'template = "rust_kernels/reduce.rs.j2"')
    (tmp_path / "rust_kernels").mkdir()
    (tmp_path / "rust_kernels" / "reduce.rs.j2").write_text(BODY)
    with pytest.raises(SpecError, match="the prefix 'rust_kernels/' is reserved"):
        program(tmp_path, BODY, spec)


def test_an_edited_template_takes_effect_in_the_same_process(tmp_path):
    first = source(tmp_path, BODY)
    second = source(tmp_path, BODY.replace("+ x_ptr", "* x_ptr"))
    assert first != second and "to_acc() * x_ptr" in second


def test_an_instance_renders_once_until_a_template_changes(tmp_path, monkeypatch):
    """New kernel objects of one instance (each new shape's plans make them) reuse its render; editing a template
    the kernel can read renders it anew, in the same Program."""
    kernel_class = program(tmp_path, BODY)["user_scale"]
    renders = []
    render = codegen._render
    monkeypatch.setattr(codegen, "_render", lambda *a, **k: renders.append(a[0]) or render(*a, **k))
    first = kernel_class(64).source
    assert kernel_class(64).source == first and len(renders) == 2  # the body and the entry point, once
    assert kernel_class(128).source != first and len(renders) == 4
    template = tmp_path / "user_scale.rs.j2"
    template.write_text(BODY.replace("+ x_ptr", "* x_ptr"))  # same size: the modification time tells
    os.utime(template, ns=(template.stat().st_atime_ns, template.stat().st_mtime_ns + 10**9))
    assert "to_acc() * x_ptr" in kernel_class(64).source and len(renders) == 5


def test_templates_see_the_instance(tmp_path):
    text = source(tmp_path, "// {{ dtype }} {{ param }} BLOCK={{ BLOCK }}\n" + BODY)
    assert "// f32 f32 BLOCK=64" in text


@pytest.mark.parametrize(("body", "line"), [("{% if %}\n", 1), (BODY + "{{ missing_name }}\n", 5)])
def test_template_errors_name_the_file_and_line(tmp_path, body, line):
    with pytest.raises(SpecError, match=rf"user_scale\.rs\.j2:{line}: (TemplateSyntaxError|UndefinedError)"):
        source(tmp_path, body)


@pytest.mark.parametrize("name", ["SHARED_MEM_BYTES", "BLOCK_DIM", "ARGS", "GRID_DIM", "ENTRY_POINT_NAME", "ID",
                                  "NAME", "SOURCE", "SPEC", "DTYPE", "KERNEL_SOURCE"])  # fmt: skip
def test_a_const_may_not_replace_a_descriptor_attribute(tmp_path, name):
    spec = SPEC + f'\n[[consts]]\nname = "{name}"\nmax = 4\n'
    with pytest.raises(SpecError, match=rf"const '{name}' would replace the descriptor's attribute"):
        program(tmp_path, BODY, spec)


def test_the_reserved_names_are_every_descriptor_attribute():
    public = {n for n in dir(Kernel) if not n.startswith("_")}
    assert public <= RESERVED_FIELDS
    k = BatchNorm2dNchwBackward(block_hw=32)
    assert {
        n for n in vars(k) if not n.startswith("_") and n not in {c.field for c in k.spec.consts}
    } <= RESERVED_FIELDS


@pytest.mark.parametrize(
    ("const", "message"),
    [
        ('name = "N2"\ntype = "u32"\nmax = 1099511627776', r"max <= 4294967295 \(the range of u32\)"),
        ('name = "N2"\ntype = "i32"\nmin = -3000000000\nmax = 1', r"-2147483648 <= min"),
    ],
)
def test_const_ranges_are_checked_against_their_rust_type(tmp_path, const, message):
    with pytest.raises(SpecError, match=message):
        program(tmp_path, BODY, SPEC + f"\n[[consts]]\n{const}\n")


def test_an_argument_may_not_take_a_precondition_name(tmp_path):
    with pytest.raises(SpecError, match=r"\['DSIZE'\] are reserved for the preconditions"):
        program(tmp_path, BODY, SPEC + '\n[[args]]\nname = "DSIZE"\ntype = "i32"\n')


def test_instances_per_spec_are_bounded(tmp_path):
    consts = "".join(f'\n[[consts]]\nname = "K{i}"\nmin = 0\nmax = 4095\n' for i in range(4))
    with pytest.raises(SpecError, match=r"make up to \d+ instances; at most 65536 per spec"):
        program(tmp_path, BODY, SPEC + consts)


def test_a_precondition_that_cannot_be_evaluated_names_itself(tmp_path):
    spec = SPEC + '\n[[args]]\nname = "M"\ntype = "i32"\n\n[[requires]]\ncheck = "N % M == 0"\nmessage = "whole"\n'
    k = program(tmp_path, BODY, spec).kernel("user_scale", 64)
    with pytest.raises(ArgumentError, match=r"precondition 'N % M == 0' .* cannot be evaluated with .*'M': 0"):
        k.spec.requires[0].holds({"N": 8, "M": 0})


def test_a_program_is_indexed_by_name(tmp_path):
    with pytest.raises(ArgumentError, match="name: expected a kernel name"):
        program(tmp_path)[5]


def test_host_is_a_target_not_an_arch(tmp_path):
    with pytest.raises(ArgumentError, match="arch: 'host' is not a GPU arch"):
        rust_kernels.compile(program(tmp_path).kernel("user_scale", 64), arch="host")


def test_a_cargo_that_builds_nothing_is_a_build_error(tmp_path):
    script = ("import rust_kernels\nfrom rust_kernels.kernels import BatchNorm2dNchwBackward\n"
              "rust_kernels.compile(BatchNorm2dNchwBackward(block_hw=64), target='host')\n")  # fmt: skip
    env = os.environ | {"RUST_KERNELS_CARGO": "/bin/true", "RUST_KERNELS_CACHE_DIR": str(tmp_path)}
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env)
    assert done.returncode == 1
    assert "BuildError: /bin/true reported success but wrote no librk_" in done.stderr


def test_the_package_templates_render_unchanged():
    """The shared templates moved under their prefix; the catalogue's generated source is as it was."""
    assert codegen.environment(None).get_template("rust_kernels/entry_point.rs.j2") is not None
    assert (resources.templates() / "reduce.rs.j2").is_file()
    k = BatchNorm2dNchwBackward(block_hw=256)
    assert "pub unsafe fn batch_norm_2d_nchw_backward<D: Float, const BLOCK_HW: u32>(" in k.kernel_source


def test_one_kernel_protocol_the_emulator_prepares_too(tmp_path):
    import numpy as np

    fn = rust_kernels.compile(program(tmp_path).kernel("user_scale", 64), target="host").get_kernel()
    x, y = np.arange(100, dtype=np.float32), np.zeros(100, np.float32)
    launch = fn.prepare(2, 64, (x, y, 100))  # checked and packed once
    launch()
    assert np.array_equal(y, 2 * x)
    y[:] = 0
    launch()  # again, the same packed arguments
    assert np.array_equal(y, 2 * x)
    with pytest.raises(ArgumentError):
        fn.prepare(2, 64, (x, y))  # checked at prepare: a missing argument


@pytest.mark.skipif(driver.gpu_available()[0], reason="a GPU is present")
def test_without_a_driver_loading_for_the_gpu_is_a_named_error(tmp_path):
    code = rust_kernels.compile(program(tmp_path).kernel("user_scale", 64))
    with pytest.raises(rust_kernels.LaunchError, match=r"no GPU to launch on: .*compile\(kernel, target='host'\)"):
        code.get_kernel(device=0)


def test_a_barrier_reached_by_part_of_the_cta_is_a_launch_error(tmp_path):
    import numpy as np

    body = "if thread::thread_idx_x() < 32 {\n    thread::sync_threads();\n}\n" + BODY
    fn = rust_kernels.compile(program(tmp_path, body).kernel("user_scale", 64), target="host").get_kernel()
    x, y = np.arange(64, dtype=np.float32), np.zeros(64, np.float32)
    with pytest.raises(rust_kernels.LaunchError, match=r"a barrier \(sync_threads\) reached by 32 of the 64 threads"):
        fn.launch(1, 64, (x, y, 64))


WIDEN = """let p = thread::index_1d() as usize;
if p < N as usize {
    let v = x_ptr.cast::<D::Pack>().load(p);
    let mut out = v;
    pack::unroll(<D::Pack as Lanes>::LANES, |l| {
        out.set_lane(l, D::from_acc(D::lane_acc(&v, l) * D::Acc::from_f32(2.0) + D::Acc::from_usize(l)))
    });
    y_ptr.cast::<D::Pack>().store(p, out);
}
"""


@pytest.mark.parametrize("dtype", ["f32", "bf16", "f16"])
def test_a_body_reaches_the_documented_pack_helpers(tmp_path, dtype):
    """docs/spec.md lists `pack::unroll` and `Float::lane_acc` among what a body sees (the prelude lacked `pack`):
    a kernel widening each of N 16-byte packs lane by lane with them runs in the emulator, bf16's one-instruction
    widening included."""
    spec = SPEC.replace('dtypes = ["f32"]', 'dtypes = ["f32", "bf16", "f16"]')
    kernel = program(tmp_path, WIDEN, spec).kernel("user_scale", 64, dtype=dtype)
    storage = DTYPES[dtype].numpy_dtype()
    lanes, packs = 16 // storage.itemsize, 5
    x = np.random.default_rng(0).integers(-64, 64, packs * lanes).astype(storage)
    y = np.zeros_like(x)
    rust_kernels.compile(kernel, target="host").get_kernel().launch(1, 64, (x, y, packs))
    want = 2 * x.astype(np.float64) + np.tile(np.arange(lanes), packs)
    np.testing.assert_array_equal(y.astype(np.float64), want)
