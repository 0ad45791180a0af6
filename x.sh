#!/usr/bin/env bash
# chainrec developer entry point: installs what a fresh machine lacks, then builds and runs.
#   ./x.sh demo   record the built-in chain workload and write its chain graph (needs root)
#   ./x.sh test   run the whole test suite (BPF tests need root; see README) and the kernel
#                 matrix (with a package built from the test build's artifacts)
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
        # Fetching Debian 13's Go 1.24 (ensure_go124): the download, its check, the unpack.
        command -v curl >/dev/null || want+=(curl)
        command -v gpgv >/dev/null || want+=(gpgv)
        command -v xz >/dev/null || want+=(xz-utils)
        [ -e /usr/share/keyrings/debian-archive-keyring.gpg ] || want+=(debian-archive-keyring)
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
        # tests/real_node.rs: JIT frames named from V8's jitdump file (node --perf-prof).
        command -v node >/dev/null || want+=(nodejs)
        # The venv of the Python readers (ensure_python_packages below).
        /usr/bin/python3 -c 'import ensurepip, venv' 2>/dev/null || want+=(python3-venv)
        # Go 1.24 from trixie's pool (ensure_go124 below): fetched with curl, checked with
        # gpgv against Debian's archive keys, unpacked with xz and dpkg-deb.
        command -v curl >/dev/null || want+=(curl)
        command -v xz >/dev/null || want+=(xz-utils)
        command -v gpgv >/dev/null || want+=(gpgv)
        [ -e /usr/share/keyrings/debian-archive-trixie-stable.gpg ] || want+=(debian-archive-keyring)
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
        ensure_go124
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
#   pyspark: Spark in local mode reads `export --parquet-dir` as a fleet does (tests/parquet.rs);
#   py-spy: an independent reader of CPython's frames, checked against ours (tests/real_python.rs).
PY_PACKAGES=(duckdb pyarrow perfetto==0.59.1 pyspark py-spy)
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

