"""The PTX check for aligned barriers that a warp may reach at different instructions (barriers.py): on hand-written
PTX in LLVM's form, and end to end, where a user kernel with such a barrier fails its build (the emulator runs it)."""

from pathlib import Path

import numpy as np
import pytest

import rust_kernels
import test_authoring_safety  # its user kernel's spec
from rust_kernels import BuildError
from rust_kernels.barriers import Hazard, divergent_barriers

HEAD = """.version 8.7
.target sm_90
.address_size 64

.visible .entry k(
	.param .u64 k_param_0
)
{
	.reg .pred 	%p<8>;
	.reg .b32 	%r<16>;
	.reg .b64 	%rd<8>;

	ld.param.u64 	%rd1, [k_param_0];
"""


def ptx(body: str) -> str:
    return HEAD + body + "}\n"


def lines(text: str, needle: str) -> list[int]:
    return [n for n, line in enumerate(text.splitlines(), 1) if needle in line]


# A copy of the barrier on each side of a branch on the lane (LLVM's duplication): the hazard.
COPIES = """	mov.u32 	%r1, %tid.x;
	and.b32 	%r2, %r1, 31;
	setp.lt.u32 	%p1, %r2, {bound};
	@%p1 bra 	$L__BB0_2;
// %bb.1:
	bar.sync 	0;
	bra.uni 	$L__BB0_3;
$L__BB0_2:
	st.global.u32 	[%rd1], %r2;
	bar.sync 	0;
	ld.global.u32 	%r3, [%rd1];
$L__BB0_3:
	ret;
"""


def test_a_barrier_copied_into_both_sides_of_a_lane_branch_is_found():
    text = ptx(COPIES.format(bound=4))
    branch = lines(text, "@%p1 bra")[0]
    assert divergent_barriers(text) == [Hazard(branch, n, "bar.sync \t0;") for n in lines(text, "bar.sync")]


@pytest.mark.parametrize(
    "condition",
    [
        "mov.u32 \t%r2, %ctaid.x;",  # the same across the CTA
        "mov.u32 \t%r1, %tid.x;\n\tshr.u32 \t%r2, %r1, 5;",  # the warp's index
        "mov.u32 \t%r1, %tid.x;\n\tdiv.u32 \t%r2, %r1, 64;",
        "ld.param.u32 \t%r2, [k_param_0];",
    ],
)
def test_copies_under_a_branch_equal_across_the_warp_are_not(condition):
    body = COPIES.format(bound=4).replace("\tmov.u32 \t%r1, %tid.x;\n\tand.b32 \t%r2, %r1, 31;", "\t" + condition)
    assert condition in body
    assert divergent_barriers(ptx(body)) == []


@pytest.mark.parametrize(
    ("compare", "found"),
    [
        ("setp.lt.u32 \t%p1, %r2, 32;", False),  # tid / 32 < 1, as LLVM writes it: a warp's lanes all agree
        ("setp.ge.u32 \t%p1, %r2, 64;", False),
        ("setp.gt.u32 \t%p1, %r2, 95;", False),
        ("setp.lt.u32 \t%p1, %r2, 16;", True),  # half a warp
        ("setp.gt.u32 \t%p1, %r2, 32;", True),
        ("setp.eq.u32 \t%p1, %r2, 0;", True),
    ],
)
def test_a_tid_compared_with_a_warp_boundary_is_equal_across_the_warp(compare, found):
    body = COPIES.format(bound=4).replace("\tand.b32 \t%r2, %r1, 31;\n\tsetp.lt.u32 \t%p1, %r2, 4;",
                                          "\tmov.u32 \t%r2, %r1;\n\t" + compare)  # fmt: skip
    assert compare in body
    assert bool(divergent_barriers(ptx(body))) == found


