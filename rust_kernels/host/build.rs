//! Packs the package's sources into the Python package, so a wheel (or a build from the sdist) carries them: the
//! kernel specs and templates (codegen/), the device-support crates and the lock file are copied under
//! python/rust_kernels/_data/, which rust_kernels.resources reads when the package runs outside a checkout.

use std::env;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

fn copy_tree(from: &Path, to: &Path) -> io::Result<()> {
    fs::create_dir_all(to)?;
    for entry in fs::read_dir(from)? {
        let entry = entry?;
        let name = entry.file_name();
        if name == "target" || name.to_string_lossy().starts_with('.') {
            continue; // build output and editor or VCS files
        }
        let (source, dest) = (entry.path(), to.join(&name));
        if entry.file_type()?.is_dir() {
            copy_tree(&source, &dest)?;
        } else {
            fs::copy(&source, &dest)?;
        }
    }
    Ok(())
}

fn main() {
    let manifest = PathBuf::from(env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    let root = manifest.join("../..");
    let workspace = root.join("rust_kernels");
    let data = root.join("python/rust_kernels/_data");
    let staging = root.join("python/rust_kernels/.data-staging");
    let _ = fs::remove_dir_all(&staging);
    let copied = copy_tree(&root.join("codegen"), &staging.join("codegen"))
        .and_then(|()| copy_tree(&workspace.join("cuda_std"), &staging.join("rust_kernels/cuda_std")))
        .and_then(|()| {
            copy_tree(
                &workspace.join("cuda_std_macros"),
                &staging.join("rust_kernels/cuda_std_macros"),
            )
        })
        .and_then(|()| fs::copy(workspace.join("Cargo.lock"), staging.join("rust_kernels/Cargo.lock")).map(drop))
        .and_then(|()| {
            let _ = fs::remove_dir_all(&data);
            fs::rename(&staging, &data)
        });
    if let Err(err) = copied {
        panic!(
            "packing codegen/ and the device-support crates into {}: {err}",
            data.display()
        );
    }
    for input in [
        "codegen",
        "rust_kernels/cuda_std/src",
        "rust_kernels/cuda_std_macros/src",
        "rust_kernels/Cargo.lock",
    ] {
        println!("cargo:rerun-if-changed={}", root.join(input).display());
    }
    // Rerun when the copy was removed.
    println!("cargo:rerun-if-changed={}", data.join("codegen").display());
}
