#!/usr/bin/env bash
# The project's test command (README, .ci/run): installs test dependencies, checks formatting
# and lints, runs the Rust unit tests, then the end-to-end suite with real Kafka clients
# against a freshly built broker.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
# glommio registers io memory with io_uring, which counts against locked memory.
ulimit -l unlimited 2>/dev/null || true
export KELP_REQUIRE_CLIENTS=1   # a missing client fails its test instead of skipping it
cargo fmt --check
cargo clippy --release --all-targets --locked -- -D warnings
cargo build --release --locked
cargo test --release --locked
python3 -m pytest -v -p no:cacheprovider tests/e2e
