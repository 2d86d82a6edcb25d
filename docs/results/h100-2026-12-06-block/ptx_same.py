"""Whether the block kernels built from today's sources have the PTX of an earlier build (DIR: a kernel cache such as
the one carried to the GPU, `probe.py build`'s): one line, how many instances match byte for byte.

    python ptx_same.py DIR
"""

import hashlib
import json
import sys
from pathlib import Path

from rust_kernels import builder, kernels
from rust_kernels.families.batch_norm import training


def ptx_digest(entry_dir: Path) -> str:
    return hashlib.sha256((entry_dir / "kernel.ptx").read_bytes()).hexdigest()


earlier = {}
for entry in Path(sys.argv[1], "kernels").iterdir():
    meta = json.loads((entry / "meta.json").read_text())
    if any(meta["id"].startswith(cls.spec.name + "__") for cls in training.BLOCK.values()):
        earlier[meta["id"]] = ptx_digest(entry)
now = [k for k in kernels.instances(list(training.BLOCK.values())) if k.id in earlier]
entries = builder.cached_entries([(k, "sm_90") for k in now], builder.default_jobs())
same = sum(ptx_digest(e.path) == earlier[k.id] for k, e in zip(now, entries, strict=True))
print(f"{same} of {len(now)} block instances (of {len(earlier)} in {sys.argv[1]}) have byte-identical PTX")
