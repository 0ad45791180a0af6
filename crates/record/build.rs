//! Compiles bpf/chainrec.bpf.c into a libbpf skeleton (needs clang).
use libbpf_cargo::SkeletonBuilder;
use std::env;
use std::path::PathBuf;

fn main() {
    let manifest = PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR"));
    let bpf_dir = manifest.join("../../bpf");
    let src = bpf_dir.join("chainrec.bpf.c");
    let out = PathBuf::from(env::var_os("OUT_DIR").expect("OUT_DIR")).join("chainrec.skel.rs");
    let arch = match env::var("CARGO_CFG_TARGET_ARCH").as_deref() {
        Ok("x86_64") => "x86",
        Ok("aarch64") => "arm64",
        Ok(other) => {
            panic!("chainrec-record: unsupported target arch {other} (bpf/vmlinux.h is x86_64)")
        }
        Err(_) => "x86",
    };
    if let Err(e) = SkeletonBuilder::new()
        .source(&src)
        .clang_args([
            format!("-I{}", bpf_dir.display()),
            format!("-D__TARGET_ARCH_{arch}"),
            "-Wno-compare-distinct-pointer-types".to_string(),
            "-O2".to_string(),
            // BPF ISA v3 (Linux 5.1+; atomics 5.12+): the lazy user half claims its per-CPU
            // scratch with a compare-and-swap, which v1 cannot encode.
            "-mcpu=v3".to_string(),
        ])
        .build_and_generate(&out)
    {
        panic!(
            "chainrec-record: compiling {} failed (needs clang with the BPF target): {e:#}",
            src.display()
        );
    }
    println!("cargo:rerun-if-changed={}", src.display());
    println!(
        "cargo:rerun-if-changed={}",
        bpf_dir.join("vmlinux.h").display()
    );
}
