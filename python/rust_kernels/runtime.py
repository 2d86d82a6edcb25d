"""The op runtime: an op is declared, not hand-built. A declaration (`Op`) names the op's array inputs, its scalar
arguments (each with its default and check), its outputs (allocated like which input), how a call's problem is
described (the family's shape and dtype checks, and the kernel arguments they fix), and how a plan is chosen. The
runtime does the rest, the same way for every op:

- argument checks: arrays of one library, all on one device (as torch requires), the scalars' own checks;
- the signature -> decision cache (the native fast path, `calls.fast_calls`): a decided signature is one native call;
- allocation of outputs (like their input: shape, dtype, device and memory format) and of workspaces;
- binding: every kernel argument is found by name (`x_ptr` <- array `x`; `B` <- a value the problem or the plan
  fixes; a plan's `reads` may bind it to another array), so an op's argument order is its kernels' spec, never
  restated; arrays in another dimension order than
  C's (channels_last) are bound as the permuted view that is C-contiguous, as the problem says;
- the stream (the arrays' current stream by default), the launches (a plan may chain several: a reduction, then
  an elementwise pass reading what it wrote) and remembering them.

An op that needs host steps between its launches (a collective, for SyncBatchNorm) is a function over several
declared ops: each takes its op's fast path.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache, partial
from typing import Any

import numpy as np

from rust_kernels import arrays, calls
from rust_kernels.arrays import is_torch
from rust_kernels.errors import ArgumentError, ArgumentTypeError, RustKernelsError
from rust_kernels.kernels import Kernel
from rust_kernels.launch import check_backend, load

RUNTIME_ARGUMENTS = ("backend", "stream", "plan")  # keyword-only arguments of every op


@dataclass(frozen=True)
class Input:
    """An array argument. `optional`: may be None (then it binds no kernel argument); `mutated`: the op writes it
    (torch schemas mark it)."""

    name: str
    optional: bool = False
    mutated: bool = False


@dataclass(frozen=True)
class Scalar:
    """A scalar argument: its default, `check(value)` -> the value the op uses (raises ArgumentError naming it), and
    its type in a torch schema ("float", "bool", "int?", ...)."""

    name: str
    default: Any
    check: Callable[[Any], Any]
    torch_type: str


@dataclass(frozen=True)
class Output:
    """An output, allocated with the dtype and device of input `like`: with its shape (and memory format) where
    `shape` is None, else with `shape(problem)`; in dtype `dtype(problem)` where given. `sum`: it sums over the
    input, so where the problem is empty (nothing to launch) it is zeros, as PyTorch gives it."""

    name: str
    like: str
    shape: Callable[[Problem], tuple[int, ...]] | None = None
    sum: bool = False
    dtype: Callable[[Problem], str] | None = None


@dataclass(frozen=True, eq=False)
class Problem:
    """What a call computes, as the op's `describe` finds it: the primary input's shape, the activations' and the
    parameters' dtypes, the kernel arguments it fixes (by name) and the checked scalars. `order`: where the arrays
    of the primary input's rank lie in another dimension order than C's (channels_last: (0, 2, 3, 1)), the order
    whose permuted view of each is C-contiguous (what its kernels index)."""

    shape: tuple[int, ...]
    dtype: str
    param: str
    values: Mapping[str, Any]
    scalars: Mapping[str, Any]
    order: tuple[int, ...] | None = None

    @property
    def empty(self) -> bool:
        return math.prod(self.shape) == 0

    @property
    def dtype_key(self) -> str:
        """The dtype key the kernels must run: the dtype, or "dtype-param" ("bf16-f32")."""
        return self.dtype if self.param == self.dtype else f"{self.dtype}-{self.param}"


@dataclass(frozen=True)
class Placement:
    """What a plan depends on besides the problem: the alignment (a power of two up to 16) the op's streamed
    arrays share, the SMs to fill (1 in the emulator) and the alignment its `coefficients` arrays share (0 where it
    names none): a plan may load those in packs too where they allow it, and streams in packs where they do not."""

    alignment: int
    sms: int
    coefficients: int = 0


@dataclass(frozen=True)
class Workspace:
    """Scratch memory bound to kernel argument `<name>_ptr`: `length` zeroed elements of `dtype`. The kernel leaves
    it as its next launch needs it (zeroed, or written before it is read), so one per (plan's first kernel instance,
    library, device, stream) serves every launch of such plans on that stream (launches on one stream are ordered).
    Instances do not share one: what one leaves behind (a deterministic split's partials) is not what another
    expects (an atomic split's zeros)."""

    name: str
    dtype: str
    length: int


@dataclass(frozen=True)
class Plan:
    """How one call runs: a kernel instance, its grid, the kernel arguments the plan fixes (`values`, by name) and
    its workspaces; `then`: the launches that follow it, in order, on the same stream (each a Plan without `then`).
    The launches of a plan share its workspaces by name: what one writes, the next may read. `reads`: (kernel
    argument, array) pairs binding an argument to another of the op's arrays than its own name's (a launch reading
    an output an earlier launch wrote, in an input's stead). Any op accepts a plan of its own kernels as `plan=`."""

    kernel: Kernel
    grid: tuple[int, int, int]
    values: tuple[tuple[str, int | float], ...] = ()
    workspaces: tuple[Workspace, ...] = ()
    then: tuple[Plan, ...] = ()
    reads: tuple[tuple[str, str], ...] = ()

    @property
    def launches(self) -> tuple[Plan, ...]:
        return (self, *self.then)

    @property
    def label(self) -> str:
        return " + ".join(
            " ".join([p.kernel.id, *(f"{name.lower()}={value}" for name, value in p.values)]) for p in self.launches
        )

    def value(self, name: str) -> int | float:
        return dict(self.values)[name]


@dataclass(eq=False)
class Op:
    """One op's declaration. `describe(arrays, scalars, backend)` checks the arrays (by name) and the checked scalars
    and returns the Problem; `choose(problem, placement)` the plan; `aligned`: the arrays whose addresses the plans
    care about; `coefficients`: the small arrays (per channel) a plan may load in packs where they are aligned, whose
    alignment is Placement.coefficients, apart from `aligned`'s (unaligned ones do not stop x streaming in packs);
    `orders(scalars)`: the memory orders besides C's its kernels read with these scalars (by name;
    channels_last: (0, 2, 3, 1)), which callers keep rather than copy to contiguous; `kernels`: the kernel classes its
    plans use (a forced plan must use one); `fits(plan, problem)`: why a forced plan cannot run this problem (its
    kernels read another memory order or mode), or None; `candidates(problem, placement)`: the plans the autotuner
    times for a CUDA call (tuning.py; none: `choose`'s plan is taken). `torch`: register it as
    torch.ops.rust_kernels.<name>, whose backward is `gradient`."""

    name: str
    doc: str
    inputs: tuple[Input, ...]
    scalars: tuple[Scalar, ...]
    outputs: tuple[Output, ...]
    describe: Callable[[dict[str, Any], dict[str, Any], str], Problem]
    choose: Callable[[Problem, Placement], Plan]
    kernels: tuple[type[Kernel], ...]
    aligned: tuple[str, ...] = ()
    coefficients: tuple[str, ...] = ()
    orders: Callable[[dict[str, Any]], tuple[tuple[int, ...], ...]] | None = None
    fits: Callable[[Plan, Problem], str | None] | None = None
    candidates: Callable[[Problem, Placement], Sequence[Plan]] | None = None
    torch: bool = False
    gradient: Gradient | None = None
    function: Callable[..., Any] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        names = [i.name for i in self.inputs] + [s.name for s in self.scalars] + [o.name for o in self.outputs]
        if len(set(names)) != len(names) or set(names) & set(RUNTIME_ARGUMENTS):
            raise RustKernelsError(
                f"op {self.name}: argument and output names must be unique and not {RUNTIME_ARGUMENTS}"
            )
        inputs = {i.name for i in self.inputs}
        for output in self.outputs:
            if output.like not in inputs:
                raise RustKernelsError(f"op {self.name}: output {output.name} is allocated like {output.like!r}, "
                                       f"which is not an input")  # fmt: skip
        self._fast = calls.fast_calls()
        self._like = tuple(self._index(o.like) for o in self.outputs)
        self.function = _function(self)

    def _index(self, name: str) -> int:
        return [i.name for i in self.inputs].index(name)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.function(*args, **kwargs)

    # --- the checked path --------------------------------------------------------------------------------------
    def problem(self, arrays: tuple[Any, ...], scalars: tuple[Any, ...], backend: str, traced: bool = False
                ) -> tuple[dict, Problem]:  # fmt: skip
        """The named arrays and the Problem of a call, after every argument check (no launch, no allocation).
        `traced`: torch's fake tensors (devices and shapes are checked, not the array library)."""
        check_backend(backend)
        named = dict(zip((i.name for i in self.inputs), arrays, strict=True))
        check_arrays(self, named, backend, traced)
        checked = {s.name: s.check(v) for s, v in zip(self.scalars, scalars, strict=True)}
        return named, self.describe(named, checked, backend)

    def allocate(self, named: dict[str, Any], problem: Problem) -> tuple[Any, ...]:
        """The outputs, as the declaration allocates them (also the fake kernels' outputs)."""
        out = []
        for output in self.outputs:
            like = named[output.like]
            shape = None if output.shape is None else output.shape(problem)
            dtype = arrays.dtype_name(like) if output.dtype is None else output.dtype(problem)
            if problem.empty and output.sum:
                out.append(arrays.zeros(like, like.shape if shape is None else shape, dtype))
            else:
                out.append(arrays.empty_like(like, dtype) if shape is None else arrays.empty(like, shape, dtype))
        return tuple(out)

    def plan_for(self, named: dict[str, Any], problem: Problem, backend: str, outputs: tuple[Any, ...] = (),
                 stream: int | None = None) -> Plan:  # fmt: skip
        """The op's own plan for these arrays (outputs not yet allocated are taken as 16-byte aligned, as every
        library's allocator gives them): the autotuner's where the op lists candidates and a CUDA `stream` is given,
        else `choose`'s."""
        by_name = named | dict(zip((o.name for o in self.outputs), outputs, strict=False))
        streamed = [by_name[n] for n in self.aligned if by_name.get(n) is not None]
        alignment = math.gcd(16, *(arrays.address(a) for a in streamed))
        small = [by_name[n] for n in self.coefficients if by_name.get(n) is not None]
        coefficients = math.gcd(16, *(arrays.address(a) for a in small)) if small else 0
        device = device_of(named, backend)
        placement = Placement(alignment, _sms(backend, device), coefficients)
        if backend == "cuda" and stream is not None and self.candidates is not None:
            from rust_kernels import driver, tuning

            with driver.current(device):
                tuned = tuning.choose(self.candidates(problem, placement), problem, placement, device, stream,
                                      partial(self._rehearsal, named, problem, device))  # fmt: skip
            if tuned is not None:
                return tuned
        return self.choose(problem, placement)

    def _rehearsal(self, named: dict[str, Any], problem: Problem, device: int, stream: int) -> Callable[[Plan], None]:
        """Launches a plan as this call would, on `stream` (the tuner's timing stream), on scratch outputs and
        scratch copies of the mutated inputs (timing leaves the caller's arrays as they were)."""
        mutated = {i.name for i in self.inputs if i.mutated}
        scratch = {n: arrays.empty_like(a) if n in mutated and a is not None else a for n, a in named.items()}
        outputs = self.allocate(scratch, problem)

        def run(plan: Plan) -> None:
            self._launch(plan, scratch, outputs, problem, device, "cuda", stream)

        return run

    def _launch(self, plan: Plan, named: dict[str, Any], outputs: tuple[Any, ...], problem: Problem, device: int,
                backend: str, stream: int) -> list[tuple[Any, ...]]:  # fmt: skip
        """Launches the plan's kernels in order on `stream` (sharing the call's workspaces by name); returns, per
        launch, what the fast path remembers: the checked launch, the grid, where each argument comes from, the
        tail values."""
        decided = []
        spaces: dict[str, Any] = {}  # this call's workspaces by name: its launches share them
        for launch in plan.launches:
            loaded = _loaded(launch.kernel, device, backend)
            values, layout, tail = self._bind(launch, plan.kernel, named, outputs, problem, device, stream, spaces)
            loaded.launch(launch.grid, launch.kernel.block_dim, values, stream=stream)
            decided.append((loaded.checked, launch.grid, layout, tuple(tail)))
        return decided

    def call(self, arrays: tuple[Any, ...], scalars: tuple[Any, ...], backend: str, stream: Any, plan: Any) -> Any:
        """A call through every check (the generated function calls this where the fast path has no decision)."""
        named, problem = self.problem(arrays, scalars, backend)
        forced = plan is not None  # a forced plan is not remembered: the signature's decision is the op's own
        if forced:
            self._check_plan(plan, problem)
        outputs = self.allocate(named, problem)
        if problem.empty:  # nothing to launch
            return self._result(outputs)
        device = device_of(named, backend)
        handle = _stream(backend, device, _first(named), stream)
        if plan is None:
            plan = self.plan_for(named, problem, backend, outputs, handle)  # the stream the tuner times on
        decided = self._launch(plan, named, outputs, problem, device, backend, handle)
        if backend == "cuda" and is_torch(_first(named)) and all(d[0] is not None for d in decided) and not forced:
            self._fast.remember(arrays, scalars, handle, self._like_shapes(problem), decided)
        return self._result(outputs)

    def fast(self, arrays: tuple[Any, ...], scalars: tuple[Any, ...]) -> Any:
        """The fast path alone, on the current stream: the outputs where the signature was decided before, else
        None. For callers that would otherwise prepare the arguments first (rust_kernels.torch)."""
        out = self._fast(arrays, scalars)
        return None if out is None else self._result(out)

    def _result(self, outputs: tuple[Any, ...]) -> Any:
        return outputs[0] if len(self.outputs) == 1 else tuple(outputs)

    def _like_shapes(self, problem: Problem) -> list[tuple[int, tuple[int, ...] | None, Any]]:
        """How the fast path allocates each output: (input, shape or None, torch dtype or None)."""
        from rust_kernels.dtypes import torch_dtype

        return [(i, None if output.shape is None else tuple(output.shape(problem)),
                 None if output.dtype is None else torch_dtype(output.dtype(problem)))
                for i, output in zip(self._like, self.outputs, strict=True)]  # fmt: skip

    def _check_plan(self, plan: object, problem: Problem) -> None:
        kinds = ", ".join(k.__name__ for k in self.kernels)
        if not isinstance(plan, Plan) or not all(isinstance(p.kernel, self.kernels) for p in plan.launches):
            raise ArgumentError(f"plan: expected a rust_kernels.runtime.Plan of {kinds} (as the op's family lists "
                                f"them), got {plan!r}")  # fmt: skip
        for launch in plan.launches:
            # A kernel without parameters runs its dtype beside any parameters' (its key is the dtype alone).
            key = problem.dtype_key if launch.kernel.spec.has_param else problem.dtype
            if launch.kernel.dtype_key != key:
                raise ArgumentError(f"plan: its kernel {launch.kernel.name} runs {launch.kernel.dtype_key}, the "
                                    f"arrays are {problem.dtype_key}")  # fmt: skip
        why = None if self.fits is None else self.fits(plan, problem)
        if why is not None:
            raise ArgumentError(f"plan: {why}")

    def _bind(self, plan: Plan, owner: Kernel, named: dict[str, Any], outputs: tuple[Any, ...], problem: Problem,
              device: int, stream: int, spaces: dict[str, Any]
              ) -> tuple[list[Any], list[int | None], list[Any]]:  # fmt: skip
        """The kernel's arguments, and for the fast path where each comes from: input i (i), output j (-1 - j) or
        the next of the tail values (None). `owner`: the first kernel of the plan, whose workspaces its launches
        share; `spaces`: the call's, by name."""
        values: list[Any] = []
        layout: list[int | None] = []
        tail: list[Any] = []
        inputs = {i.name: k for k, i in enumerate(self.inputs)}
        outs = {o.name: k for k, o in enumerate(self.outputs)}
        declared = {w.name: w for w in plan.workspaces}
        fixed = dict(plan.values)
        like = _first(named)
        order = problem.order
        reads = dict(plan.reads)

        def view(a: Any) -> Any:
            return arrays.permuted(a, order) if order is not None and len(a.shape) == len(order) else a

        for name, _ in plan.kernel.args:
            key = reads.get(name, name.removesuffix("_ptr"))
            if key in inputs and named[key] is not None:
                values.append(view(named[key]))
                layout.append(inputs[key])
                continue
            if key in outs:
                values.append(view(outputs[outs[key]]))
                layout.append(-1 - outs[key])
                continue
            if key in declared:
                if key not in spaces:
                    spaces[key] = _workspace(like, owner, declared[key], device, stream)
                value = spaces[key]
            elif name in fixed:
                value = fixed[name]
            elif name in problem.values:
                value = problem.values[name]
            else:
                raise RustKernelsError(
                    f"op {self.name}: kernel argument {name} of {plan.kernel.name} is bound to "
                    "nothing (no input, output, workspace, plan or problem value so named)"
                )
            values.append(value)
            layout.append(None)
            tail.append(value)
        return values, layout, tail


@dataclass(frozen=True)
class Gradient:
    """The autograd pairing of a torch op: its backward is op `backward`, called with each of its inputs and
    scalars found by name among this op's inputs, outputs and scalars, or as the gradient of an output
    (`grads`: backward input -> this op's output); `gives`: backward output -> the input it is the gradient of."""

    backward: str
    grads: Mapping[str, str]
    gives: Mapping[str, str]


# --- what every op shares ---------------------------------------------------------------------------------------------
def check_arrays(op: Op, named: dict[str, Any], backend: str, traced: bool = False) -> None:
    """Every input an array of a supported library (NumPy for the host emulator, PyTorch or CuPy on the GPU), all
    on one device; optional ones may be None. A lazily negated or conjugated torch view is refused: its memory holds
    other values than it reads as."""
    first: tuple[str, Any] | None = None
    for spec in op.inputs:
        a = named[spec.name]
        if a is None:
            if spec.optional:
                continue
            raise ArgumentError(f"{spec.name}: expected an array, got None")
        if not hasattr(a, "shape") or not hasattr(a, "dtype"):
            raise ArgumentTypeError(f"{spec.name}: expected an array, got {type(a).__name__}")
        torch = arrays.is_torch(a)
        if torch and (a.is_neg() or a.is_conj()):
            raise ArgumentError(f"{spec.name}: a lazily negated or conjugated view: resolve it first "
                                "(resolve_neg(), resolve_conj())")  # fmt: skip
        where = arrays.device_name(a)
        if not traced and backend == "host" and not isinstance(a, np.ndarray):
            raise ArgumentTypeError(f"{spec.name}: expected a NumPy array for backend='host', got {type(a).__name__}")
        if not traced and backend == "cuda" and not where.startswith("cuda"):
            raise ArgumentError(f"{spec.name}: expected a CUDA array for backend='cuda', got one on {where}")
        if first is None:
            first = (spec.name, where)
        elif where != first[1]:
            raise ArgumentError(f"{spec.name}: expected an array on {first[1]} like {first[0]}, got one on {where}")


def _first(named: dict[str, Any]) -> Any:
    """The first array given (optional inputs may be None): it tells the library, device and current stream."""
    return next(a for a in named.values() if a is not None)


def device_of(named: dict[str, Any], backend: str) -> int:
    return 0 if backend == "host" else arrays.device_of(_first(named))


@cache
def _sms(backend: str, device: int) -> int:
    if backend == "host":
        return 1
    from rust_kernels.driver import multiprocessor_count

    return multiprocessor_count(device)


@cache
def _loaded(kernel: Kernel, device: int, backend: str) -> Any:
    return load(kernel, device=device, backend=backend)


def _stream(backend: str, device: int, like: Any, stream: Any) -> int:
    """The CUstream a call launches on: `stream`, or the current stream of `like`'s library (0 on the host, whose
    launches run to completion)."""
    from rust_kernels import driver

    if backend == "host":
        return 0
    return driver.current_stream(device, like) if stream is None else driver.stream_handle(stream)


# Workspaces per (plan's first kernel instance, library, device, stream, name, dtype): each grown to a power of two
# at least the longest asked for. Outgrown ones are kept too: a CUDA graph that captured one still writes it.
_workspaces: dict[tuple, Any] = {}
_outgrown: list[Any] = []


def _workspace(like: Any, kernel: Kernel, space: Workspace, device: int, stream: int) -> Any:
    if isinstance(like, np.ndarray):  # host: fresh and cheap (the call's launches share it)
        return arrays.zeros(like, space.length, space.dtype)
    key = (kernel, type(like).__module__, device, stream, space.name, space.dtype)
    held = _workspaces.get(key)
    if held is None or held.shape[0] < space.length:
        if held is not None:
            _outgrown.append(held)
        length = 1 << max(space.length - 1, 0).bit_length()
        held = _workspaces[key] = arrays.kept_zeros(like, length, space.dtype, stream)
    return held


def _function(op: Op) -> Callable[..., Any]:
    """The op as a Python function with its real signature: inputs, then scalars with their defaults, then the
    keyword-only backend, stream and plan. A call with a decided signature takes the fast path at once."""
    params = [f"{i.name}=None" if i.optional else i.name for i in op.inputs]
    params += [f"{s.name}=_defaults[{k}]" for k, s in enumerate(op.scalars)]
    params += ["*", "backend='cuda'", "stream=None", "plan=None"]
    names = "".join(f"{i.name}, " for i in op.inputs)
    scalars = "".join(f"{s.name}, " for s in op.scalars)
    result = "out[0]" if len(op.outputs) == 1 else "out"
    source = (
        f"def {op.name}({', '.join(params)}):\n"
        f"    arrays, scalars = ({names}), ({scalars})\n"
        "    if backend == 'cuda' and plan is None:\n"
        "        out = _fast(arrays, scalars, None if stream is None else _handle(stream))\n"
        "        if out is not None:\n"
        f"            return {result}\n"
        "    return _call(arrays, scalars, backend, stream, plan)\n"
    )
    from rust_kernels.driver import stream_handle

    namespace: dict[str, Any] = {"_defaults": tuple(s.default for s in op.scalars), "_fast": op._fast,
                                 "_handle": stream_handle, "_call": op.call}  # fmt: skip
    exec(compile(source, f"<rust_kernels op {op.name}>", "exec"), namespace)
    function = namespace[op.name]
    function.__doc__ = op.doc
    function.__module__ = "rust_kernels.ops"
    function.op = op  # type: ignore[attr-defined]
    return function  # type: ignore[no-any-return]
