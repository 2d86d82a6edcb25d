#!/usr/bin/env bash
# The test suite: lint and format checks, the device-support crate's emulator tests, pytest (GPU tests run where a
# CUDA device is present and are reported as skipped elsewhere), then the packaging test (sdist and wheel).
set -euo pipefail
cd "$(dirname "$0")/.."
echo "== ruff"
ruff check python tests examples
ruff format --check python tests examples
echo "== cargo fmt, clippy, test"
# The emulator's OS-thread mode (its threads elsewhere than x86_64 Linux, where they are fibers) as well, in a target
# directory of its own.
(cd rust_kernels && cargo fmt --all --check && cargo clippy --workspace --all-targets -q -- -D warnings \
  && cargo test -q -p cuda_std \
  && export RUSTFLAGS="--cfg rk_emulator_threads" CARGO_TARGET_DIR=target/emulator-threads \
  && cargo clippy -p cuda_std --all-targets -q -- -D warnings && cargo test -q -p cuda_std)
echo "== pytest"
if [ $# -eq 0 ]; then
  # The host cross-check (tests/test_host.py) runs in a process of its own: it loads a host library per kernel
  # instance, and a library stays mapped until its process ends. (The abort after about a thousand libraries,
  # "out of TLS keys", was each library's std taking a pthread key: launches now start bare threads.)
  # --durations: the slowest tests, to keep CI's time in view
  python3 -m pytest -q --durations=25 --ignore=tests/test_host.py
  python3 -m pytest -q --durations=10 tests/test_host.py
else
  python3 -m pytest -q "$@"
fi
echo "== packaging (sdist, wheel, installed use outside the checkout)"
bash scripts/test_packaging.sh
