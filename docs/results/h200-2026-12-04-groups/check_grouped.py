"""GPU cross-check of every check case (check.cases: the families' own plans and shapes) whose plan launches a
reduction over groups of channels (training.GROUPS), against the float64 references and the derived tolerances, as
`python -m rust_kernels run` checks every case."""

from rust_kernels import check
from rust_kernels.families.batch_norm import training

check.run("cuda", where=lambda plan: any(getattr(k.kernel, "vectorized", 0) == training.GROUPS for k in plan.launches))
