#!/usr/bin/env bash
# On the GPU machine, from the repository root: installs the sm_90 wheel carried as whl_carry/whl.tar.xz (or $1).
set -euo pipefail
# the wheel travels as an xz tarball of its files (the zip is over the device's carry limit beside the checkout)
w=/tmp/wheel && rm -rf $w && mkdir -p $w/files && tar xJf "${1:-whl_carry/whl.tar.xz}" -C $w/files
python - "$w" <<'PY'
import sys, zipfile, pathlib
root = pathlib.Path(sys.argv[1]) / "files"
with zipfile.ZipFile(f"{sys.argv[1]}/rust_kernels-0.1.0-cp311-abi3-manylinux_2_34_x86_64.whl", "w", zipfile.ZIP_DEFLATED) as z:
    for f in sorted(root.rglob("*")):
        if f.is_file():
            z.write(f, f.relative_to(root).as_posix())
PY
python -m pip install -q --no-deps --force-reinstall $w/*.whl 2>&1 | grep -v WARN
