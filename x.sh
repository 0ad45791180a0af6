#!/usr/bin/env bash
# chainrec developer entry point: installs what a fresh machine lacks, then builds and runs.
#   ./x.sh demo   record the built-in chain workload and write its chain graph (needs root)
#   ./x.sh test   run the whole test suite (BPF tests need root; see README), then the
#                 kernel matrix (./x.sh kernels)
#   ./x.sh package   build the one-file chainrec for servers: target/package/chainrec
#   ./x.sh kernels   boot each kernel of the matrix in QEMU and check the packaged binary there
set -euo pipefail
cd "$(dirname "$0")"

log() { printf '\033[1mx.sh:\033[0m %s\n' "$*" >&2; }

# Debian packages the build and the tests need, by the command or file that proves them present.
ensure_packages() {
    local want=()
    command -v clang >/dev/null || want+=(clang)
    command -v llvm-strip >/dev/null || want+=(llvm)
    command -v pkg-config >/dev/null || want+=(pkg-config)
    command -v make >/dev/null || want+=(make) # libbpf-sys builds libbpf with make
    command -v bpftool >/dev/null || want+=(bpftool)
    command -v zstd >/dev/null || want+=(zstd)
    [ -e /usr/include/libelf.h ] || want+=(libelf-dev)
    [ -e /usr/include/zlib.h ] || want+=(zlib1g-dev)
    # crates/record/build.rs generates the Rust side of bpf/chainrec_abi.h with bindgen,
    # which loads libclang and reads <linux/types.h>.
    compgen -G '/usr/lib/*/libclang*.so*' >/dev/null || compgen -G '/usr/lib/llvm-*/lib/libclang*.so*' >/dev/null ||
        want+=(libclang-dev)
    [ -e /usr/include/linux/types.h ] || want+=(linux-libc-dev)
    if [ "${1:-}" = package ] || [ "${1:-}" = kernels ] || [ "${1:-}" = test ]; then
        # objcopy splits the debug info off the packaged binary.
        command -v objcopy >/dev/null || want+=(binutils)
    fi
    if [ "${1:-}" = kernels ] || [ "${1:-}" = test ]; then
        # The kernel matrix: QEMU boots Debian's kernels (downloaded by tools/kernels/run.sh)
        # with an initramfs around busybox-static.
        command -v qemu-system-x86_64 >/dev/null || want+=(qemu-system-x86)
        (LC_ALL=C ldd /bin/busybox 2>&1 || true) | grep -q 'not a dynamic' || want+=(busybox-static)
    fi
    if [ "${1:-}" = test ]; then
        [ -x /usr/bin/chromium ] || want+=(chromium)
        # protoc decodes the Perfetto/pprof exports independently of our own prost structs.
        command -v protoc >/dev/null || want+=(protobuf-compiler)
        command -v python3 >/dev/null || want+=(python3)
        # go tool pprof reads the pprof export as users do (crates/report/tests/pprof.rs).
        command -v go >/dev/null || want+=(golang-go)
        # Real-kernel tests: ip (veth pair between network namespaces), taskset (pinned
        # run-queue contention) and perl (its victim).
        command -v ip >/dev/null || want+=(iproute2)
        command -v taskset >/dev/null || want+=(util-linux)
        command -v perl >/dev/null || want+=(perl)
        # The unwinding tests compare recorded user stacks with gdb's backtraces, and build
        # their frame-pointer workload with cc.
        command -v gdb >/dev/null || want+=(gdb)
        command -v cc >/dev/null || want+=(gcc)

        # The independent reference for waits and wakers (tests/real_bpftrace.rs).
        command -v bpftrace >/dev/null || want+=(bpftrace)
        # io_uring, sqpoll and io-wq workloads of tests/real_iouring.rs.
        command -v fio >/dev/null || want+=(fio)
        # Spark's JVM: PySpark in local mode reads the Parquet fleet layout (tests/parquet.rs).
        command -v java >/dev/null || want+=(default-jre-headless)
        # tests/real_java.rs compiles its JIT workload (testdata/java) with javac.
        command -v javac >/dev/null || want+=(default-jdk-headless)
        # The venv of the Python readers (ensure_python_packages below).
        /usr/bin/python3 -c 'import ensurepip, venv' 2>/dev/null || want+=(python3-venv)
    fi
    if [ ${#want[@]} -gt 0 ]; then
        if [ "$(id -u)" != 0 ]; then
            log "missing Debian packages: ${want[*]} — install them (sudo apt-get install ${want[*]}) and rerun"
            exit 1
        fi
        log "installing Debian packages: ${want[*]}"
        export DEBIAN_FRONTEND=noninteractive
        apt-get update -qq
        apt-get install -y -qq "${want[@]}" >/dev/null
    fi
    if [ "${1:-}" = test ]; then
        ensure_python_packages
    fi
    if ! command -v cargo >/dev/null; then
        log "cargo not found: install a Rust toolchain (https://rustup.rs) and rerun"
        exit 1
    fi
}

# PyPI packages the tests read exports with (third-party readers, as users run them), in a
# venv under target/ (Debian's python3 refuses pip installs outside one). The tests find it
# through CHAINREC_PYTHON; without it they skip loudly (CHAINREC_REQUIRE_TOOLS=1: fail).
#   duckdb, pyarrow: crates/parquet/tests + tests/parquet.rs read `export --parquet`;
#   perfetto (pinned: a new schema is a deliberate update): its generated protos decode the
#   Perfetto export (crates/report/tests/perfetto_schema.rs);
#   pyspark: Spark in local mode reads `export --parquet-dir` as a fleet does (tests/parquet.rs).
PY_PACKAGES=(duckdb pyarrow perfetto==0.59.1 pyspark)
ensure_python_packages() {
    local venv=target/pyvenv
    if [ ! -x "$venv/bin/python" ]; then
        log "creating the Python venv of the tests ($venv)"
        /usr/bin/python3 -m venv "$venv"
    fi
    if ! "$venv/bin/python" -m pip show -q "${PY_PACKAGES[@]%%==*}" >/dev/null 2>&1; then
        log "installing Python packages into $venv: ${PY_PACKAGES[*]}"
        "$venv/bin/python" -m pip install -q "${PY_PACKAGES[@]}"
    fi
    CHAINREC_PYTHON="$PWD/$venv/bin/python"
    export CHAINREC_PYTHON
}

# The packaged binary: static (glibc with crt-static; libbpf, libelf and zlib as static
# archives; the BPF object is inside the skeleton), stripped, its debug info split off into
# target/package/chainrec.debug (linked by .gnu_debuglink, for our own crash reports).
PACKAGE_MAX_BYTES=$((20 * 1024 * 1024))
build_package() {
    local target=x86_64-unknown-linux-gnu out=target/package
    log "building the packaged chainrec (static, $target)"
    # relocation-model=static: a plain static executable, not a static PIE (which ldd
    # reports as "statically linked" and which needs the start code to relocate itself).
    # --target keeps the static flags off build scripts and proc macros, and the artifacts
    # apart from the ordinary release build (target/$target/release).
    RUSTFLAGS="-C target-feature=+crt-static -C relocation-model=static" \
        LIBBPF_SYS_LIBRARY_PATH="/usr/lib/$(gcc -print-multiarch 2>/dev/null || echo x86_64-linux-gnu)" \
        cargo build --release --locked --target "$target" --features static --bin chainrec
    local built=target/$target/release/chainrec
    mkdir -p "$out"
    rm -f "$out/chainrec" "$out/chainrec.debug"
    objcopy --only-keep-debug "$built" "$out/chainrec.debug"
    (cd "$out" && objcopy --strip-all --add-gnu-debuglink=chainrec.debug "../../$built" chainrec)
    if ! (LC_ALL=C ldd "$out/chainrec" 2>&1 || true) | grep -q 'not a dynamic executable'; then
        log "$out/chainrec is not static: $(ldd "$out/chainrec" 2>&1 | head -3)"
        exit 1
    fi
    local size
    size=$(stat -c %s "$out/chainrec")
    if [ "$size" -gt "$PACKAGE_MAX_BYTES" ]; then
        log "$out/chainrec is $size bytes, over the $PACKAGE_MAX_BYTES-byte budget"
        exit 1
    fi
    "$out/chainrec" --version >/dev/null
    log "$out/chainrec: $size bytes, static, stripped (debug info: $out/chainrec.debug, $(stat -c %s "$out/chainrec.debug") bytes)"
}

case "${1:-}" in
package)
    shift
    ensure_packages package
    build_package
    ;;
kernels)
    shift
    ensure_packages kernels
    build_package
    exec tools/kernels/run.sh "$@"
    ;;
