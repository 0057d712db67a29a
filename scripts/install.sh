#!/usr/bin/env bash
# Builds Kelp from this checkout (release profile). Needs rustup, which fetches the toolchain
# pinned in rust-toolchain.toml on first use (unless RUSTUP_AUTO_INSTALL=0); everything else
# comes from crates.io. Safe to re-run: cargo rebuilds only what changed.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v cargo >/dev/null 2>&1; then
  echo "install.sh: cargo not found; install Rust with rustup (https://rustup.rs) first" >&2
  exit 1
fi
# glommio registers io memory with io_uring, which counts against locked memory.
ulimit -l unlimited 2>/dev/null || ulimit -l "$(ulimit -H -l)" 2>/dev/null || true
cargo build --release --locked
echo "built: $(pwd)/target/release/kelp"
