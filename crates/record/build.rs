//! Compiles bpf/chainrec.bpf.c into a libbpf skeleton (needs clang), and generates the Rust
//! side of the BPF ABI, bpf/chainrec_abi.h, with bindgen (needs libclang).
use bindgen::callbacks::{IntKind, ParseCallbacks};
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
    generate_abi(&bpf_dir);
    println!("cargo:rerun-if-changed={}", src.display());
    // The program's parts (included by chainrec.bpf.c).
    for entry in std::fs::read_dir(&bpf_dir).expect("read bpf/") {
        let path = entry.expect("read bpf/").path();
        if path.extension().is_some_and(|x| x == "h") {
            println!("cargo:rerun-if-changed={}", path.display());
        }
    }
    println!(
        "cargo:rerun-if-changed={}",
        bpf_dir.join("vmlinux.h").display()
    );
}

/// The Rust type of each ABI constant (a `#define` has none): the type of the struct field
/// or map index it is compared with.
#[derive(Debug)]
struct AbiTypes;

impl ParseCallbacks for AbiTypes {
    fn int_macro(&self, name: &str, _value: i64) -> Option<IntKind> {
        let u8_prefixes = ["EV_", "ST_", "UST_", "CTX_", "CR_", "THR_", "MODE_"];
        if u8_prefixes.iter().any(|p| name.starts_with(p))
            || [
                "GO_PARK",
                "GO_READY",
                "GO_EXECUTE",
                "GO_STW_STOP",
                "GO_STW_START",
            ]
            .contains(&name)
        {
            return Some(IntKind::U8);
        }
        let usize_names = [
            "C_NR",
            "P_NR",
            "SC_NR",
            "SC_LOST",
            "SC_FILTERED",
            "MAX_FRAMES",
        ];
        if usize_names.contains(&name) {
            return Some(IntKind::Custom {
                name: "usize",
                is_signed: false,
            });
        }
        Some(IntKind::U32)
    }
}

/// bpf/chainrec_abi.h -> OUT_DIR/chainrec_abi.rs (structs with bindgen's layout tests,
/// constants with the types of [`AbiTypes`]).
fn generate_abi(bpf_dir: &std::path::Path) {
    let header = bpf_dir.join("chainrec_abi.h");
    let out = PathBuf::from(env::var_os("OUT_DIR").expect("OUT_DIR")).join("chainrec_abi.rs");
    let bindings = bindgen::Builder::default()
        // <linux/types.h> gives the __u* types vmlinux.h gives the BPF side.
        .header_contents(
            "chainrec_abi_wrapper.h",
            "#include <linux/types.h>\n#include \"chainrec_abi.h\"\n",
        )
        .clang_arg(format!("-I{}", bpf_dir.display()))
        .allowlist_file(".*chainrec_abi\\.h")
        .parse_callbacks(Box::new(AbiTypes))
        .derive_default(true)
        .derive_debug(true)
        .use_core()
        .generate()
        .unwrap_or_else(|e| {
            panic!(
                "chainrec-record: generating the Rust side of {} failed (bindgen needs \
                 libclang: install libclang-dev or run ./x.sh ensure_packages): {e}",
                header.display()
            )
        });
    bindings
        .write_to_file(&out)
        .unwrap_or_else(|e| panic!("chainrec-record: writing {}: {e}", out.display()));
    println!("cargo:rerun-if-changed={}", header.display());
}
