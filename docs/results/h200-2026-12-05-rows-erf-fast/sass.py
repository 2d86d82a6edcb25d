"""Static figures of the changed row kernels (here, no GPU): registers (ptxas -v) and SASS instructions (nvdisasm,
from the nvidia-cuda-nvdisasm wheel: NVDISASM=.../bin/nvdisasm) of each kernel before (before/, HEAD's templates)
and after (ab.py's pairs, the norms' tile and packed forms too), at every bench plan; for bias + GELU also the
straight-line body of one 16-byte pack (first 16-byte load to first 16-byte store). Static counts, not timings.

    python sass.py
"""

import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import ab  # noqa: E402

import rust_kernels  # noqa: E402
from rust_kernels import toolchain  # noqa: E402

NVDISASM = os.environ.get("NVDISASM", "nvdisasm")
INSTRUCTION = re.compile(r"/\*[0-9a-f]{4}\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)")


def figures(kernel) -> str:
    with tempfile.TemporaryDirectory() as tmp:
        ptx, cubin = Path(tmp) / "k.ptx", Path(tmp) / "k.cubin"
        ptx.write_text(rust_kernels.compile(kernel, arch="sm_90").ptx)
        log = subprocess.run([toolchain.find_ptxas(), "-arch=sm_90", "-v", ptx, "-o", cubin],
                             capture_output=True, text=True, check=True).stderr  # fmt: skip
        sass = subprocess.run([NVDISASM, "-c", cubin], capture_output=True, text=True, check=True).stdout
    ops = INSTRUCTION.findall(sass)
    body = ""
    if kernel.name.startswith("bias_gelu"):
        load = next(i for i, op in enumerate(ops) if op.startswith("LDG.E.128"))
        store = next(i for i, op in enumerate(ops) if op.startswith("STG.E.128") and i > load)
        body = f", pack body {store - load + 1}"
    regs = re.search(r"Used (\d+) registers", log).group(1)
    mufu = sum(op.startswith("MUFU") for op in ops)
    return f"{regs} registers, {len(ops)} instructions ({mufu} MUFU){body}"


for case, dtype, n, threads, forms in ab.pairs():
    for k, (label, kernel) in enumerate(forms):
        plan = f"N={n:<5} {threads:>3} x {kernel.consts.get('ELEMENTS', '-')}" if k == 0 else ""
        print(
            f"{case.label if k == 0 else '':<24} {dtype if k == 0 else '':<4} {plan:<16} {label:<7} {figures(kernel)}"
        )
