"""Aligned barriers that a warp may reach at different instructions, found in a kernel's PTX before it can hang a GPU.

PTX's `bar.sync` and `bar.red` (what `sync_threads` and its forms compile to) are aligned: the threads of a warp must
execute the same barrier instruction. A kernel's source may reach one barrier from every thread and still break
this, because LLVM may copy the barrier into each side of a branch whose condition differs between the lanes of a
warp (the branch on the same test before and after the barrier merged into one). On the GPU such a warp then waits
forever; the emulator runs the host build, which has no such copy, and passes. This happened twice here
(docs/results/h200-2026-12-02-cl-one-launch/, docs/results/h100-2026-12-05-cl-merge/).

`divergent_barriers(ptx)` names every aligned barrier that lies inside the region of a lane-dependent branch: the
blocks a thread may run after the branch before its paths meet again (the branch's immediate post-dominator). A
value is lane-dependent when it derives from `%tid` or `%laneid`, an atomic's or a shuffle's result, or a load from a
lane-dependent address, tracked per block through the control flow; a branch's own region makes nothing else
lane-dependent (values merged after a lane-dependent branch are missed, so this finds the pattern, it does not prove
its absence). Paths that end in a failed check (a panic or `trap`) abort the launch and constrain no reconvergence.
Over every PTX built here up to 12-05 (6 707 kernels) it flagged the 646 built from the two templates that hung, and
no other.
"""

from __future__ import annotations

import re
from typing import NamedTuple

_LABEL = re.compile(r"^(\$?[\w$]+):$")
_REGISTER = re.compile(r"%[\w.]+")
_BRANCH = re.compile(r"^(@!?%\w+\s+)?bra(?:\.uni)?\s+(\$?[\w$]+);$")
_GUARD = re.compile(r"^@!?(%\w+)\s+")
_ENDS = re.compile(r"^(ret|exit|trap);")
_BARRIER = re.compile(r"\bbar\.(sync|red|arrive)\b|\bbarrier\.[\w.]*aligned")
_LANE_SOURCES = ("%tid.", "%laneid")
# With the CTA's x extent a multiple of 32, a warp's threads share one (y, z): only x and the lane differ.
_ROW_LANE_SOURCES = ("%tid.x", "%laneid")
_LANE_OPS = ("atom.", "shfl.")  # results that differ between the lanes of a warp whatever their inputs
_WARP_OPS = ("bar.red.", "vote.", "activemask.")  # results equal across a warp (bar.red's across the CTA)
_NO_RESULT = ("st.", "bra", "bar.", "barrier.", "red.", "membar", "fence", "ret", "exit", "trap", "call", "prefetch")


class Hazard(NamedTuple):
    """An aligned barrier (PTX line `barrier`, 1-based, and its text) inside the region of the lane-dependent branch
    at PTX line `branch`."""

    branch: int
    barrier: int
    text: str


def divergent_barriers(ptx: str, block_x: int | None = None) -> list[Hazard]:
    """Every aligned barrier of the PTX that a warp may reach at different instructions (above), in each function
    (a kernel's body is often a `.func` its entry calls). A function's parameters count as equal across the warp,
    and so do `%tid.y` and `%tid.z` where `block_x`, the CTA's x extent, is a multiple of 32."""
    sources = _ROW_LANE_SOURCES if block_x is not None and block_x % 32 == 0 else _LANE_SOURCES
    return [hazard for body in _bodies(ptx) for hazard in _function_hazards(_blocks(body), sources)]


def _function_hazards(blocks: list[list[tuple[int, str]]], sources: tuple[str, ...]) -> list[Hazard]:
    labels = {block[0][1][:-1]: b for b, block in enumerate(blocks) if _LABEL.match(block[0][1])}
    successors = [_successors(blocks, labels, i) for i in range(len(blocks))]
    lane_dependent = _lane_dependent(blocks, successors, sources)
    post_dominators = _post_dominators(blocks, successors)
    hazards = []
    for i, block in enumerate(blocks):
        number, last = block[-1]
        guard = _GUARD.match(last)
        if not (guard and _BRANCH.match(last) and guard.group(1) in lane_dependent[i]):
            continue
        meet = post_dominators[i] - {i}
        region: set[int] = set()
        pending = [s for s in successors[i] if s not in meet]
        while pending:
            b = pending.pop()
            if b not in region and b not in meet:
                region.add(b)
                pending.extend(successors[b])
        hazards += [Hazard(number, n, line) for b in sorted(region) for n, line in blocks[b] if _BARRIER.search(line)]
    return hazards


def _bodies(ptx: str) -> list[list[tuple[int, str]]]:
    """Each function's instructions and labels, numbered by PTX line, without comments and declarations. A body
    lies between a `{` and a `}` alone on their lines at column 0 (the braces inside it are indented)."""
    bodies: list[list[tuple[int, str]]] = []
    inside = False
    for n, raw in enumerate(ptx.splitlines(), 1):
        if raw in ("{", "}"):
            inside = raw == "{"
            if inside:
                bodies.append([])
            continue
        line = raw.split("//")[0].strip()
        keep = line and not line.startswith((".reg", ".local", ".shared", ".pragma", "{", "}"))
        if inside and (keep or line.startswith("{ ")):
            bodies[-1].append((n, line))
    return bodies


def _blocks(body: list[tuple[int, str]]) -> list[list[tuple[int, str]]]:
    """Basic blocks: split at labels and after every branch, return and exit. A label's block keeps it first."""
    blocks: list[list[tuple[int, str]]] = [[]]
    for number, line in body:
        if _LABEL.match(line) and blocks[-1]:
            blocks.append([])
        blocks[-1].append((number, line))
        if _BRANCH.match(line) or _ENDS.match(line):
            blocks.append([])
    return [b for b in blocks if b]


