"""BatchNorm2d in training mode (batch statistics), NCHW and channels_last: the launch plans of the forward and the
backward, each two launches.

Forward: batch_norm_2d_batch_stats (per channel mean and invstd, saved, and the running statistics updated; it
reads x once) then batch_norm_2d_normalize (reads x, writes y): 3 passes over the activations. Backward:
batch_norm_2d_backward_reduce (sum dy and sum dy * (x - mean), giving dweight and dbias; reads dy and x) then
batch_norm_2d_backward_elementwise (reads dy and x, writes dx): 5 passes. The reductions split each channel (NCHW)
or block of channels (channels_last) over several CTAs until the GPU is full, each keeping enough work; their
partial statistics merge in a fixed order, so every result is bit-identical run to run.

NCHW reductions may also take groups of adjacent channels a CTA (GROUPS: their rows lie together in each image),
where rows are short: autotuner candidates.

Where an NCHW channel's data is small, one launch does each direction instead (batch_norm_2d_fused_forward and
batch_norm_2d_fused_backward: a CTA per channel, its second read served by L2): half the launches, and no pass over DRAM
for the second read. channels_last has its own one-launch kernels (batch_norm_2d_fused_forward_channels_last,
batch_norm_2d_fused_backward_channels_last: a CTA per block of COLS channel units, walking every row), where such a
block's data is small; and persistent ones (batch_norm_2d_persistent_forward_channels_last and _backward_: one
cooperative launch whose CTAs hold every row in registers across a grid::sync, reading x, or dy and x, once), where the
whole tensor fits the grid's registers: autotuner candidates unless RUST_KERNELS_PERSISTENT=0 (on the H200 the fastest
plan on 28-50 of the 176 suite keys they fit, per direction and dtype, by up to 1.35x forward and 1.51x backward:
docs/results/h200-2026-12-06-persistent-tune/); and cooperative ones (batch_norm_2d_cooperative_*: the persistent
kernels' exchange, each CTA walking its rows twice, the second time from L2), where what a direction reads twice fits
COOPERATIVE_BYTES: autotuner candidates under the same switch, and the rule's on channels_last tensors from
COOPERATIVE_RULE_BYTES while that read fits COOPERATIVE_RULE_READ (cooperative_rule). Where an NCHW channel holds at
most WARP_VALUES values (batch 1 at 7x7 to 14x14, tiny maps), a warp per channel holds them in registers
(batch_norm_2d_warp_forward and _backward): x, or dy and x, read once, shuffles but no barriers; channels_last has
its own (batch_norm_2d_warp_*_channels_last: a lane's values at stride C), candidates up to WARP_ROWS_VALUES values
a channel and the rule's on small tensors (WARP_CHANNELS_LAST_RULE). Past BLOCK_MIN_VALUES,
up to BLOCK_VALUES values, a CTA per channel holds them (batch_norm_2d_block_forward and _backward: batch 1 at 14x14 to
56x56, batch 32 at 7x7 and 8x8): autotuner candidates, and the rule's up to BLOCK_RULE_VALUES, unless
RUST_KERNELS_BLOCK=0 (the shipped H200 table has not timed them: on the keys it serves they are left out,
tuning.newer_than_table)."""

from __future__ import annotations

import math
from functools import cache
from typing import Any

from rust_kernels.config import settings
from rust_kernels.dtypes import DTYPES
from rust_kernels.families.batch_norm import common
from rust_kernels.kernels import (  # type: ignore[attr-defined]
    BatchNorm2dBackwardElementwise,
    BatchNorm2dBackwardElementwiseAct,
    BatchNorm2dBackwardReduce,
    BatchNorm2dBackwardReduceAct,
    BatchNorm2dBatchStats,
    BatchNorm2dBlockBackward,
    BatchNorm2dBlockBackwardAct,
    BatchNorm2dBlockForward,
    BatchNorm2dBlockForwardAct,
    BatchNorm2dCooperativeBackwardChannelsLast,
    BatchNorm2dCooperativeBackwardChannelsLastAct,
    BatchNorm2dCooperativeForwardChannelsLast,
    BatchNorm2dCooperativeForwardChannelsLastAct,
    BatchNorm2dFusedBackward,
    BatchNorm2dFusedBackwardAct,
    BatchNorm2dFusedBackwardChannelsLast,
    BatchNorm2dFusedBackwardChannelsLastAct,
    BatchNorm2dFusedForward,
    BatchNorm2dFusedForwardAct,
    BatchNorm2dFusedForwardChannelsLast,
    BatchNorm2dFusedForwardChannelsLastAct,
    BatchNorm2dNormalize,
    BatchNorm2dNormalizeAct,
    BatchNorm2dPersistentBackwardChannelsLast,
    BatchNorm2dPersistentBackwardChannelsLastAct,
    BatchNorm2dPersistentForwardChannelsLast,
    BatchNorm2dPersistentForwardChannelsLastAct,
    BatchNorm2dWarpBackward,
    BatchNorm2dWarpBackwardAct,
    BatchNorm2dWarpBackwardChannelsLast,
    BatchNorm2dWarpBackwardChannelsLastAct,
    BatchNorm2dWarpForward,
    BatchNorm2dWarpForwardAct,
    BatchNorm2dWarpForwardChannelsLast,
    BatchNorm2dWarpForwardChannelsLastAct,
    Kernel,
)
from rust_kernels.runtime import Placement, Plan, Problem, Workspace

# The one-launch kernels (by direction, with an activation fused or not), NCHW and channels_last.
FUSED = {("forward", False): BatchNorm2dFusedForward, ("forward", True): BatchNorm2dFusedForwardAct,
         ("backward", False): BatchNorm2dFusedBackward, ("backward", True): BatchNorm2dFusedBackwardAct}  # fmt: skip
FUSED_COLUMNS = {("forward", False): BatchNorm2dFusedForwardChannelsLast,
                 ("forward", True): BatchNorm2dFusedForwardChannelsLastAct,
                 ("backward", False): BatchNorm2dFusedBackwardChannelsLast,
                 ("backward", True): BatchNorm2dFusedBackwardChannelsLastAct}  # fmt: skip
PERSISTENT = {("forward", False): BatchNorm2dPersistentForwardChannelsLast,
              ("forward", True): BatchNorm2dPersistentForwardChannelsLastAct,
              ("backward", False): BatchNorm2dPersistentBackwardChannelsLast,
              ("backward", True): BatchNorm2dPersistentBackwardChannelsLastAct}  # fmt: skip
COOPERATIVE = {("forward", False): BatchNorm2dCooperativeForwardChannelsLast,
               ("forward", True): BatchNorm2dCooperativeForwardChannelsLastAct,
               ("backward", False): BatchNorm2dCooperativeBackwardChannelsLast,
               ("backward", True): BatchNorm2dCooperativeBackwardChannelsLastAct}  # fmt: skip
WARP = {("forward", False): BatchNorm2dWarpForward, ("forward", True): BatchNorm2dWarpForwardAct,
        ("backward", False): BatchNorm2dWarpBackward, ("backward", True): BatchNorm2dWarpBackwardAct}  # fmt: skip
WARP_CHANNELS_LAST = {("forward", False): BatchNorm2dWarpForwardChannelsLast,
                      ("forward", True): BatchNorm2dWarpForwardChannelsLastAct,
                      ("backward", False): BatchNorm2dWarpBackwardChannelsLast,
                      ("backward", True): BatchNorm2dWarpBackwardChannelsLastAct}  # fmt: skip
