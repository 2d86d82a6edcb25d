"""Builds the training BatchNorm kernels the probe times (reductions and elementwise launches), as the templates in
the checkout are now, into variants/<label>/<kernel id>/cap-<N>/: the PTX with its registers capped at N (.maxnreg;
"cap-none": as built) and its sm_90 cubin from ptxas, as the package builds one (run here, where Rust is, once per
template variant):

    python build_variants.py <label> [nchw]    # nchw: the NCHW instances (CHANNELS_LAST = 0) instead

registers.txt beside it: what ptxas reports for each.
"""

import re
import shutil
import subprocess
import sys
from pathlib import Path

from rust_kernels import builder, kernels
from rust_kernels.toolchain import find_ptxas

HERE = Path(__file__).resolve().parent
CAPS = (None, 80, 64)
INSTANCES = [
    (name, dtype, param, vectorized, channels_last, extra)
    for name, extra in (
        ("batch_norm_2d_batch_stats", {}),
        ("batch_norm_2d_backward_reduce", {}),
        ("batch_norm_2d_backward_reduce_act", {"activation": 1}),
        ("batch_norm_2d_normalize", {}),
        ("batch_norm_2d_backward_elementwise", {}),
    )
    for dtype, param, vectorized in (("bf16", "f32", 1), ("bf16", "f32", 2), ("f32", "f32", 1))
    for channels_last in (1, 0)
]


def instance(name: str, dtype: str, param: str, vectorized: int, channels_last: int, extra: dict) -> kernels.Kernel:
    cls = next(c for c in kernels.CATALOGUE.values() if c.spec.name == name)
    return cls(dtype=dtype, param_dtype=param, block=256, vectorized=vectorized, channels_last=channels_last, **extra)


def main(label: str, channels_last: int) -> None:
    out = HERE / "variants" / label
    for spec in (s for s in INSTANCES if s[4] == channels_last):
        kernel = instance(*spec)
        entry = builder.cached_entry(kernel, "sm_90")
        target = out / kernel.id
        shutil.rmtree(target, ignore_errors=True)
        target.mkdir(parents=True)
        ptx = entry.file("kernel.ptx").read_text()
        for cap in CAPS:
            where = target / f"cap-{cap or 'none'}"
            where.mkdir()
            capped = ptx if cap is None else re.sub(r"(\.maxntid [^\n]*\n)", rf"\1.maxnreg {cap}\n", ptx, count=1)
            (where / "kernel.ptx").write_text(capped)
            shutil.copy(entry.file("meta.json"), where / "meta.json")
            run = subprocess.run(
                [
                    str(find_ptxas()),
                    "-arch=sm_90",
                    "-v",
                    str(where / "kernel.ptx"),
                    "-o",
                    str(where / "kernel.sm_90.cubin"),
                ],
                capture_output=True,
                text=True,
                check=True,
            )
            used = re.search(r"entry_point\n.*\n.*Used (\d+) registers", run.stderr)
            spill = re.search(r"entry_point\n\s*(\d+) bytes stack frame, (\d+) bytes spill stores", run.stderr)
            line = f"{label} {kernel.id} cap {cap}: {used[1]} registers, {spill[1]} B stack, {spill[2]} B spill"
            with (HERE / "registers.txt").open("a") as log:
                print(line, file=log)
            print(line)


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2:] != ["nchw"]))