# Go 1.24, the Go of Debian 13: the goroutine tests (tests/real_go*.rs) run once per Go
# version the probes support, 1.19 from golang-go (Debian 12, above) and 1.24 from here,
# found through CHAINREC_GO124 (the go command; without it the 1.24 tests skip loudly, and
# fail under CHAINREC_REQUIRE_TOOLS=1; one already set to a Go 1.24 is kept). apt here
# knows bookworm only, and adding trixie to its sources would upgrade libc, so trixie's
# golang-1.24-go and golang-1.24-src (its GOROOT/src; the one dependency) are downloaded
# from Debian's pool and unpacked with dpkg-deb into a cache outside the clone. Trust: trixie's InRelease is checked with gpgv
# against debian-archive-keyring, the Packages index against InRelease's SHA256, each .deb
# against the index's SHA256. Downloaded once: InRelease (~0.2 MB), Packages.xz (~9.7 MB),
# the two .debs (28.7 + 21.2 MB); 283 MB unpacked. The toolchain is static and finds its
# GOROOT from its own path.
GO124_CACHE=${CHAINREC_GO124_CACHE:-/var/cache/chainrec/go1.24}
GO124_DEBS=(golang-1.24-go golang-1.24-src)
TRIXIE=http://deb.debian.org/debian/dists/trixie
ensure_go124() {
    local go=$GO124_CACHE/root/usr/lib/go-1.24/bin/go
    # One the caller names (a Go 1.24 of its own) is used as it is.
    if [ -n "${CHAINREC_GO124:-}" ] && GOTOOLCHAIN=local "$CHAINREC_GO124" version 2>/dev/null | grep -q 'go1\.24\.'; then
        export CHAINREC_GO124
        return
    fi
    if [ -x "$go" ] && GOTOOLCHAIN=local "$go" version 2>/dev/null | grep -q 'go1\.24\.'; then
        CHAINREC_GO124=$go
        export CHAINREC_GO124
        return
    fi
    if ! mkdir -p "$GO124_CACHE" 2>/dev/null || [ ! -w "$GO124_CACHE" ]; then
        log "Go 1.24: cannot write $GO124_CACHE (run as root, or set CHAINREC_GO124_CACHE): its tests will skip"
        return
    fi
    local work
    work=$(mktemp -d "$GO124_CACHE/fetch.XXXXXX")
    # curl's own message names only the URL: say what the download is for and the ways out.
    fetch_go124() {
        local err
        if ! err=$(curl -fsS -o "$1" "$2" 2>&1); then
            log "Go 1.24: cannot fetch $2 (${err:-curl failed}): the Go 1.24 tests need Debian 13 (trixie) from deb.debian.org; rerun when it is reachable, or set CHAINREC_GO124 to a Go 1.24 'go' binary"
            rm -rf "$work"
            exit 1
        fi
    }
    log "Go 1.24: fetching Debian 13's ${GO124_DEBS[*]} from trixie's pool into $GO124_CACHE"
    fetch_go124 "$work/InRelease" "$TRIXIE/InRelease"
    gpgv --quiet --keyring /usr/share/keyrings/debian-archive-keyring.gpg \
        --output "$work/Release" "$work/InRelease" 2>"$work/gpgv.log" || {
        log "Go 1.24: trixie's InRelease does not verify: $(cat "$work/gpgv.log")"
        rm -rf "$work"
        exit 1
    }
    fetch_go124 "$work/Packages.xz" "$TRIXIE/main/binary-amd64/Packages.xz"
    local want
    # Release's SHA256 section: lines " HASH SIZE PATH" after "SHA256:".
    want=$(awk '/^[A-Za-z]/ { in256 = ($1 == "SHA256:"); next }
        in256 && $3 == "main/binary-amd64/Packages.xz" { print $1; exit }' "$work/Release")
    if [ -z "$want" ] || [ "$(sha256sum <"$work/Packages.xz" | cut -d' ' -f1)" != "$want" ]; then
        log "Go 1.24: trixie's Packages.xz does not match the SHA256 its InRelease gives (${want:-none})"
        rm -rf "$work"
        exit 1
    fi
    xz -dc "$work/Packages.xz" >"$work/Packages"
    local pkg file sha
    mkdir -p "$work/root"
    for pkg in "${GO124_DEBS[@]}"; do
        file= sha=
        read -r file sha < <(awk -v p="$pkg" '/^Package: / { hit = ($2 == p) }
            hit && /^Filename: / { f = $2 } hit && /^SHA256: / { s = $2 }
            hit && f != "" && s != "" { print f, s; exit }' "$work/Packages") || true
        if [ -z "$file" ] || [ -z "$sha" ]; then
            log "Go 1.24: $pkg is not in trixie's Packages index"
            rm -rf "$work"
            exit 1
        fi
        fetch_go124 "$work/$pkg.deb" "http://deb.debian.org/debian/$file"
        if [ "$(sha256sum <"$work/$pkg.deb" | cut -d' ' -f1)" != "$sha" ]; then
            log "Go 1.24: $file does not match the SHA256 of trixie's Packages index"
            rm -rf "$work"
            exit 1
        fi
        log "Go 1.24: $file ($(stat -c %s "$work/$pkg.deb") bytes, SHA256 checked)"
        dpkg-deb -x "$work/$pkg.deb" "$work/root"
    done
    rm -rf "$GO124_CACHE/root"
    mv "$work/root" "$GO124_CACHE/root"
    rm -rf "$work"
    if ! GOTOOLCHAIN=local "$go" version | grep -q 'go1\.24\.'; then
        log "Go 1.24: $go does not run"
        exit 1
    fi
    CHAINREC_GO124=$go
    export CHAINREC_GO124
    log "Go 1.24: $(GOTOOLCHAIN=local "$go" version) at $go"
}

# The packaged binary: static (glibc with crt-static; libbpf, libelf and zlib as static
# archives; the BPF object is inside the skeleton), stripped, its debug info split off into
# target/package/chainrec.debug (linked by .gnu_debuglink, for our own crash reports).
#   build_package release   (./x.sh package, ./x.sh kernels) the binary servers get: release
#                           profile (thin LTO) for --target, the static flags in RUSTFLAGS
#   build_package ci        (./x.sh test) the same static binary from the ci profile's
#                           artifacts (below): minutes instead of a 20-minute LTO build of the
#                           whole tree; it is what the kernel matrix of ./x.sh test runs
PACKAGE_MAX_BYTES=$((20 * 1024 * 1024))
build_package() {
    local mode=$1 target=x86_64-unknown-linux-gnu out=target/package built
    local libdir
    libdir="/usr/lib/$(gcc -print-multiarch 2>/dev/null || echo x86_64-linux-gnu)"
    if [ "$mode" = release ]; then
        log "building the packaged chainrec (static, $target, release)"
        # relocation-model=static: a plain static executable, not a static PIE (which ldd
        # reports as "statically linked" and which needs the start code to relocate itself).
        # --target keeps the static flags off build scripts and proc macros, and the artifacts
        # apart from the ordinary release build (target/$target/release).
        RUSTFLAGS="-C target-feature=+crt-static -C relocation-model=static" \
            LIBBPF_SYS_LIBRARY_PATH="$libdir" \
            cargo build --release --locked --target "$target" --features static --bin chainrec
        built=target/$target/release/chainrec
    else
        log "building the packaged chainrec (static, ci profile: the test build's artifacts)"
        # The same flags on the binary's own compilation only (tools/rustc-static-bin); the
        # `static` feature rebuilds libbpf-sys, libbpf-rs, chainrec-record, chainrec-demo and
        # the binary, every other crate is the test build's (CI_SHARED).
        RUSTC_WRAPPER="$PWD/tools/rustc-static-bin" LIBBPF_SYS_LIBRARY_PATH="$libdir" \
            cargo build "${CI_SHARED[@]}" --features chainrec/static --bin chainrec
        built=target/ci/chainrec
    fi
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

# `./x.sh test` builds in the ci profile (Cargo.toml: release optimisation, no LTO, no debug
# info), and every such build resolves features as the test build does: every workspace member
# with its dev-dependencies (`cargo test --workspace --all-targets`). Resolved for fewer
# packages, some dependencies get fewer features (num-traits without `default`, which
# criterion's plotters asks for; simd-adler32 without `std`, png's) and everything above them
# (arrow, parquet, flate2, report, ...) is built twice. A test target in the selection brings
# the dev-dependencies in: chainrec-format's `mappings`, which the tests build anyway.
CI_SHARED=(--profile ci --locked --workspace --test mappings)

case "${1:-}" in
package)
    shift
    ensure_packages package
    build_package release
    ;;
kernels)
    shift
    ensure_packages kernels
    build_package release
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
    cargo run --quiet --locked --profile ci -p chainrec-modcycles -- crates/*/src src
    # The analysis-only binary (README: "Analysis only, on a workstation") must build without
    # the recorder: the binary without its default feature `record` (its dependencies are the
    # test build's, CI_SHARED), and no BPF toolchain crate in its dependency graph.
    log "building the analysis-only binary (--no-default-features)"
    cargo build "${CI_SHARED[@]}" --no-default-features --bin chainrec
    bpf=$(cargo tree --locked -p chainrec --no-default-features -e normal,build --prefix none -f '{p}' |
        awk '{print $1}' | { grep -x -E 'chainrec-record|chainrec-demo|libbpf-sys|libbpf-rs|libbpf-cargo|bindgen' || true; } | sort -u)
    if [ -n "$bpf" ]; then
        log "the analysis-only binary depends on: $(echo $bpf) (cargo tree -p chainrec --no-default-features -i NAME)"
        exit 1
    fi
    # The kernel matrix (tools/kernels/run.sh): the packaged binary on Debian's 6.1 (generic,
    # cloud, PREEMPT_RT) and 6.12 kernels in QEMU, and on this one. The VMs boot in the
    # background while clippy, rustdoc and the test build run; QEMU's single-threaded TCG
    # needs one core, and gets it at nice -5 (as root; otherwise nice says so in the log and
    # the VMs run at the usual priority). The host's check and the tests themselves start when
    # the VMs are done, on a machine without them.
    build_package ci
    log "kernel matrix: the VMs boot in the background (target/kernels/vms.log)"
    mkdir -p target/kernels
    setsid nice -n -5 tools/kernels/run.sh --vms >target/kernels/vms.log 2>&1 &
    vms=$!
    trap 'kill -- "-$vms" 2>/dev/null || true' EXIT
    log "clippy (warnings are errors)"
    cargo clippy --locked --workspace --all-targets -- -D warnings
    log "rustdoc (warnings are errors)"
    RUSTDOCFLAGS=-Dwarnings cargo doc --locked --no-deps --workspace
    # Optimised (the ci profile): the engine and format tests push millions of events, and the
    # recorder's consumer must keep up with the kernel during the real-recording tests.
    log "building the tests"
    cargo test --profile ci --locked --workspace --all-targets --no-run "$@"
    log "kernel matrix: waiting for the VMs"
    matrix=0
    wait "$vms" || matrix=1
    trap - EXIT
    cat target/kernels/vms.log
    log "kernel matrix: the host"
    tools/kernels/run.sh host || matrix=1
    log "running tests (BPF tests run for real as root; CHAINREC_REQUIRE_BPF=1 turns their skip into a failure)"
    cargo test --profile ci --locked --workspace --all-targets "$@"
    if [ "$matrix" != 0 ]; then
        log "the kernel matrix failed (above: the VMs' log, then the host's)"
        exit 1
    fi
    ;;
*)
    echo "usage: ./x.sh demo [DEMO ARGS]   record the built-in chain workload and draw its chain graph"
    echo "       ./x.sh test [CARGO TEST ARGS]   run all tests, then the kernel matrix"
    echo "       ./x.sh package   build target/package/chainrec (static, one file for servers)"
    echo "       ./x.sh kernels [NAME...]   run the packaged binary on each kernel of the matrix"
    exit 2
    ;;
esac