BLOCK = {("forward", False): BatchNorm2dBlockForward, ("forward", True): BatchNorm2dBlockForwardAct,
         ("backward", False): BatchNorm2dBlockBackward, ("backward", True): BatchNorm2dBlockBackwardAct}  # fmt: skip
ONE_LAUNCH = (*FUSED.items(), *FUSED_COLUMNS.items(), *PERSISTENT.items(), *COOPERATIVE.items(), *WARP.items(),
              *WARP_CHANNELS_LAST.items(), *BLOCK.items())  # fmt: skip
FORWARD_KERNELS = (BatchNorm2dBatchStats, BatchNorm2dNormalize, BatchNorm2dNormalizeAct,
                   *(k for (which, _), k in ONE_LAUNCH if which == "forward"))  # fmt: skip
BACKWARD_KERNELS = (BatchNorm2dBackwardReduce, BatchNorm2dBackwardElementwise, BatchNorm2dBackwardReduceAct,
                    BatchNorm2dBackwardElementwiseAct,
                    *(k for (which, _), k in ONE_LAUNCH if which == "backward"))  # fmt: skip
# The activations fused after the normalisation (the *_act kernels' ACTIVATION const); 0: none (the plain kernels).
ACTIVATIONS = {"relu": 1, "silu": 2, "relu6": 3, "hardswish": 4}
MAX_SPLIT = 256
# The reductions' CTAs resident per SM (256 threads of at most 80 registers, as ptxas builds them for sm_90).
WAVE_CTAS = 3
# The reductions' CTA size (measured on the H200: 256 was best or within a few percent of 128 on every shape of a
# sweep, so 128 is not built: half the instances).
REDUCTION_BLOCK = 256
# A reducing CTA that gets less than this many units (elements or packs) per thread pays more for its merges than
# it streams.
MIN_UNITS_PER_THREAD = 8
# channels_last: threads of a CTA along a row's units, enough for ROW_BYTES of it (whole 32-byte sectors); the rest
# walk rows. Few columns per CTA give many column blocks, so the slices that each block's last CTA merges stay few.
# Measured on the H200 (a sweep of cols x split x block, bf16, three shapes): 128 bytes (8 columns of 16-byte packs)
# was best or within 2% of it, 5-10% ahead of 64.
ROW_BYTES = 128
MAX_COLS = 32
ELEMENTWISE_BLOCK = 256
WAVES = 4  # the elementwise grid: at most this many waves of full SMs, each thread then strides on
COLUMN_UNITS = 16
FLAT = 3  # the NCHW elementwise kernels' VECTORIZED mode: 16-byte packs over the flat tensor, spanning channels
# The NCHW reductions' VECTORIZED mode over groups of COLS adjacent channels, whose rows lie together in each image:
# short rows (7x7) read channel by channel share their end sectors with the next channel's. The autotuner times them
# where rows are shorter than GROUP_ROW_BYTES: on the H200 (docs/results/h200-2026-12-04-groups) they won on bf16
# 7x7 and 3x3 rows of large tensors (forward 1.18-1.32x) and lost on 14x14 and 28x28 rows (0.46-0.77x).
GROUPS = 4
GROUP_ROW_BYTES = 128
# ... and the forward rule's, from these bytes of x on, where a pack fits no row (7x7: the one-launch kernels, where
# the rule would take them, then read 2-byte elements one at a time) but 16-byte packs fit groups of channels. From
# the shipped H200 table's timings (docs/results/h100-2026-12-07-cl-coefs/groups_rule.txt, training bf16 7x7 at
# B = 128): 1.26-2.40x faster than the one-launch kernel from 5.5 MB of x (1.03x at 4 MB); on an H100 1.25-2.20x
# (docs/results/h100-2026-12-07-rules/).
GROUPS_RULE_BYTES = 5 << 20
# The backward rule's masked-pack reductions (FLAT, at their own split; unpacked_rows) from these bytes of 16-bit x
# on, where the elementwise launch takes FLAT (no pack divides H*W): dy and x both read in 16-byte packs. From the
# shipped H200 table (docs/results/h100-2026-12-07-rules/rule_changes.txt, the suite's 44 bf16 keys from 5 MiB): 1.16x
# faster than the rule's plan before at the median (0.94-1.76x; with ReLU fused 1.18x), the grouped reductions
# included (1.09x); on an H100 (22 bf16 7x7 shapes at B = 128) 1.00-1.39x. The forward's statistics gain nothing so
# (0.57-1.0x).
FLAT_RULE_BYTES = 5 << 20
# The one-launch kernels read 16-bit rows that no pack divides one element at a time, where the two-launch plans'
# elementwise launch takes FLAT: the rule leaves them from these bytes of x on. From the shipped H200 table
# (docs/results/h100-2026-12-07-rules/rule_changes.txt: bf16 7x7, 9x9 and 17x17 rows): the two-launch plans 1.08-1.27x
# faster from 2.8 to 3.8 MiB and 1.47-2.07x at 6.8 and 40.5 MiB; up to 2.3 MiB the one-launch kernels as fast or up
# to 1.6x faster. On an H100 (the same five shapes, both directions, with and without ReLU) 1.10-1.96x.
FUSED_UNPACKED_BYTES = 5 << 19
# The one-launch kernels where a channel's activations take at most this many bytes (scaled down by C / SMs where the
# channels do not fill the GPU: each CTA then streams more of the tensor): L2 keeps them for the second read, and one
# CTA's threads keep enough loads in flight. Their CTA: the largest of FUSED_BLOCKS giving each thread 4 units (small
# CTAs for small channels: more of them resident at once).
FUSED_CHANNEL_BYTES = 64 << 10
FUSED_BLOCKS = (128, 256, 512)
# channels_last tensors this small are candidates for the one-launch kernels at every block width, however few blocks
# (CTAs) that gives: the two-launch plans' reductions take 9-14 us whatever the bytes on the H200 (ncu, 12-05: 78 KB
# to 5 MB of x), a latency that one launch of a few CTAs, each reading its block twice (the second time from L2),
# may undercut.
SMALL_TENSOR_BYTES = 8 << 20
# A channels_last column block this small is the rule's in one launch (the narrowest width: the most CTAs) however few
# blocks that gives: one CTA walking its block twice beats the two launches' fixed latency. Measured on the H200
# (12-05, the forced tune of 217 small suite shapes, against the rule's two-launch plan): blocks of 8-16 KB were 1.19x
# faster at the median (worst 1.00x, 60 key-directions), 16-32 KB 1.08x (worst 0.94x, 75), 32-64 KB 0.87x slower.
SMALL_BLOCK_BYTES = 32 << 10
# The persistent kernels' rows a thread holds (UNITS): ptxas gives their 256-thread CTAs at bf16 98-118 registers at 2-4
# (two CTAs an SM) and 184-210 at 8 (one). Their grids at most PERSISTENT_CTAS_PER_SM CTAs an SM: a larger grid may
# not be resident at once (the GPU launch refuses it, and the autotuner drops the candidate).
PERSISTENT_UNITS = (2, 4, 8)
PERSISTENT_CTAS_PER_SM = 2
# The cooperative kernels (the persistent ones' exchange, each CTA walking its slice's rows twice): autotuner
# candidates where what a direction reads twice (x; dy and x) is at most COOPERATIVE_BYTES, so that the second read
# finds it in L2 (50 MB on the H100 and H200), at grids of COOPERATIVE_CTAS_PER_SM CTAs an SM (the GPU launch refuses
# one that is not resident at once, and the autotuner drops it), each thread walking at least COOPERATIVE_ROWS rows (a
# full GPU before long walks: these shapes' two-launch plans are bound by latency, not by the merges). On an H100
# (docs/results/h100-2026-12-07-e2e/, bf16 backward) they won at 38.5 MB of dy and x (1.04x the best other plan) and
# lost at 48 MB (0.89x); at 25.7 MB they won or lost by shape (1.17x, 0.93x).
COOPERATIVE_BYTES = 40 << 20
COOPERATIVE_CTAS_PER_SM = (2, 3)
COOPERATIVE_ROWS = 2
# The rule takes them from COOPERATIVE_RULE_BYTES of channels_last x on (where no one-launch column plan is), column
# blocks of up to COOPERATIVE_RULE_CHANNELS channels at two CTAs an SM. Measured on an H100
# (docs/results/h100-2026-12-06-cooperative/, 16 shapes of 1.6-26 MB of x, bf16 and f32): on the 33 key-directions
# where the rule changed, its plan 1.02-1.55x faster than the two-launch plan it took before (median 1.23x); the
# fastest cooperative grids took blocks of 32 channels (64 in bf16 at C = 1024, 8% faster there).
COOPERATIVE_RULE_BYTES = 1 << 20
COOPERATIVE_RULE_CHANNELS = 32
COOPERATIVE_RULE_READ = 24 << 20  # the rule's bound on a direction's second read: where they won on every shape timed
# A row (H * W) narrower than a 32-byte sector reads mostly unused bytes channel by channel (H * W = 1: strided).
MIN_FUSED_ROW_BYTES = 32
# The warp kernels: the rule's for channels of at most WARP_RULE_VALUES values, or of at most WARP_ROWS_VALUES where
# rows are too short for the NCHW one-launch kernels (fusable); the autotuner's up to WARP_VALUES, or WARP_ROWS_VALUES
# there. Measured on an H100 (docs/results/h100-2026-12-06-warp/), forward + backward: batch 1 at 7x7 and 8x8
# 1.1-3.0x faster than the CTA-a-channel kernels, 128x2560x2x2 1.6-2.2x faster than the two-launch plan; batch 1 at
# 14x14 (196 values) 0.91-1.30x; from 289 values on, rows of a sector or more, 0.43-0.99x (a warp per channel leaves
# the GPU idle where channels are few, each warp walking dozens of values in turn). UNITS up to 16: ptxas gives them
# at most 146 registers a thread (f64 through SiLU's gradient), none spilled.
WARP_RULE_VALUES = 64
WARP_VALUES = 256
WARP_ROWS_VALUES = 512
# The channels_last warp kernels (a lane's values at stride C, uncoalesced; no barriers): the rule's, by direction,
# for channels of at most these many values (B * H * W) in x of under these many bytes. Measured on an H100 against
# every other candidate (docs/results/h100-2026-12-07-cl-warp/: 30 shapes of 49 to 512 values a channel, plain and
# ReLU, f32 and bf16): the forward 1.00-1.66x the best other plan's speed (median 1.3x) below 1 MiB of x, 0.85-0.89x
# at 1 MiB (16x1024x4x4 f32); the backward, reading dy and x so, 1.00-1.51x below 256 KiB at up to 256 values a
# channel, 0.76-1.05x from 256 KiB, 0.91-0.95x (f32) at 289 to 512 values. Past them the column kernels' coalesced
# reads win.
WARP_CHANNELS_LAST_RULE = {"forward": (WARP_ROWS_VALUES, 1 << 20), "backward": (WARP_VALUES, 256 << 10)}
# The block kernels (a CTA per NCHW channel, held in registers: x, or dy and x, read once; two barriers forward, one
# backward): autotuner candidates for channels of more than BLOCK_MIN_VALUES up to BLOCK_VALUES values, at each CTA
# size of BLOCK_SIZES with the fewest values a thread (2 to 16) that hold the channel. BLOCK_VALUES: a CTA's registers
# (the spec's BLOCK * UNITS <= 4096).
BLOCK_SIZES = (128, 256, 512)
BLOCK_MIN_VALUES = 128
BLOCK_VALUES = 4096
# The rule takes them up to BLOCK_RULE_VALUES, at the smaller CTA of 128 and 256 threads holding the channel at most 8
# values a thread. Measured on an H100 (docs/results/h100-2026-12-06-block/), forward + backward: the best block pair
# 1.18x (bf16) and 1.15x (f32) faster than the best plan of another kind at the median of 16 shapes of 196-3 136
# values (batch 1 at 14x14 to 56x56, batch 8 at 14x14, batch 32 at 7x7 and 8x8, batch 64 at 3x3 and 7x7); this
# choice of CTA within 1.17x of the best block plan on every key-direction up to 2 048 values; past them bf16's
# backward at 16 values a thread (121 registers) lost by up to 1.3x.
BLOCK_RULE_VALUES = 2048
# H*W = 1 from this size of x on: the channels_last two-launch plan is the rule's where no one-launch plan is (and
# the add + ReLU forward's), which reads rows of C coalesced (H100, 12-06: 1.5-3.8x faster than the NCHW rule's at
# 64 KiB to 16 MiB; at 32x512 f32 8% slower). Smaller tensors at H*W = 1 take the channels_last one-launch kernels
# (columns_rule): forward + backward 1.2-1.5x faster than either two-launch plan (H100, 12-06, 32 KiB to 16 MiB).
NHWC_MIN_BYTES = 64 << 10


