#!/usr/bin/env bash
# The project's test command (README, .ci/run): installs test dependencies, checks formatting
# and lints, runs the Rust unit tests, then the end-to-end suite with real Kafka clients
# against a freshly built broker. Exits non-zero if any step fails.
#
# The e2e suite alone, against the built Kelp:   python3 -m pytest -v tests/e2e
# ... or against a real Apache Kafka 4.x (how its assertions are validated):
#   scripts/kafka.sh start 19092 && KELP_BOOTSTRAP=127.0.0.1:19092 python3 -m pytest -v tests/e2e
#   scripts/kafka.sh stop 19092
set -euo pipefail
cd "$(dirname "$0")/.."
step() { echo; echo "=== test.sh: $* ($(date -u +%H:%M:%S))"; }

step "install-deps"
scripts/install-deps.sh
# glommio registers io memory with io_uring, which counts against locked memory.
ulimit -l unlimited 2>/dev/null || echo "test.sh: could not raise ulimit -l (now $(ulimit -l))"
export KELP_REQUIRE_CLIENTS=1   # a missing client fails its test instead of skipping it

# CI runs in a fresh clone: keep cargo's build output in the cache so it is not rebuilt from
# scratch each time (the tests find the binary through KELP_BIN).
if [ "${CI:-}" = "true" ] && [ -z "${CARGO_TARGET_DIR:-}" ]; then
  export CARGO_TARGET_DIR="${KELP_CACHE:-$HOME/.cache/kelp}/ci-target"
fi
export KELP_BIN="${KELP_BIN:-${CARGO_TARGET_DIR:-$PWD/target}/release/kelp}"
step "cargo fmt --check"
cargo fmt --check
step "cargo clippy"
cargo clippy --release --workspace --all-targets --locked -- -D warnings
# Broken or private intra-doc links and stray HTML in docs are errors, like lints.
step "cargo doc"
RUSTDOCFLAGS="-D warnings" cargo doc --no-deps --workspace --locked
step "cargo build --release"
cargo build --release --workspace --locked
# Unit tests in the dev profile: with overflow checks and debug assertions, and built in
# ~20 s where the release test build took ~3 min (the release binary is built above).
step "cargo test"
cargo test --workspace --locked

# The SeaweedMQ client's own tests against a real SeaweedFS (they refuse to skip here).
step "storage-client live tests against a real SeaweedFS"
SW_DIR="$(mktemp -d -t kelp-sw-live-XXXXXX)"
SW_BASE=$(( 12000 + RANDOM % 8000 ))
stop_sw() { scripts/seaweedfs.sh stop "$SW_DIR" --kill >/dev/null 2>&1 || true; rm -rf "$SW_DIR"; }
trap stop_sw EXIT
SW_MASTER="$(scripts/seaweedfs.sh start "$SW_DIR" "$SW_BASE" | tail -1)"
KELP_SEAWEED_MASTER="$SW_MASTER" KELP_REQUIRE_SEAWEED=1 \
  cargo test --release --locked -p kelp-storage-client --test live_seaweedfs
stop_sw
trap - EXIT

if [ -n "${KELP_BOOTSTRAP:-}" ]; then
  step "e2e against KELP_BOOTSTRAP=$KELP_BOOTSTRAP (not the freshly built binary)"
else
  step "e2e against target/release/kelp"
fi
# The whole suite runs on the default durable storage, again cache-only (--storage memory,
# the benchmark mode), again on SeaweedMQ (--storage seaweedmq, a real SeaweedFS started by
# scripts/seaweedfs.sh for the pass), so every engine sees every client, and last with
# --advertise-shards. (Suites of Kelps of their own whose subject stores nothing, TLS and
# OAUTHBEARER, and the Debian package on a fresh Debian, run on the local pass only:
# conftest.ENGINE_NEUTRAL.)
for storage in local memory seaweedmq; do
  step "e2e with --storage $storage"
  rc=0
  KELP_STORAGE=$storage python3 -m pytest -v -p no:cacheprovider --durations=15 tests/e2e || rc=$?
  if [ "$rc" -eq 5 ]; then
    echo "test.sh: pytest collected no tests (exit 5): failing" >&2
    exit 1
  elif [ "$rc" -ne 0 ]; then
    echo "test.sh: e2e suite failed with --storage $storage (pytest exit $rc)" >&2
    exit "$rc"
  fi
done
# Once more on the default storage with --advertise-shards (every shard core its own node and
# port, clients routed straight to the owning core), so every client meets that mode too.
step "e2e with --storage local --advertise-shards"
rc=0
KELP_STORAGE=local KELP_ADVERTISE_SHARDS=1 python3 -m pytest -v -p no:cacheprovider --durations=15 tests/e2e || rc=$?
if [ "$rc" -ne 0 ]; then
  echo "test.sh: e2e suite failed with --advertise-shards (pytest exit $rc)" >&2
  exit 1
fi
# A broker lives for months: a soak of real mixed load on 2 shard cores (the waker-refcount
# crash came after ~3 minutes), failing on a crash or memory above the README's model.
step "soak: ${KELP_SOAK_SECONDS:-360} s on 2 shard cores"
soak_cores=0-1
[ "$(nproc)" -ge 2 ] || soak_cores=0
KELP_BIN="$KELP_BIN" SOAK_CORES=$soak_cores perf/soak.sh "${KELP_SOAK_SECONDS:-360}"
# Coverage-guided fuzzing of every decoder a client or the disk reaches, from the committed
# corpora: a short smoke here; long runs by hand (scripts/fuzz.sh SECONDS).
step "fuzz smoke: ${KELP_FUZZ_SECONDS:-30} s per target"
scripts/fuzz.sh "${KELP_FUZZ_SECONDS:-30}"
echo "test.sh: all passed"
