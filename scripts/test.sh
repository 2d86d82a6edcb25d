#!/usr/bin/env bash
# The test suite: lint and format checks, the device-support crate's emulator tests, pytest (GPU tests run where a
# CUDA device is present and are reported as skipped elsewhere), then the packaging test (sdist and wheel).
set -euo pipefail
cd "$(dirname "$0")/.."
echo "== ruff"
ruff check python tests examples
ruff format --check python tests examples
echo "== cargo fmt, clippy, test"
(cd rust_kernels && cargo fmt --all --check && cargo clippy --workspace --all-targets -q -- -D warnings \
  && cargo test -q -p cuda_std)
echo "== pytest"
python3 -m pytest -q "$@"
echo "== packaging (sdist, wheel, installed use outside the checkout)"
bash scripts/test_packaging.sh