def lanes(vectorized: int, dtype: str) -> int:
    return common.unit_elements(vectorized, dtype)


def vector_mode(shape: common.Shape4, dtype: str, alignment: int, channels_last: bool) -> int:
    """The widest pack dividing the contiguous run (H*W for NCHW, C for channels_last) and the alignment."""
    return common.vector_mode(shape[1] if channels_last else shape[2] * shape[3], dtype, alignment)


def elementwise_mode(shape: common.Shape4, dtype: str, alignment: int, channels_last: bool) -> int:
    """The elementwise launches' pack mode: vector_mode's, else for NCHW rows that no pack divides FLAT (16-byte packs
    over the tensor as one stream) where such packs tile it and H*W holds one (a pack then spans at most two
    channels). Measured on the H200 (bf16, 35x35 and 149x149 rows): one element at a time, these launches ran at half
    the bandwidth of torch.compile's."""
    mode = vector_mode(shape, dtype, alignment, channels_last)
    return FLAT if not (mode or channels_last or alignment % 16) and flat_fits(shape, dtype) else mode


def flat_fits(shape: common.Shape4, dtype: str) -> bool:
    """Whether FLAT can run this NCHW shape where no pack divides H*W: 16-byte packs of 2+ lanes tile the tensor and
    H*W holds one."""
    hw, packed = shape[2] * shape[3], lanes(FLAT, dtype)
    return packed >= 2 and hw % packed != 0 and hw >= packed and math.prod(shape) % packed == 0


