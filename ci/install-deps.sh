#!/usr/bin/env bash
# What `make build`, `make demo` and `make test` need, installed where missing; `.ci/run` and the
# Makefile's deps targets both call it, so a fresh machine needs only this repository.
#
#   ci/install-deps.sh [--dry-run] build|demo|mocc|test|fuzz
#
# build: apt packages for the workspace and ccp.ko (make, a C compiler, clang for bindgen and the
#        BPF datapath, libelf, zlib, pkg-config, curl) and a Rust toolchain >= 1.85 (rustup).
# demo:  build, plus the experiment runner's Python packages (experiments/requirements.txt).
# mocc:  build, plus MOCC's pipeline (onnx/requirements.txt: PyPI's torch is the ~4 GB CUDA build,
#        it runs on CPU).
# test:  demo and mocc, plus libFuzzer's runtime (the module's message validator is fuzzed).
# fuzz:  test, plus nightly Rust with cargo-fuzz for the agent's fuzz targets (make fuzz; make test
#        replays their checks on stable, agent/tests/fuzz_replay.rs).
# QEMU and the guest's tools are installed by experiments/vm/polycc-vm when it first boots.
# Installs nothing when everything is there (a few checks, about a second). --dry-run lists what
# is missing and exits 1 if anything is. apt-get runs as root, through sudo where that exists.
set -euo pipefail
cd "$(dirname "$0")/.."

dry_run=0
if [ "${1:-}" = "--dry-run" ]; then dry_run=1; shift; fi
profile="${1:-}"
case "$profile" in
  build|demo|mocc|test|fuzz) ;;
  *) echo "usage: ci/install-deps.sh [--dry-run] build|demo|mocc|test|fuzz" >&2; exit 2 ;;
esac
[ $# -eq 1 ] || { echo "ci/install-deps.sh: one profile only, got: $*" >&2; exit 2; }

RUST_MIN=1.85
missing=()

as_root() {
  if [ "$(id -u)" = 0 ]; then "$@"
  elif command -v sudo >/dev/null; then sudo "$@"
  else echo "ci/install-deps.sh: need root for: $* (run as root or install sudo)" >&2; exit 1
  fi
}

apt_install() {
  [ $# -gt 0 ] || return 0
  missing+=("apt: $*")
  [ $dry_run = 0 ] || return 0
  echo "installing (apt): $*"
  as_root env DEBIAN_FRONTEND=noninteractive apt-get update -q
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q "$@"
}

# --- apt -------------------------------------------------------------------------------------
need_apt=()
command -v make >/dev/null || need_apt+=(make)
command -v cc >/dev/null || need_apt+=(gcc)
command -v python3 >/dev/null || need_apt+=(python3)
command -v patch >/dev/null || need_apt+=(patch)
# libccp's build script (the agent's mock-datapath tests) runs bindgen: libclang and clang's headers.
command -v clang >/dev/null || need_apt+=(clang)
# The BPF datapath (datapath/bpf): clang compiles it, the vendored libbpf needs libelf and zlib.
dpkg -s libelf-dev >/dev/null 2>&1 || need_apt+=(libelf-dev)
dpkg -s zlib1g-dev >/dev/null 2>&1 || need_apt+=(zlib1g-dev)
command -v pkg-config >/dev/null || need_apt+=(pkg-config)
# rustup and polycc-vm's downloads (Debian's kernel and headers).
command -v curl >/dev/null || need_apt+=(curl ca-certificates)
if [ "$profile" != build ]; then
  command -v pip3 >/dev/null || python3 -m pip --version >/dev/null 2>&1 || need_apt+=(python3-pip)
fi
apt_install "${need_apt[@]}"

# libFuzzer's runtime (make test fuzzes the module's message validator): Debian ships it apart
# from clang (libclang-rt-N-dev, only recommended by clang-N).
if { [ "$profile" = test ] || [ "$profile" = fuzz ]; } && command -v clang >/dev/null &&
   ! echo 'int LLVMFuzzerTestOneInput(const char *d, unsigned long n) { return 0; }' |
     clang -fsanitize=fuzzer -x c - -o /dev/null 2>/dev/null; then
  apt_install "libclang-rt-$(clang -dumpversion | cut -d. -f1)-dev"
fi

# --- Rust ------------------------------------------------------------------------------------
[ -x "$HOME/.cargo/bin/cargo" ] && export PATH="$HOME/.cargo/bin:$PATH"
rust_ok() {
  command -v cargo >/dev/null || return 1
  local have
  have=$(rustc --version | awk '{print $2}')
  [ "$(printf '%s\n%s\n' "$RUST_MIN" "$have" | sort -V | head -n 1)" = "$RUST_MIN" ]
}
if ! rust_ok; then
  # Debian's packaged rustc (1.63) is too old for the workspace (rust-version 1.85).
  missing+=("rust >= $RUST_MIN (rustup, into ~/.cargo)")
  if [ $dry_run = 0 ]; then
    if command -v rustup >/dev/null; then
      rustup toolchain install stable --profile minimal && rustup default stable
    else
      echo "installing Rust with rustup into ~/.cargo (https://rustup.rs)"
      curl --proto '=https' --tlsv1.2 -sSf https://sh.rustup.rs | sh -s -- -y --profile minimal
      export PATH="$HOME/.cargo/bin:$PATH"
    fi
    rust_ok || { echo "ci/install-deps.sh: still no Rust >= $RUST_MIN on PATH" >&2; exit 1; }
  fi
fi
if [ "$profile" = fuzz ]; then
  # make fuzz fuzzes the agent's parsers with cargo-fuzz (agent/fuzz), which needs nightly.
  if ! cargo +nightly --version >/dev/null 2>&1; then
    missing+=("rust nightly (rustup)")
    [ $dry_run = 1 ] || rustup toolchain install nightly --profile minimal
  fi
  if ! cargo fuzz --version >/dev/null 2>&1; then
    missing+=("cargo-fuzz (cargo install)")
    [ $dry_run = 1 ] || cargo install cargo-fuzz --locked
  fi
fi

# --- Python ----------------------------------------------------------------------------------
requirements=()
case "$profile" in
  demo) requirements=(experiments/requirements.txt) ;;
  mocc) requirements=(onnx/requirements.txt) ;;
  test|fuzz) requirements=(experiments/requirements.txt onnx/requirements.txt) ;;
esac
if [ ${#requirements[@]} -gt 0 ]; then
  # Which requirements the installed distributions do not meet (name and minimum version).
  unmet=$(python3 ci/unmet_requirements.py "${requirements[@]}")
  if [ -n "$unmet" ]; then
    missing+=("pip: $(echo $unmet)")
    if [ $dry_run = 0 ]; then
      echo "installing (pip): $(echo $unmet)"
      # Debian marks its python3's site-packages externally managed; the project installs into it
      # (as root) or into ~/.local (as a user) all the same.
      PIP_BREAK_SYSTEM_PACKAGES=1 python3 -m pip install -q $(printf -- '-r %s ' "${requirements[@]}")
    fi
  fi
fi

if [ $dry_run = 1 ]; then
  if [ ${#missing[@]} -eq 0 ]; then echo "$profile: nothing missing"; exit 0; fi
  for m in "${missing[@]}"; do echo "$profile: missing $m"; done
  exit 1
fi
