"""Whether each _packed kernel instance builds (sm_90) to the PTX that the same instance of the kernel it stands in
for built to with packed_coefficients.patch applied, the kernel's name aside: DEST is that build's export (build.py
run on the patched tree; this session's /tmp/rkcdest).

    python ptx_same.py DEST      # prints the instances whose PTX differs, then the counts
"""

import json
import sys
from pathlib import Path

from rust_kernels import builder, kernels


def main(dest: Path) -> None:
    patched = {}
    for entry in (dest / "kernels").iterdir():
        meta = json.loads((entry / "meta.json").read_text())
        patched[meta["id"]] = (entry / "kernel.ptx").read_text()
    same = differ = missing = 0
    for k in kernels.instances():
        if not k.name.endswith("_packed"):
            continue
        stand_in = k.id.replace("_packed__", "__").rsplit("__", 1)[0]  # without the PACKED const's value
        if stand_in not in patched:
            missing += 1
            continue
        ptx = builder.build(k, "sm_90").read_text().replace(k.name, "KERNEL")
        if ptx == patched[stand_in].replace(k.name.removesuffix("_packed"), "KERNEL"):
            same += 1
        else:
            differ += 1
            print("differs", k.id)
    print(same, "same,", differ, "differ,", missing, "not in the patched build")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
