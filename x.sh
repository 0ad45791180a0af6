#!/usr/bin/env bash
# chainrec developer entry point: installs what a fresh machine lacks, then builds and runs.
#   ./x.sh demo   record the built-in chain workload and write its chain graph (needs root)
#   ./x.sh test   run the whole test suite (BPF tests need root; see README)
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
        # The independent reference for waits and wakers (tests/real_bpftrace.rs).
        command -v bpftrace >/dev/null || want+=(bpftrace)
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
#   Perfetto export (crates/report/tests/perfetto_schema.rs).
PY_PACKAGES=(duckdb pyarrow perfetto==0.59.1)
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

case "${1:-}" in
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
    log "checking that the modules of crates/chain and of the binary form no import circle"
    cargo run --quiet --locked -p chainrec-tools --bin modcycles -- crates/chain/src src
    log "clippy (warnings are errors)"
    cargo clippy --locked --workspace --all-targets -- -D warnings
    log "rustdoc (warnings are errors)"
    RUSTDOCFLAGS=-Dwarnings cargo doc --locked --no-deps --workspace
    # The analysis-only binary (README: "Analysis only, on a workstation") must build without
    # the recorder; built first, because the tests below rebuild the full binary in place.
    log "building the analysis-only binary (--no-default-features)"
    cargo build --release --locked --no-default-features --bin chainrec
    log "running tests (BPF tests run for real as root; CHAINREC_REQUIRE_BPF=1 turns their skip into a failure)"
    # Release mode: the engine and format tests push millions of events, and the recorder's consumer
    # must keep up with the kernel during the real-recording tests.
    cargo test --release --locked --workspace --all-targets "$@"
    ;;
*)
    echo "usage: ./x.sh demo [DEMO ARGS]   record the built-in chain workload and draw its chain graph"
    echo "       ./x.sh test [CARGO TEST ARGS]   run all tests"
    exit 2
    ;;
esac