def group_width(shape: common.Shape4, dtype: str) -> int | None:
    """Channels a CTA of the GROUPS reductions takes: the widest power of two (up to C's) whose rows are whole
    16-byte packs and at most a CTA's threads of them, where H*W holds a pack (a pack then spans at most two channels)
    and C*H*W is whole packs (every image's groups aligned); None where none of 2+ channels fits."""
    hw, packed = shape[2] * shape[3], lanes(GROUPS, dtype)
    if packed < 2 or hw < packed or shape[1] * hw % packed:
        return None
    fitting = [g for g in (2 << k for k in range(8))
               if g * hw % packed == 0 and g * hw // packed <= REDUCTION_BLOCK and g // 2 < shape[1]]  # fmt: skip
    return max(fitting, default=None)


def geometry(shape: common.Shape4, dtype: str, vectorized: int, channels_last: bool, sms: int
             ) -> tuple[int, int, int]:  # fmt: skip
    """(grid x, split, cols) of a reduction: NCHW a CTA per channel (or per slice of one), or with GROUPS per group
    of COLS channels (group_width); channels_last COLS threads along a row's units (a power of two up to MAX_COLS
    covering them where it can), column blocks of them. Slices double while the grid is below two CTAs per SM and
    each CTA keeps MIN_UNITS_PER_THREAD units per thread."""
    batches, channels, height, width = shape
    rows = batches * height * width
    if vectorized == GROUPS:
        cols = group_width(shape, dtype) or 1
        grid_x = -(-channels // cols)
        units = batches * cols * height * width // lanes(vectorized, dtype)  # per group
    elif channels_last:
        groups = channels // lanes(vectorized, dtype)
        unit_bytes = lanes(vectorized, dtype) * DTYPES[dtype].size
        cols = min(MAX_COLS, 1 << max(0, groups - 1).bit_length(), max(1, ROW_BYTES // unit_bytes))
        grid_x = -(-groups // cols)
        units = rows * min(cols, groups)  # per column block
    else:
        cols, grid_x = 1, channels
        units = rows // lanes(vectorized, dtype)  # per channel
    split = 1
    while (split < MAX_SPLIT and grid_x * split < 2 * sms
           and units // (2 * split) >= REDUCTION_BLOCK * MIN_UNITS_PER_THREAD):  # fmt: skip
        split *= 2
    return grid_x, split, cols


def elementwise_grid(shape: common.Shape4, dtype: str, vectorized: int, channels_last: bool, sms: int) -> int:
    """CTAs of an elementwise launch: enough for every unit, at most WAVES waves of 2048-thread SMs; for
    channels_last a multiple that keeps each thread on one column of channel units, and each thread at least
    COLUMN_UNITS units to amortise its per-lane coefficients (measured on the H200 with ncu, (32, 256, 56, 56) bf16:
    with 3 units a thread the coefficient loads saturated the load/store units at 31% of DRAM bandwidth), but never
    fewer CTAs than one wave fills: a tensor smaller than that takes a unit a thread, as its loads' latency, not the
    coefficients, bounds it."""
    units = math.prod(shape) // lanes(vectorized, dtype)
    wave = sms * (2048 // ELEMENTWISE_BLOCK)
    ctas = max(1, min(-(-units // ELEMENTWISE_BLOCK), wave * WAVES))
    if channels_last:
        ctas = max(1, min(ctas, max(wave, -(-units // (ELEMENTWISE_BLOCK * COLUMN_UNITS)))))
        step = column_step(shape, dtype, vectorized)
        ctas = -(-ctas // step) * step
    return ctas


def column_step(shape: common.Shape4, dtype: str, vectorized: int) -> int:
    """The channels_last elementwise launch's fewest CTAs that keep each thread on one column of channel units; its
    grids are multiples of it (CTAS * ELEMENTWISE_BLOCK a multiple of C / lanes)."""
    groups = shape[1] // lanes(vectorized, dtype)
    return max(1, groups // math.gcd(groups, ELEMENTWISE_BLOCK))


def _activation(activation: int) -> tuple[int, ...]:
    """The ACTIVATION const of a *_act kernel, none for the plain ones."""
    return (activation,) if activation else ()


def reduction(kind: type, shape: common.Shape4, dtype: str, param: str, vectorized: int, channels_last: bool,
              sms: int, split: int | None = None, width: int = 3, activation: int = 0) -> Plan:  # fmt: skip
    """A reduction launch (`kind`: the statistics or the backward's sums, `width` values per partial) with its
    workspaces: partials [C][SPLIT][width] and an arrival counter per channel or column block; `split` overrides
    the geometry's."""
    grid_x, own_split, cols = geometry(shape, dtype, vectorized, channels_last, sms)
    split = split or own_split
    kernel = kind(REDUCTION_BLOCK, vectorized, int(channels_last), *_activation(activation), dtype=dtype,
                  param_dtype=param)  # fmt: skip
    channels = shape[1]
    spaces = (Workspace("workspace", kernel.dtype_info.acc, channels * split * width),
              Workspace("counters", "u32", channels))  # fmt: skip
    return Plan(kernel, (grid_x, split, 1), (("SPLIT", split), ("COLS", cols)), spaces)


def elementwise(kind: type, shape: common.Shape4, dtype: str, param: str, vectorized: int, channels_last: bool,
                sms: int, ctas: int | None = None, activation: int = 0) -> Plan:  # fmt: skip
    """`kind`'s elementwise launch (PACKED = 1 where its spec has that const: frozen.PACKED's kernels)."""
    packed = any(c.name == "PACKED" for c in kind.spec.consts)
    consts = (ELEMENTWISE_BLOCK, vectorized, int(channels_last), *_activation(activation), *((1,) if packed else ()))
    kernel = kind(*consts, dtype=dtype, param_dtype=param)
    ctas = ctas or elementwise_grid(shape, dtype, vectorized, channels_last, sms)
    return Plan(kernel, (ctas, 1, 1), (("CTAS", ctas),))


def sums(shape: common.Shape4, dtype: str) -> Workspace:
    """Where the backward's reduction leaves sum dy and sum dy * (x - mean) per channel for its elementwise launch."""
    return Workspace("sums", common.acc_dtype(dtype), 2 * shape[1])


def elementwise_packs(shape: common.Shape4, dtype: str, vectorized: int, channels_last: bool, packs: int | None
                      ) -> int:  # fmt: skip
    """The elementwise launch's pack mode beside reductions in mode `vectorized`: `packs` where given, else the
    reductions' own, but for GROUPS (the reductions' only) elementwise_mode's at 16 bytes, the alignment GROUPS
    needs."""
    if packs is not None:
        return packs
    return elementwise_mode(shape, dtype, 16, channels_last) if vectorized == GROUPS else vectorized


def forward(shape: common.Shape4, dtype: str, param: str, vectorized: int, channels_last: bool, sms: int,
            split: int | None = None, ctas: int | None = None, activation: int = 0, normalize: type | None = None,
            packs: int | None = None) -> Plan:  # fmt: skip
    """The statistics launch, then the normalize launch (with `activation` fused; `normalize`: another normalize
    kernel, of the same geometry), in pack mode `vectorized` (the normalize launch in `packs` where given)."""
    stats = reduction(BatchNorm2dBatchStats, shape, dtype, param, vectorized, channels_last, sms, split)
    kind = normalize or (BatchNorm2dNormalizeAct if activation else BatchNorm2dNormalize)
    mode = elementwise_packs(shape, dtype, vectorized, channels_last, packs)
    normalize = elementwise(kind, shape, dtype, param, mode, channels_last, sms, ctas, activation)
    return Plan(stats.kernel, stats.grid, stats.values, stats.workspaces, (normalize,))


def backward(shape: common.Shape4, dtype: str, param: str, vectorized: int, channels_last: bool, sms: int,
             split: int | None = None, ctas: int | None = None, activation: int = 0, packs: int | None = None
             ) -> Plan:  # fmt: skip
    """The reduction launch, then the elementwise launch (sharing the `sums` workspace), in pack mode `vectorized`
    (the elementwise launch in `packs` where given); through the fused `activation`'s gradient where it is not 0."""
    kinds = ((BatchNorm2dBackwardReduceAct, BatchNorm2dBackwardElementwiseAct) if activation
             else (BatchNorm2dBackwardReduce, BatchNorm2dBackwardElementwise))  # fmt: skip
    reduce = reduction(kinds[0], shape, dtype, param, vectorized, channels_last, sms, split, 2, activation)
    mode = elementwise_packs(shape, dtype, vectorized, channels_last, packs)
    dx = elementwise(kinds[1], shape, dtype, param, mode, channels_last, sms, ctas, activation)
    space = sums(shape, dtype)
    return Plan(
        reduce.kernel,
        reduce.grid,
        reduce.values,
        (*reduce.workspaces, space),
        (Plan(dx.kernel, dx.grid, dx.values, (space,)),),
    )


def fused(which: str, shape: common.Shape4, dtype: str, param: str, vectorized: int, block: int,
          activation: int = 0) -> Plan:  # fmt: skip
    """The one-launch forward or backward (NCHW, grid [C]); the backward keeps each channel's two terms in `sums`."""
    kind = FUSED[which, bool(activation)]
    kernel = kind(block, vectorized, *_activation(activation), dtype=dtype, param_dtype=param)
    return Plan(kernel, (shape[1], 1, 1), (), () if which == "forward" else (sums(shape, dtype),))


def warp(which: str, shape: common.Shape4, dtype: str, param: str, units: int, activation: int = 0,
         channels_last: bool = False) -> Plan:  # fmt: skip
    """The one-launch forward or backward of a warp per channel (NCHW, or channels_last's kernels), `units` values a
    lane in registers (grid [ceil(C / 4)]: 4 warps a CTA)."""
    kinds, layout = (WARP_CHANNELS_LAST, (1,)) if channels_last else (WARP, ())  # their CHANNELS_LAST const: 1
    kernel = kinds[which, bool(activation)](units, *layout, *_activation(activation), dtype=dtype, param_dtype=param)
    return Plan(kernel, (-(-shape[1] // 4), 1, 1))


def warp_units(shape: common.Shape4, dtype: str, channels_last: bool = False) -> int | None:
    """The warp kernels' fewest values a lane (a power of two from 2) that hold a channel where they are candidates
    (NCHW: WARP_VALUES, WARP_ROWS_VALUES where rows are too short for the one-launch kernels; channels_last, whose
    lanes read a value at stride C: WARP_ROWS_VALUES), else None (also at H*W = 1, whose channels_last column kernels
    read its rows coalesced)."""
    values = shape[0] * shape[2] * shape[3]
    most = WARP_VALUES if fusable(shape, dtype) and not channels_last else WARP_ROWS_VALUES
    if common.both_layouts(shape) or not 0 < values <= most:
        return None
    return fewest_units(values, 32)


def warp_channels_last_rule(which: str, shape: common.Shape4, dtype: str) -> int | None:
    """The channels_last warp kernels' values a lane where the rule takes them (WARP_CHANNELS_LAST_RULE), else
    None."""
    values, below = WARP_CHANNELS_LAST_RULE[which]
    small = shape[0] * shape[2] * shape[3] <= values and math.prod(shape) * DTYPES[dtype].size < below
    return warp_units(shape, dtype, True) if small else None


def fewest_units(values: int, threads: int) -> int:
    """The fewest values a thread, a power of two from 2, with which `threads` hold `values`."""
    return max(2, 1 << (-(-values // threads) - 1).bit_length())


def block(which: str, shape: common.Shape4, dtype: str, param: str, threads: int, units: int,
          activation: int = 0) -> Plan:  # fmt: skip
    """The one-launch forward or backward (NCHW) of a CTA of `threads` per channel, `units` values a thread in
    registers (grid [C])."""
    kernel = BLOCK[which, bool(activation)](threads, units, *_activation(activation), dtype=dtype, param_dtype=param)
    return Plan(kernel, (shape[1], 1, 1))


def block_options(shape: common.Shape4, every: bool = False) -> list[tuple[int, int]]:
    """The block kernels' (threads, values a thread) where they are candidates: each CTA size of BLOCK_SIZES (at
    most the channel's values) with the fewest values a thread (a power of two, 2 to 16) that hold an NCHW channel
    of more than BLOCK_MIN_VALUES and at most BLOCK_VALUES; none at H*W = 1 (the channels_last kernels read its rows
    coalesced). `every`: each instance that holds a channel of 2 values or more, however many of its threads stay
    idle (the checks').
    """
    values = shape[0] * shape[2] * shape[3]
    if common.both_layouts(shape) or not (2 if every else BLOCK_MIN_VALUES + 1) <= values <= BLOCK_VALUES:
        return []
    fitting = [(threads, units) for threads in BLOCK_SIZES for units in (2, 4, 8, 16)
               if values <= threads * units <= BLOCK_VALUES]  # fmt: skip
    if every:
        return fitting
    return [min((o for o in fitting if o[0] == threads), key=lambda o: o[1]) for threads in BLOCK_SIZES
            if threads <= values and any(o[0] == threads for o in fitting)]  # fmt: skip


def block_rule(shape: common.Shape4) -> tuple[int, int] | None:
    """The block kernels' (threads, values a thread) where the rule takes them (BLOCK_RULE_VALUES), else None."""
    values = shape[0] * shape[2] * shape[3]
    if common.both_layouts(shape) or not BLOCK_MIN_VALUES < values <= BLOCK_RULE_VALUES:
        return None
    threads = 128 if values <= 128 * 8 else 256
    return threads, fewest_units(values, threads)


def fused_columns(which: str, shape: common.Shape4, dtype: str, param: str, vectorized: int, block: int, cols: int,
                  activation: int = 0) -> Plan:  # fmt: skip
    """The one-launch forward or backward in channels_last: a CTA per block of `cols` channel units (grid
    [C / lanes / cols], `cols` one of column_widths'); the backward keeps each channel's two terms in `sums`."""
    kernel = FUSED_COLUMNS[which, bool(activation)](block, vectorized, *_activation(activation), dtype=dtype,
                                                     param_dtype=param)  # fmt: skip
    groups = shape[1] // lanes(vectorized, dtype)
    spaces = () if which == "forward" else (sums(shape, dtype),)
    return Plan(kernel, (groups // cols, 1, 1), (("COLS", cols),), spaces)


def persistent(which: str, shape: common.Shape4, dtype: str, param: str, vectorized: int, units: int, cols: int,
               activation: int = 0) -> Plan:  # fmt: skip
    """The persistent forward or backward (channels_last, one cooperative launch): grid [C / lanes / cols, SPLIT], the
    fewest slices whose threads hold every row at `units` rows each; partials [SPLIT][C][width] and grid::sync's
    word as workspaces."""
    split = persistent_split(shape, units, cols)
    groups = shape[1] // lanes(vectorized, dtype)
    kernel = PERSISTENT[which, bool(activation)](REDUCTION_BLOCK, vectorized, units, *_activation(activation),
                                                 dtype=dtype, param_dtype=param)  # fmt: skip
    return Plan(kernel, (groups // cols, split, 1), (("SPLIT", split), ("COLS", cols)),
                exchange_spaces(which, kernel, shape[1], split))  # fmt: skip


def cooperative(which: str, shape: common.Shape4, dtype: str, param: str, vectorized: int, cols: int, split: int,
                activation: int = 0) -> Plan:  # fmt: skip
    """The cooperative forward or backward (channels_last, one cooperative launch, rows read twice): grid
    [C / lanes / cols, split]; partials [split][C][width] and grid::sync's word as workspaces."""
    groups = shape[1] // lanes(vectorized, dtype)
    kernel = COOPERATIVE[which, bool(activation)](REDUCTION_BLOCK, vectorized, *_activation(activation), dtype=dtype,
                                                  param_dtype=param)  # fmt: skip
    return Plan(kernel, (groups // cols, split, 1), (("SPLIT", split), ("COLS", cols)),
                exchange_spaces(which, kernel, shape[1], split))  # fmt: skip


def exchange_spaces(which: str, kernel: Kernel, channels: int, split: int) -> tuple[Workspace, Workspace]:
    """The one-launch kernels' exchange (persistent, cooperative): partials [split][C][width] in the accumulation type
    and grid::sync's word."""
    width = 3 if which == "forward" else 2
    return Workspace("workspace", kernel.dtype_info.acc, channels * split * width), Workspace("barrier", "u32", 1)


def unit_columns(shape: common.Shape4, dtype: str, vectorized: int) -> tuple[int, int] | None:
    """(channel units a row, rows) of the channels_last view, where the persistent and cooperative kernels can run it
    (a unit column, and at least 2 values per channel); else None."""
    groups, rows = shape[1] // lanes(vectorized, dtype), shape[0] * shape[2] * shape[3]
    return (groups, rows) if groups and rows >= 2 else None


def cooperative_options(which: str, shape: common.Shape4, dtype: str, vectorized: int, sms: int,
                        bound: int = COOPERATIVE_BYTES) -> list[tuple[int, int]]:  # fmt: skip
    """The cooperative kernels' (cols, split): where the direction's second read fits `bound`, each of
    column_widths by each grid of COOPERATIVE_CTAS_PER_SM CTAs an SM, its slices at least COOPERATIVE_ROWS rows a
    thread."""
    read = math.prod(shape) * DTYPES[dtype].size * (1 if which == "forward" else 2)
    if not (units := unit_columns(shape, dtype, vectorized)) or read > bound:
        return []
    groups, rows = units
    out = []
    for cols in column_widths(shape, dtype, vectorized, sms):
        blocks = groups // cols
        most = rows // (COOPERATIVE_ROWS * REDUCTION_BLOCK // cols)
        splits = dict.fromkeys(min(most, per_sm * sms // blocks) for per_sm in COOPERATIVE_CTAS_PER_SM)
        out += [(cols, split) for split in splits if split >= 1]
    return out


def cooperative_rule(which: str, shape: common.Shape4, dtype: str, vectorized: int, sms: int
                     ) -> tuple[int, int] | None:  # fmt: skip
    """The cooperative kernels' (cols, split) where the rule takes them (channels_last from COOPERATIVE_RULE_BYTES of
    x, while what the direction reads twice fits COOPERATIVE_RULE_READ): the widest of column_widths of at most
    COOPERATIVE_RULE_CHANNELS channels, at two CTAs an SM (every instance is resident so: ptxas gives them at most 118
    registers a thread); else None."""
    if math.prod(shape) * DTYPES[dtype].size < COOPERATIVE_RULE_BYTES:
        return None
    options = cooperative_options(which, shape, dtype, vectorized, sms, COOPERATIVE_RULE_READ)
    narrow = [(c, split) for c, split in options if c * lanes(vectorized, dtype) <= COOPERATIVE_RULE_CHANNELS]
    # the widest block, at its fewest CTAs (COOPERATIVE_CTAS_PER_SM's first: two an SM)
    return max(narrow, key=lambda option: (option[0], -option[1]), default=None)


def persistent_split(shape: common.Shape4, units: int, cols: int) -> int:
    """The persistent kernels' fewest slices whose threads hold every row, `units` rows each."""
    return -(-shape[0] * shape[2] * shape[3] // (units * (REDUCTION_BLOCK // cols)))


def persistent_options(shape: common.Shape4, dtype: str, vectorized: int, sms: int, ctas: int) -> list[tuple[int, int]]:
    """The persistent kernels' (units, cols) whose grid has at most `ctas` CTAs: each of PERSISTENT_UNITS by each of
    column_widths (a row of at least 2 values per channel)."""
    if not (columns := unit_columns(shape, dtype, vectorized)):
        return []
    groups = columns[0]
    return [(units, cols) for units in PERSISTENT_UNITS for cols in column_widths(shape, dtype, vectorized, sms)
            if groups // cols * persistent_split(shape, units, cols) <= ctas]  # fmt: skip


def column_widths(shape: common.Shape4, dtype: str, vectorized: int, sms: int) -> list[int]:
    """The one-launch channels_last kernels' widths: powers of two up to the reductions' cols that divide the row's
    units (those kernels' precondition: every thread then has a column)."""
    groups = shape[1] // lanes(vectorized, dtype)
    widest = geometry(shape, dtype, vectorized, True, sms)[2]
    return [c for c in (1, 2, 4, 8, 16, 32) if c <= widest and groups % c == 0]


def columns_fit(shape: common.Shape4, dtype: str, vectorized: int, cols: int, sms: int) -> bool:
    """Whether a channels_last block of `cols` channel units is small enough for the one-launch kernels: as
    fused_fits for an NCHW channel, the block's bytes against FUSED_CHANNEL_BYTES scaled by the blocks' share of
    the SMs."""
    blocks = shape[1] // lanes(vectorized, dtype) // cols
    per_block = block_bytes(shape, dtype, vectorized, cols)
    return per_block > 0 and per_block * sms <= FUSED_CHANNEL_BYTES * min(sms, blocks)


def column_options(shape: common.Shape4, dtype: str, vectorized: int, sms: int,
                   small: bool = False) -> list[tuple[int, int]]:  # fmt: skip
    """The (CTA size, cols) of the channels_last one-launch kernels the rule picks from: each of column_widths
    where the block fits the rule's bound (not four times it, as for NCHW: measured on the H200, past the bound these
    kernels lost at the median, 0.68-0.97x by direction and dtype, and won on 13 of 98 keys and directions by at most
    1.23x); CTAs up to the smallest giving each thread row at most one row. `small` (the autotuner's): every width
    where the whole tensor is at most SMALL_TENSOR_BYTES."""
    rows = shape[0] * shape[2] * shape[3]
    whole = math.prod(shape) * DTYPES[dtype].size
    out = []
    for cols in column_widths(shape, dtype, vectorized, sms):
        if not (columns_fit(shape, dtype, vectorized, cols, sms) or (small and whole <= SMALL_TENSOR_BYTES)):
            continue
        blocks = [b for b in FUSED_BLOCKS if b // cols <= rows]
        out += [(b, cols) for b in blocks or FUSED_BLOCKS[:1]]
    return out


def block_bytes(shape: common.Shape4, dtype: str, vectorized: int, cols: int) -> int:
    """The bytes of x in a channels_last column block of `cols` channel units (every row)."""
    return shape[0] * shape[2] * shape[3] * cols * lanes(vectorized, dtype) * DTYPES[dtype].size


def columns_rule(which: str, shape: common.Shape4, dtype: str, vectorized: int, sms: int) -> tuple[int, int] | None:
    """The channels_last one-launch kernels' (CTA size, cols) where the rule takes them: the widest of
    column_options', else the narrowest width whose block is at most SMALL_BLOCK_BYTES; the 16-bit backward instead
    the narrowest of those widths giving at most one block an SM (one wave), where one does; the CTA as fused_rule's;
    else None. Where this moved the bf16 backward's width (15 suite keys) it was 0.99-1.27x faster by the shipped H200
    table (median 1.18x) and 0.95-1.17x on an H100 (median 1.14x); in f32 0.92-1.25x and 0.92-1.21x (medians 1.00x
    and 0.98x, 31 keys), in the forward slower on 4 of 6 keys (docs/results/h100-2026-12-07-cl-warp/)."""
    options = sorted({c for _, c in column_options(shape, dtype, vectorized, sms)})
    small = [c for c in column_widths(shape, dtype, vectorized, sms)
             if 0 < block_bytes(shape, dtype, vectorized, c) <= SMALL_BLOCK_BYTES]  # fmt: skip
    widths = options or small
    if not widths:
        return None
    cols = options[-1] if options else small[0]
    groups = shape[1] // lanes(vectorized, dtype)
    if which == "backward" and DTYPES[dtype].size == 2:
        cols = next((c for c in widths if groups // c <= sms), cols)
    units = shape[0] * shape[2] * shape[3] * cols
    return max([b for b in FUSED_BLOCKS if units >= 4 * b], default=FUSED_BLOCKS[0]), cols


def fusable(shape: common.Shape4, dtype: str) -> bool:
    """Whether the one-launch kernels can stream this NCHW shape: rows of at least a sector."""
    return shape[2] * shape[3] * DTYPES[dtype].size >= MIN_FUSED_ROW_BYTES


def fused_fits(shape: common.Shape4, dtype: str, sms: int, scale: int = 1) -> bool:
    """Whether an NCHW channel's activations are small enough for the one-launch kernels (`scale` times the rule's
    bound: the autotuner times them a little past it)."""
    batches, channels, height, width = shape
    per_channel = batches * height * width * DTYPES[dtype].size
    return (fusable(shape, dtype) and per_channel > 0
            and per_channel * sms <= scale * FUSED_CHANNEL_BYTES * min(sms, channels))  # fmt: skip


def fused_rule(shape: common.Shape4, dtype: str, vectorized: int, sms: int) -> int | None:
    """The one-launch kernels' CTA size where the rule takes them for this NCHW shape, else None."""
    batches, _, height, width = shape
    if not fused_fits(shape, dtype, sms):
        return None
    units = batches * height * width // lanes(vectorized, dtype)
    return max([b for b in FUSED_BLOCKS if units >= 4 * b], default=FUSED_BLOCKS[0])


@cache  # a pure function of its arguments: the ops ask it on every call they decide
def plan(which: str, shape: common.Shape4, dtype: str, param: str, alignment: int, sms: int, channels_last: bool,
         activation: int = 0, blocks: bool = False, cooperative_on: bool = False) -> Plan:  # fmt: skip
    """The rule's plan (`blocks`: with the block kernels, settings().block; `cooperative_on`: with the cooperative
    kernels, settings().persistent)."""
    vectorized = vector_mode(shape, dtype, alignment, channels_last)
    if not channels_last and common.both_layouts(shape):
        # H*W = 1 (no NCHW one-launch plan: rows under a sector): the channels_last one-launch plan where the rule
        # would take it, else its two-launch plan from NHWC_MIN_BYTES on.
        nhwc = vector_mode(shape, dtype, alignment, True)
        if columns_rule(which, shape, dtype, nhwc, sms) or common.nhwc_rule(shape, dtype, NHWC_MIN_BYTES):
            channels_last, vectorized = True, nhwc
    if channels_last and (units := warp_channels_last_rule(which, shape, dtype)):
        return warp(which, shape, dtype, param, units, activation, True)
    if channels_last and (rule := columns_rule(which, shape, dtype, vectorized, sms)):
        return fused_columns(which, shape, dtype, param, vectorized, *rule, activation)
    if cooperative_on and channels_last and not common.both_layouts(shape) and \
            (grid := cooperative_rule(which, shape, dtype, vectorized, sms)):  # fmt: skip
        return cooperative(which, shape, dtype, param, vectorized, *grid, activation)
    small = shape[0] * shape[2] * shape[3] <= WARP_RULE_VALUES or not fusable(shape, dtype)
    if not channels_last and small and (units := warp_units(shape, dtype)):
        return warp(which, shape, dtype, param, units, activation)
    if blocks and not channels_last and (held := block_rule(shape)):
        return block(which, shape, dtype, param, *held, activation)
    size = None if channels_last else fused_rule(shape, dtype, vectorized, sms)
    build = forward if which == "forward" else backward
    packs = elementwise_mode(shape, dtype, alignment, channels_last)
    if which == "backward" and unpacked_rows(shape, dtype, packs, FLAT_RULE_BYTES):
        return backward(shape, dtype, param, FLAT, False, sms, activation=activation, packs=packs)
    if size and which == "forward" and groups_rule(shape, dtype, alignment, vectorized):
        return forward(shape, dtype, param, GROUPS, False, sms, activation=activation, packs=packs)
    if size and not unpacked_rows(shape, dtype, packs, FUSED_UNPACKED_BYTES):
        return fused(which, shape, dtype, param, vectorized, size, activation)
    return build(shape, dtype, param, vectorized, channels_last, sms, activation=activation, packs=packs)


def groups_rule(shape: common.Shape4, dtype: str, alignment: int, vectorized: int) -> bool:
    """Whether the forward rule takes the GROUPS reductions over the NCHW one-launch kernels (GROUPS_RULE_BYTES)."""
    nbytes = math.prod(shape) * DTYPES[dtype].size
    return vectorized == 0 and nbytes >= GROUPS_RULE_BYTES and groups_candidate(shape, dtype, alignment, False)


def unpacked_rows(shape: common.Shape4, dtype: str, packs: int, least: int) -> bool:
    """Whether x is 16-bit, `least` bytes or more, its elementwise launch in FLAT (`packs`: rows no pack divides):
    where the backward rule takes the FLAT reductions (FLAT_RULE_BYTES; wherever the grouped reductions could run,
    so can these) and the rule leaves the one-launch kernels (FUSED_UNPACKED_BYTES)."""
    size = DTYPES[dtype].size
    return packs == FLAT and size == 2 and math.prod(shape) * size >= least


def groups_candidate(shape: common.Shape4, dtype: str, alignment: int, channels_last: bool) -> bool:
    """Whether the GROUPS reductions are a candidate: rows under GROUP_ROW_BYTES where they can run (groups_fit)."""
    row_bytes = shape[2] * shape[3] * DTYPES[dtype].size
    return row_bytes < GROUP_ROW_BYTES and groups_fit(shape, dtype, alignment, channels_last)


@cache
def _candidates(which: str, shape: common.Shape4, dtype: str, param: str, alignment: int, sms: int,
                channels_last: bool, activation: int, persistent_on: bool, blocks: bool = False
                ) -> tuple[Plan, ...]:  # fmt: skip
    own = plan(which, shape, dtype, param, alignment, sms, channels_last, activation, blocks, persistent_on)
    build = forward if which == "forward" else backward
    out = [own] + [p for layout in common.layouts(shape, channels_last)
                   for p in around(build, shape, dtype, param, alignment, sms, layout, activation)]  # fmt: skip
    vectorized = vector_mode(shape, dtype, alignment, channels_last)
    if not channels_last and fused_fits(shape, dtype, sms, scale=4):
        out += [fused(which, shape, dtype, param, vectorized, size, activation) for size in FUSED_BLOCKS]
    if units := warp_units(shape, dtype, channels_last):
        out.append(warp(which, shape, dtype, param, units, activation, channels_last))
    if blocks and not channels_last:
        out += [block(which, shape, dtype, param, threads, units, activation)
                for threads, units in block_options(shape)]  # fmt: skip
    if channels_last or common.both_layouts(shape):  # the channels_last one-launch kernels (H*W = 1: an NCHW call's)
        nhwc = vector_mode(shape, dtype, alignment, True)
        out += [fused_columns(which, shape, dtype, param, nhwc, size, cols, activation)
                for size, cols in column_options(shape, dtype, nhwc, sms, small=True)]  # fmt: skip
        if persistent_on:
            options = persistent_options(shape, dtype, nhwc, sms, PERSISTENT_CTAS_PER_SM * sms)
            out += [persistent(which, shape, dtype, param, nhwc, units, cols, activation) for units, cols in options]
            out += [cooperative(which, shape, dtype, param, nhwc, cols, split, activation)
                    for cols, split in cooperative_options(which, shape, dtype, nhwc, sms)]  # fmt: skip
    return tuple(dict.fromkeys(out))


def around(build: Any, shape: common.Shape4, dtype: str, param: str, alignment: int, sms: int,
           channels_last: bool, activation: int = 0) -> list[Plan]:  # fmt: skip
    """The two-launch plans of `build` (forward or backward, or one of their signature) at the autotuner's splits
    and grids."""
    vectorized = vector_mode(shape, dtype, alignment, channels_last)
    packs = elementwise_mode(shape, dtype, alignment, channels_last)
    # Where the elementwise launch takes FLAT, the reductions may also read masked packs of the rows: a candidate
    # (the backward rule's from FLAT_RULE_BYTES of 16-bit x; they lose on f32, small tensors and the forward). Where
    # groups of channels fit and rows are short, they read whole groups' rows (GROUPS): a candidate too.
    modes = (vectorized, FLAT) if packs == FLAT else (vectorized,)
    if groups_candidate(shape, dtype, alignment, channels_last):
        modes += (GROUPS,)
    return [build(shape, dtype, param, mode, channels_last, sms, s, c, activation, packs=packs)
            for mode in modes for s in splits_around(shape, dtype, mode, channels_last, sms)
            for c in grids_around(shape, dtype, packs, channels_last, sms)]  # fmt: skip


def groups_fit(shape: common.Shape4, dtype: str, alignment: int, channels_last: bool) -> bool:
    """Whether the GROUPS reductions can run this shape: NCHW, 16-byte aligned arrays, a group of 2+ channels."""
    return not channels_last and alignment % 16 == 0 and group_width(shape, dtype) is not None


def splits_around(shape: common.Shape4, dtype: str, vectorized: int, channels_last: bool, sms: int) -> list[int]:
    """A reduction's splits the autotuner times: from a quarter to four times the geometry's, in powers of two, and
    those that fill WAVE_CTAS CTAs per SM once or twice (a power of two of CTAs leaves a last wave part-empty: 512 CTAs
    on 132 SMs holding 3 each)."""
    grid_x, own, _ = geometry(shape, dtype, vectorized, channels_last, sms)
    filling = [-(-waves * WAVE_CTAS * sms // grid_x) for waves in (1, 2)]
    splits = dict.fromkeys((own // 4, own // 2, own, own * 2, own * 4, *filling))
    return [s for s in splits if 1 <= s <= MAX_SPLIT]


def grids_around(shape: common.Shape4, dtype: str, vectorized: int, channels_last: bool, sms: int) -> list[int]:
    """An elementwise launch's grids the autotuner times: half, once and twice the rule's, kept a multiple of what
    channels_last needs (a thread on one column of channel units)."""
    own = elementwise_grid(shape, dtype, vectorized, channels_last, sms)
    step = column_step(shape, dtype, vectorized) if channels_last else 1
    return list(dict.fromkeys(max(step, (own * scale // 2) // step * step) for scale in (1, 2, 4)))


def candidates(which: str, problem: Problem, placement: Placement) -> tuple[Plan, ...]:
    """What the autotuner times for the forward's or the backward's two launches: the reduction split from a
    quarter to four times the rule's (in powers of two), by the elementwise grid at half, once and twice the rule's
    (kept a multiple of what channels_last needs), with NCHW reductions also in masked packs (rows no pack divides)
    and over groups of channels (rows under GROUP_ROW_BYTES); where H*W = 1, in both memory formats' kernels; the
    one-launch kernels up to four times the rule's channel size (NCHW) or within the rule's column block size
    (channels_last, and NCHW at H*W = 1; any size where the tensor is at most SMALL_TENSOR_BYTES), at each CTA size
    (and for channels_last each block width); channels_last's persistent kernels where the tensor fits their grid, and
    its cooperative ones where it fits L2 (unless RUST_KERNELS_PERSISTENT=0); the warp kernels (either memory format)
    where a channel fits a warp's registers, and NCHW's block kernels where it fits a CTA's (block_options; unless
    RUST_KERNELS_BLOCK=0)."""
    setting = settings()  # one read of the environment (several µs)
    return _candidates(which, problem.shape, problem.dtype, problem.param, placement.alignment,  # type: ignore[arg-type]
                       placement.sms, problem.order is not None, activation_of(problem),
                       setting.persistent, setting.block)  # fmt: skip


def choose(which: str, problem: Problem, placement: Placement, cooperative_on: bool = True) -> Plan:
    """The rule's plan; `cooperative_on=False` (an op that does not run the cooperative kernels) leaves them out, as
    RUST_KERNELS_PERSISTENT=0 does."""
    setting = settings()
    return plan(which, problem.shape, problem.dtype, problem.param, placement.alignment, placement.sms,  # type: ignore[arg-type]
                problem.order is not None, activation_of(problem), setting.block,
                cooperative_on and setting.persistent)  # fmt: skip


def activation_of(problem: Problem) -> int:
    """The ACTIVATION const a problem's elementwise kernels fuse (0: none; the torch-native ops have no activation)."""
    name = problem.scalars.get("activation")
    return 0 if name is None else ACTIVATIONS[name]


def fits(plan: Plan, problem: Problem) -> str | None:
    """Why a forced plan cannot run this problem of a torch-native op: training mode runs the training kernels,
    eval mode the eval ones, each in the arrays' memory format."""
    training = bool(problem.scalars.get("training"))
    for launch in plan.launches:
        kernel = launch.kernel
        if isinstance(kernel, FORWARD_KERNELS + BACKWARD_KERNELS) != training:
            mode = "training" if training else "eval"
            return f"its kernel {kernel.name} is not one of {mode} mode's"
        fused = getattr(kernel, "activation", 0)
        if not isinstance(kernel, BatchNorm2dBatchStats) and fused != activation_of(problem):
            return f"its kernel {kernel.id} fuses activation {fused}, the call {activation_of(problem)} (0: none)"
    return layout_fits(plan, problem)


def reads_channels_last(kernel: Any) -> bool:
    """Whether a kernel reads NHWC memory (its CHANNELS_LAST const, or one of the channels_last one-launch,
    persistent or cooperative kernels; the other one-launch kernels and the NCHW eval kernels read NCHW)."""
    nhwc = (*FUSED_COLUMNS.values(), *PERSISTENT.values(), *COOPERATIVE.values())
    return bool(getattr(kernel, "channels_last", 0)) or isinstance(kernel, nhwc)


def layout_fits(plan: Plan, problem: Problem) -> str | None:
    """Why a forced plan cannot run this problem: a kernel reads the other memory format than the arrays' (where the
    two differ)."""
    _, channels, height, width = problem.shape
    if problem.empty or channels == 1 or height * width == 1:  # NCHW and NHWC: then the same memory
        return None
    for launch in plan.launches:
        if reads_channels_last(launch.kernel) != (problem.order is not None):
            layout = "channels_last" if problem.order is not None else "NCHW"
            return f"its kernel {launch.kernel.id} reads the other memory format than the arrays' ({layout})"
    return None
