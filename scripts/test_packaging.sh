#!/usr/bin/env bash
# Packaging: the sdist and the wheel, installed (not editable) in a fresh venv and used from outside the checkout:
# the seed op in the host emulator, and the examples/ kernel written with the public API alone.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
work=$(mktemp -d /tmp/rk-packaging.XXXXXX)
trap 'rm -rf "$work"' EXIT

echo "[packaging] sdist and wheel (maturin)"
maturin sdist -o "$work/dist" 2>&1 | tail -1
maturin build --release -o "$work/dist" 2>&1 | tail -1
listing=$(tar tzf "$work"/dist/*.tar.gz)
grep -q "/codegen/batch_norm/batch_norm_2d_nchw_backward.toml" <<<"$listing"

python3 -m venv "$work/venv"
pip=("$work/venv/bin/python" -m pip install -q --disable-pip-version-check)
"${pip[@]}" $(grep -E '^(jinja2|numpy|ml_dtypes)==' requirements.txt)

CHECKOUT_SOURCE_KEY=$(PYTHONPATH=python python3 -c "from rust_kernels.builder import source_key
from rust_kernels.kernels import BatchNorm2dNchwBackward; print(source_key(BatchNorm2dNchwBackward(256), 'sm_90'))")
export CHECKOUT_SOURCE_KEY

use_installed() {
  # From an empty directory, with a cache of its own: nothing of the checkout can be reached.
  mkdir -p "$work/elsewhere" && cp -r "$root/examples" "$work/elsewhere/"
  (cd "$work/elsewhere" && RUST_KERNELS_CACHE_DIR="$work/cache" RUST_KERNELS_QUIET=1 "$work/venv/bin/python" - <<'PY'
import numpy as np, rust_kernels, rust_kernels.resources as res
assert "site-packages" in rust_kernels.__file__ and "site-packages" in str(res.root()), (rust_kernels.__file__, res.root())
from rust_kernels import ops, registry
fam = registry.family("batch_norm_2d_nchw_backward")
data = fam.inputs((2, 3, 5, 7), "f32")
out = ops.batch_norm_2d_nchw_backward(*(data[n] for n in ("dy", "x", "weight", "running_mean", "running_var")), backend="host")
plan = fam.plans("host", (2, 3, 5, 7), "f32")[0]
from rust_kernels import check
assert check.compare(fam, plan, (2, 3, 5, 7), data, out).passed
print("[packaging] installed package: seed op in the host emulator matches the reference")
import os
from rust_kernels.builder import source_key
from rust_kernels.kernels import BatchNorm2dNchwBackward
want = os.environ["CHECKOUT_SOURCE_KEY"]
assert source_key(BatchNorm2dNchwBackward(256), "sm_90") == want, "prebuilt kernels would not be found"
print("[packaging] installed package: kernels hash as in the checkout (prebuilt entries are found)")
from rust_kernels.bench import suite
assert len(suite.shapes("batch_norm_2d")) >= 60, suite.SUITES
print(f"[packaging] installed package: the shape suite ({len(suite.shapes('batch_norm_2d'))} shapes) ships")
from rust_kernels import tuning
h200 = len(tuning.shipped("nvidia-h200-132sm"))
assert h200 > 1000, "the H200 tuning table does not ship"
print(f"[packaging] installed package: the H200 tuning table ({h200} entries) ships")
PY
  )
  (cd "$work/elsewhere" && RUST_KERNELS_CACHE_DIR="$work/cache" RUST_KERNELS_QUIET=1 \
    "$work/venv/bin/python" examples/rows/run.py --dtype f32 bf16 --block 64 | tail -1)
}

echo "[packaging] the wheel, installed in a fresh venv"
"${pip[@]}" --no-deps "$work"/dist/*.whl
use_installed

echo "[packaging] a wheel built from the sdist (isolated build: maturin from PyPI)"
"$work/venv/bin/python" -m pip wheel -q --no-deps -w "$work/from-sdist" "$work"/dist/*.tar.gz
"${pip[@]}" --no-deps --force-reinstall "$work"/from-sdist/*.whl
use_installed
echo "[packaging] ok"
