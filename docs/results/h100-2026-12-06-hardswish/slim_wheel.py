"""Slims an unpacked sm_90 wheel (scripts/build_wheel.sh dist sm_90, 98 MB: over the device's carry limit beside the
checkout) to the prebuilt kernels run.sh launches: every kernel of a Hardswish check case, and every instance in f32
and bf16-f32 (the models, under autocast, and the model-gradient script). The other entries, their source pointers
and their RECORD lines go; what is left installs as the wheel does.

    python slim_wheel.py DIR   # DIR: the wheel unpacked (python -m zipfile -e WHEEL DIR); then tar cJf ... -C DIR .
"""

import json
import shutil
import sys
from pathlib import Path

from rust_kernels import check, kernels, registry


def kept_ids() -> set[str]:
    hardswish = {launch.kernel.id for _, plan, _ in check.cases("cuda", registry.families())
                 if any(launch.kernel.consts.get("ACTIVATION") == 4 for launch in plan.launches)
                 for launch in plan.launches}  # fmt: skip
    return hardswish | {k.id for k in kernels.instances() if k.dtype_key in ("f32", "bf16-f32")}


def main(root: Path) -> None:
    prebuilt, wanted, kept = root / "rust_kernels" / "_prebuilt", kept_ids(), set()
    for entry in (prebuilt / "kernels").iterdir():
        if json.loads((entry / "meta.json").read_text())["id"] in wanted:
            kept.add(entry.name)
        else:
            shutil.rmtree(entry)
    for pointer in (prebuilt / "by-source").iterdir():
        if pointer.read_text().strip() not in kept:
            pointer.unlink()
    record = next(root.glob("*.dist-info")) / "RECORD"
    lines = [line for line in record.read_text().splitlines() if (root / line.split(",")[0]).exists()]
    record.write_text("\n".join(lines) + "\n")
    print(f"{len(kept)} of the wheel's kernel entries kept")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
