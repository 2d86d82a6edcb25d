//! Renders the host catalogue with the package's own generator (the same `source` text that goes to PTX), so
//! the extension never holds a second copy of a kernel.

use std::env;
use std::path::PathBuf;
use std::process::Command;

fn main() {
    let manifest = PathBuf::from(env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    let root = manifest.join("../..").canonicalize().expect("the repository root");
    let out = PathBuf::from(env::var("OUT_DIR").expect("cargo sets OUT_DIR")).join("catalogue.rs");
    // maturin passes the target interpreter as PYO3_PYTHON; it must have jinja2 installed.
    let python = env::var("PYO3_PYTHON").unwrap_or_else(|_| "python3".into());
    let status = Command::new(&python)
        .args(["-m", "rust_kernels", "generate", "--host-catalogue"])
        .arg(&out)
        .env("PYTHONPATH", root.join("python"))
        .status()
        .unwrap_or_else(|err| panic!("running {python} -m rust_kernels generate: {err}"));
    assert!(
        status.success(),
        "{python} -m rust_kernels generate --host-catalogue failed ({status})"
    );
    for input in ["codegen", "python/rust_kernels"] {
        println!("cargo:rerun-if-changed={}", root.join(input).display());
    }
    println!("cargo:rerun-if-env-changed=PYO3_PYTHON");
}
