#!/usr/bin/env bash
# Set-up for a fresh Debian 12 machine: the Rust-to-PTX toolchain (Debian's Rust 1.96 with its library source and
# LLVM 22), pinned Python packages (ptxas comes with nvidia-cuda-nvcc; PyTorch 2.11.0 for rust_kernels.torch and its
# tests, about a minute), and the package itself with its host emulator extension built by maturin. Safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."
SUDO=$([ "$(id -u)" = 0 ] || echo sudo)

if ! dpkg -s rustc-web rust-web-src cargo-web llvm-22 >/dev/null 2>&1; then
  echo "[setup] installing rustc-web, rust-web-src, cargo-web, llvm-22 (Debian 12) ..."
  $SUDO apt-get update -q
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q rustc-web rust-web-src cargo-web llvm-22
fi
if ! python3 -c "import ensurepip, venv" >/dev/null 2>&1; then  # the packaging test installs into a fresh venv
  echo "[setup] installing python3-venv ..."
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q python3-venv
fi
if ! command -v cargo >/dev/null; then
  echo "[setup] no cargo on PATH: the host extension needs one (rustup, or Debian's cargo-web)" >&2
  exit 1
fi

echo "[setup] installing Python packages (requirements.txt, with PyTorch) ..."
start=$SECONDS
python3 -m pip install -q -r requirements.txt
echo "[setup] Python packages ready in $((SECONDS - start)) s"
echo "[setup] building the package and its host emulator extension (maturin) ..."
python3 -m pip install -q --no-build-isolation -e .
python3 -c "import rust_kernels._host, rust_kernels.toolchain as t; t.find_toolchain(); print('[setup] ready:', t.find_ptxas())"