def _successors(blocks: list[list[tuple[int, str]]], labels: dict[str, int], i: int) -> list[int]:
    last = blocks[i][-1][1]
    after = [i + 1] if i + 1 < len(blocks) else []
    branch = _BRANCH.match(last)
    if branch:
        target = labels[branch.group(2)]
        return [target, *after] if branch.group(1) else [target]
    return [] if _ENDS.match(last) else after


def _lane_dependent(
    blocks: list[list[tuple[int, str]]], successors: list[list[int]], sources: tuple[str, ...]
) -> list[dict[str, str]]:
    """Per block, the registers whose values may differ between the lanes of a warp after its instructions (those
    derived from `sources` among them), each with its kind: "tid" (a copy of `%tid.x`) or "lane" (anything else that
    differs)."""
    predecessors: list[list[int]] = [[] for _ in blocks]
    for i, targets in enumerate(successors):
        for t in targets:
            predecessors[t].append(i)
    after: list[dict[str, str] | None] = [None] * len(blocks)
    pending = list(range(len(blocks)))
    while pending:
        i = pending.pop(0)
        state = _entering(predecessors[i], after)
        for _, line in blocks[i]:
            _transfer(line, state, sources)
        if state != after[i]:
            after[i] = state
            pending += [t for t in successors[i] if t not in pending]
    return [s or {} for s in after]


def _entering(predecessors: list[int], after: list[dict[str, str] | None]) -> dict[str, str]:
    state: dict[str, str] = {}
    for kinds in (after[p] for p in predecessors):
        for register, kind in (kinds or {}).items():
            state[register] = kind if state.get(register, kind) == kind else "lane"
    return state


def _transfer(line: str, state: dict[str, str], sources: tuple[str, ...]) -> None:
    """One instruction's (or one inline asm block's) effect on the lane-dependent registers."""
    if line.startswith("{"):  # inline asm: its outputs by what the block does
        statements = [s.strip() for s in line.strip("{} ").split(";") if s.strip() and not s.strip().startswith(".")]
        outputs = [r for s in statements if (r := _result(s))]
        if any(s.startswith(_LANE_OPS) or any(src in s for src in sources) for s in statements):
            state.update(dict.fromkeys(outputs, "lane"))
        elif any(s.startswith(_WARP_OPS) for s in statements):
            for output in outputs:
                state.pop(output, None)
        else:
            for statement in statements:
                _transfer(statement, state, sources)
        return
    guard = _GUARD.match(line)
    statement = line[guard.end() :] if guard else line
    op, operands = _split(statement)
    result = _result(statement)
    if result is None:
        return
    inputs = [p.strip() for p in operands.split(",")[1:]]
    registers = _REGISTER.findall(",".join(inputs))
    if guard and guard.group(1) in state:
        state[result] = "lane"
    elif op.startswith(_WARP_OPS) or _warp_index(op, inputs, state):
        state.pop(result, None)
    elif inputs[:1] == ["%tid.x"] or (op.startswith(("mov.", "cvt.")) and state.get(inputs[0]) == "tid"):
        state[result] = "tid"
    elif op.startswith(_LANE_OPS) or any(s in operands for s in sources) or any(r in state for r in registers):
        state[result] = "lane"
    elif not guard:  # a guarded write keeps what the register held on the other lanes
        state.pop(result, None)


def _warp_index(op: str, sources: list[str], state: dict[str, str]) -> bool:
    """Whether the instruction divides `%tid.x` by a multiple of 32 (a shift right by 5 or more, or a division by
    such a constant), or compares it with a warp boundary (`tid < 32 k`, as LLVM writes `tid / 32 < k`): the warp's
    index, or a test of it, equal across its lanes where a block's x extent is a multiple of 32 (so are the
    package's kernels' blocks)."""
    if len(sources) != 2 or not (sources[0] == "%tid.x" or state.get(sources[0]) == "tid") or not sources[1].isdigit():
        return False
    amount = int(sources[1])
    if op.startswith(("setp.lt.u", "setp.ge.u")):
        return amount % 32 == 0
    if op.startswith(("setp.le.u", "setp.gt.u")):
        return amount % 32 == 31
    return (op.startswith("shr.") and amount >= 5) or (op.startswith("div.") and amount % 32 == 0)


def _split(statement: str) -> tuple[str, str]:
    """An instruction's opcode and operands."""
    parts = statement.rstrip(";").split(None, 1)
    return parts[0], parts[1] if len(parts) > 1 else ""


def _result(statement: str) -> str | None:
    """The register an instruction writes: its first operand, where that is a register (`setp p, ..` into an asm
    block's local predicate writes none that outlives the block)."""
    op, operands = _split(statement)
    first = operands.partition(",")[0].strip().partition("|")[0]
    return first if first.startswith("%") and not op.startswith(_NO_RESULT) and not op.endswith(":") else None


def _post_dominators(blocks: list[list[tuple[int, str]]], successors: list[list[int]]) -> list[set[int]]:
    """Per block, the blocks every path from it to the end passes through (itself included); the end is a virtual
    block numbered len(blocks). A block that fails a check (a panic or `trap`) constrains nothing."""
    end = len(blocks)
    everything = set(range(end + 1))
    aborts = {i for i, block in enumerate(blocks) if any("trap;" in line or "panic" in line for _, line in block)}
    result = [set(everything) for _ in blocks] + [{end}]
    changed = True
    while changed:
        changed = False
        for i in reversed(range(end)):
            if i in aborts:
                continue
            new = set.intersection(*(result[s] for s in successors[i] or [end])) | {i}
            if new != result[i]:
                result[i], changed = new, True
    return result
