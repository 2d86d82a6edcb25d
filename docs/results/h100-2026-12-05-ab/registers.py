"""Registers and PTX instructions of the RMSNorm and LayerNorm examples for sm_90, f32 and bf16, at three plans
(this checkout's package; ptxas on PATH). Run at 4a747ae (row::Tile, `registers_tile.log`) and at 16e2588
(row::PackedTile, `registers_packed.log`), from the repository root:

    PYTHONPATH=python python3 docs/results/h100-2026-12-05-ab/registers.py
"""

import re
import subprocess
import tempfile

import rust_kernels

program = rust_kernels.Program("examples/rows")
for name in ("rms_norm_forward", "layer_norm_forward"):
    for dtype in ("f32", "bf16"):
        for block, elements in ((128, 16), (256, 32), (512, 32)):
            ptx = rust_kernels.compile(program.kernel(name, block=block, elements=elements, dtype=dtype)).ptx
            with tempfile.NamedTemporaryFile("w", suffix=".ptx") as f:
                f.write(ptx)
                f.flush()
                report = subprocess.run(["ptxas", "-arch=sm_90", "-v", f.name, "-o", "/dev/null"],
                                        capture_output=True, text=True, check=True).stderr  # fmt: skip
            registers = re.findall(r"Used (\d+) registers", report)
            lines = [ln.strip() for ln in ptx.splitlines() if ln.strip()]
            body = [ln for ln in lines if not ln.startswith(("//", ".", "$", "{", "}")) and not ln.endswith(":")]
            print(f"{name:20s} {dtype:5s} block={block:4d} elements={elements:3d} registers={registers} "
                  f"ptx_instructions={len(body)}", flush=True)  # fmt: skip