@pytest.mark.parametrize(("block_x", "found"), [(None, True), (32, False), (64, False), (48, True), (16, True)])
def test_a_tid_y_is_equal_across_a_warp_only_where_the_ctas_x_extent_is_whole_warps(block_x, found):
    """A CTA of (32 k, rows): warp w holds threads x = 0..31 of one row, so a branch on tid.y (a row's bounds)
    keeps each warp together; with x = 48 a warp spans two rows."""
    body = COPIES.format(bound=4).replace("\tmov.u32 \t%r1, %tid.x;\n\tand.b32 \t%r2, %r1, 31;",
                                          "\tmov.u32 \t%r2, %tid.y;")  # fmt: skip
    assert "%tid.y" in body
    assert bool(divergent_barriers(ptx(body), block_x)) is found


def test_a_barrier_where_the_lane_branch_has_joined_again_is_not():
    body = """	mov.u32 	%r1, %tid.x;
	setp.lt.u32 	%p1, %r1, 4;
	@%p1 bra 	$L__BB0_2;
	bra.uni 	$L__BB0_3;
$L__BB0_2:
	st.global.u32 	[%rd1], %r1;
$L__BB0_3:
	bar.sync 	0;
	ret;
"""
    assert divergent_barriers(ptx(body)) == []


def test_a_failed_check_on_the_lane_does_not_count_as_a_path():
    """The bounds check's panic (a call, then exit) aborts the launch: the barrier after it is met by every thread
    that goes on."""
    body = """	mov.u32 	%r1, %tid.x;
	setp.ge.u32 	%p1, %r1, 100;
	@%p1 bra 	$L__BB0_2;
	st.global.u32 	[%rd1], %r1;
	bar.sync 	0;
	ret;
$L__BB0_2:
	{ // callseq 0, 0
	call.uni _RNvNtCs_4core9panicking5panic, ();
	} // callseq 0
	// begin inline asm
	exit;
	// end inline asm
"""
    assert divergent_barriers(ptx(body)) == []


@pytest.mark.parametrize(
    ("asm", "found"),
    [
        ("{ .reg .pred p; shfl.sync.bfly.b32 %r2|p, %r9, 16, 31, -1; selp.u32 %r3, 1, 0, p; }", True),
        ("{ .reg .pred p, q; setp.ne.u32 p, %r1, 0; bar.red.or.pred q, 0, p; selp.u32 %r2, 1, 0, q; }", False),
    ],
)
def test_a_shuffles_result_differs_between_lanes_and_a_bar_reds_does_not(asm, found):
    body = COPIES.format(bound=4).replace("\tand.b32 \t%r2, %r1, 31;", "\t// begin inline asm\n\t" + asm)
    assert bool(divergent_barriers(ptx(body))) is found


BODY = """let tid = thread::thread_idx_x() as usize;
let i = thread::index_1d() as usize;
if tid % 32 < 4 {
    y_ptr.store(i, x_ptr.load(i));
    thread::sync_threads();
    y_ptr.store(i, D::from_acc(x_ptr.load(i).to_acc() * x_ptr.load(i).to_acc()));
} else {
    thread::sync_threads();
    y_ptr.store(i, D::from_acc(x_ptr.load(i).to_acc() + x_ptr.load(i).to_acc()));
}
"""


def test_a_user_kernel_with_such_a_barrier_fails_its_build_and_passes_the_emulator(fresh_cache: Path, tmp_path):
    kernel = test_authoring_safety.program(tmp_path, BODY).kernel("user_scale", 64)
    x = np.arange(64, dtype=np.float32)
    y = np.zeros(64, np.float32)
    rust_kernels.compile(kernel, target="host").get_kernel().launch(1, 64, (x, y, 64))  # it counts arrivals: passes
    expected = np.where(np.arange(64) % 32 < 4, x * x, x + x)
    np.testing.assert_array_equal(y, expected)
    with pytest.raises(BuildError, match=r"aligned barrier, `bar\.sync.*lane-dependent condition.*tid / 32") as info:
        rust_kernels.compile(kernel, arch="sm_90")
    assert kernel.id in str(info.value)
    assert (fresh_cache / "build").is_dir()
