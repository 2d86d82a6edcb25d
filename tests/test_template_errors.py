"""rustc's errors in template terms: each generated line it points at is traced to the template file and line that
produced it (a kernel's own template, one it includes, the package's shared ones), or to none rather than a wrong
one. The generated crate itself carries no trace of this."""

import re
from pathlib import Path

import pytest

import rust_kernels
import test_authoring_safety  # its user kernel's spec
from rust_kernels import BuildError, builder, codegen, resources
from rust_kernels.kernels import CATALOGUE, Kernel

SPEC = test_authoring_safety.SPEC.replace("user_scale", "traced").replace("y = x * 2", "y = x")
# Loops, conditions, a comment, an import and an include before the faulty lines, so that generated and template
# line numbers differ.
BODY = """{%- from "rust_kernels/reduce.rs.j2" import warp_sum -%}
{# the unrolled
   prelude #}
let i = thread::index_1d() as usize;
{% for k in range(3) %}
let _k{{ k }} = {{ k }} * BLOCK;
{% endfor %}
{%- if BLOCK > 32 %}
{% include "prelude.rs.j2" %}
{% endif %}
if i < N as usize {
    let bad: u32 = 1.5;
    y_ptr.store(i, x_ptr.load(i));
}
"""
BAD_LINE = 12  # of BODY
PRELUDE = """// prelude
let _wide: i32 = "wide";
"""


def kernel(directory: Path, body: str = BODY) -> Kernel:
    (directory / "traced.toml").write_text(SPEC)
    (directory / "traced.rs.j2").write_text(body)
    (directory / "prelude.rs.j2").write_text(PRELUDE)
    return rust_kernels.Program(directory).kernel("traced", 64)


def build_error(k: Kernel) -> str:
    with pytest.raises(BuildError) as info:
        rust_kernels.compile(k, target="host")
    return str(info.value)


def generated_line(message: str, text: str) -> int:
    """The generated line, among those the message points at, that reads `text`."""
    return next(
        n for n in map(int, re.findall(r"generated \S*lib\.rs, line (\d+):", message)) if f"{n:5} | {text}\n" in message
    )


def test_a_rustc_error_names_the_template_and_the_included_line(fresh_cache, tmp_path):
    message = build_error(kernel(tmp_path))
    assert generated_line(message, "        let bad: u32 = 1.5;") != BAD_LINE  # the mapping is not the identity
    assert (
        f"from template {tmp_path / 'traced.rs.j2'}, line {BAD_LINE}:\n{BAD_LINE:5} |     let bad: u32 = 1.5;"
        in message
    )
    assert f'from template {tmp_path / "prelude.rs.j2"}, line 2:\n    2 | let _wide: i32 = "wide";' in message
    lib = next((fresh_cache / "build").glob("*/lib.rs"))  # the crate cargo compiled, as rendered after the trace
    assert lib.read_text() == codegen.crate_files(kernel(tmp_path), lib.parent.name, "host")["lib.rs"]
    assert not any(c >= "\U000f0000" for c in lib.read_text()), "no marker reaches the crate"


def test_an_error_in_a_shared_template_line_names_it(fresh_cache, tmp_path):
    """The package's reduction, handed an accumulator that does not exist: rustc points at the macro's lines."""
    body = BODY.replace("let bad: u32 = 1.5;", "{{ warp_sum(['missing']) | indent(4) }}")
    message = build_error(kernel(tmp_path, body))
    reduce = resources.templates() / "reduce.rs.j2"
    line = next(n for n, text in enumerate(reduce.read_text().splitlines(), 1) if "warp_shuffle_xor(" in text)
    assert f"from template {reduce}, line {line}:\n{line:5} |     {{{{ n }}}} += warp::warp_shuffle_xor(" in message
    call = f"called from template {tmp_path / 'traced.rs.j2'}, line {BAD_LINE}:\n{BAD_LINE:5} |     {{{{ warp_sum("
    assert call in message  # the user's line that expanded it
    assert f"from template {tmp_path / 'prelude.rs.j2'}, line 2:" in message


def test_a_template_that_inspects_its_own_output_is_not_traced(tmp_path):
    """The marked render takes another branch here: no line is claimed rather than a wrong one."""
    body = BODY.replace("{%- if BLOCK > 32 %}", '{% set probe %}x{% endset %}{%- if probe == "x" %}')
    k = kernel(tmp_path, body)
    crate = tmp_path / "rk_crate"
    crate.mkdir()
    lib = codegen.crate_files(k, crate.name, "host")["lib.rs"]
    (crate / "lib.rs").write_text(lib)
    assert codegen.template_lines(k, crate.name, "host", lib) is None
    line = lib.split("\n").index("        let bad: u32 = 1.5;") + 1
    message = builder._explain(f"error[E0308]: mismatched types\n --> lib.rs:{line}:20\n", crate, k, "host")
    assert f"generated {crate / 'lib.rs'}, line {line}:" in message
    assert "from template" not in message and "could not be traced back to their templates" in message


def test_expressions_map_to_their_line(tmp_path):
    body = BODY.replace("let bad: u32 = 1.5;", '{{ "let a = 1;\\n    let b = 2;" }}')
    k = kernel(tmp_path, body)
    lib = codegen.crate_files(k, "rk_x", "ptx")["lib.rs"]
    origins = codegen.template_lines(k, "rk_x", "ptx", lib)
    lines = lib.split("\n")
    for text in ("let a = 1;", "let b = 2;"):
        where = origins[lines.index(f"        {text}")]
        assert (Path(where.at.filename).name, where.at.line, where.calls) == ("traced.rs.j2", BAD_LINE, ())


@pytest.mark.parametrize("cls", CATALOGUE.values(), ids=CATALOGUE.keys())
def test_every_catalogue_line_is_traced(cls):
    k = cls(*(c.values()[-1] for c in cls.spec.consts), dtype=cls.spec.dtypes[-1])
    for target in ("ptx", "host"):
        lib = codegen.crate_files(k, "rk_x", target)["lib.rs"]
        origins = codegen.template_lines(k, "rk_x", target, lib)
        assert origins is not None
        untraced = [text for text, where in zip(lib.split("\n"), origins, strict=True) if text.strip() and not where]
        assert not untraced