demo)
    shift
    ensure_packages demo
    log "building chainrec (release)"
    cargo build --release --locked --bin chainrec
    exec ./target/release/chainrec demo "$@"
    ;;
test)
    shift
    ensure_packages test
    # docs/CHAINS.md is the repository's copy of the project-wide semantics document.
    if [ -f ../shared/CHAINS.md ] && ! cmp -s ../shared/CHAINS.md docs/CHAINS.md; then
        log "docs/CHAINS.md differs from ../shared/CHAINS.md: copy it over (cp ../shared/CHAINS.md docs/)"
        exit 1
    fi
    log "checking formatting"
    cargo fmt --all -- --check
    log "checking that the modules of every crate and of the binary form no import circle"
    cargo run --quiet --locked --profile ci -p chainrec-tools --bin modcycles -- crates/*/src src
    log "clippy (warnings are errors)"
    cargo clippy --locked --workspace --all-targets -- -D warnings
    log "rustdoc (warnings are errors)"
    RUSTDOCFLAGS=-Dwarnings cargo doc --locked --no-deps --workspace
    # The analysis-only binary (README: "Analysis only, on a workstation") must build without
    # the recorder; built first, because the tests below rebuild the full binary in place.
    log "building the analysis-only binary (--no-default-features)"
    # The ci profile (Cargo.toml): release optimisation without LTO; it shares its
    # artifacts with the test build below.
    cargo build --profile ci --locked --no-default-features --bin chainrec
    log "running tests (BPF tests run for real as root; CHAINREC_REQUIRE_BPF=1 turns their skip into a failure)"
    # Optimised (the ci profile): the engine and format tests push millions of events, and the
    # recorder's consumer must keep up with the kernel during the real-recording tests.
    cargo test --profile ci --locked --workspace --all-targets "$@"
    # The kernel matrix: the packaged binary on Debian's 6.1 (generic, cloud, PREEMPT_RT)
    # and 6.12 kernels in QEMU, and on this one (tools/kernels/run.sh).
    log "kernel matrix (./x.sh kernels)"
    build_package
    tools/kernels/run.sh
    ;;
*)
    echo "usage: ./x.sh demo [DEMO ARGS]   record the built-in chain workload and draw its chain graph"
    echo "       ./x.sh test [CARGO TEST ARGS]   run all tests, then the kernel matrix"
    echo "       ./x.sh package   build target/package/chainrec (static, one file for servers)"
    echo "       ./x.sh kernels [NAME...]   run the packaged binary on each kernel of the matrix"
    exit 2
    ;;
esac
