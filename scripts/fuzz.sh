#!/usr/bin/env bash
# Builds and runs every cargo-fuzz target in fuzz/ for SECONDS each (default 60), starting from
# the committed corpus fuzz/corpus/<target>/ copied to a temporary directory (the repo is not
# modified). Prints each target's executions and exec/s; exits non-zero if any target crashes,
# panics, times out or allocates past the limit (the crashing input is kept and its path shown).
#
#   scripts/fuzz.sh [SECONDS]
#
# Needs a nightly toolchain and cargo-fuzz (cargo install cargo-fuzz). FUZZ_ARGS adds libFuzzer
# flags (e.g. FUZZ_ARGS=-jobs=2).
set -euo pipefail

secs="${1:-60}"
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root/fuzz"

# An input of a few KB has no business allocating more than this: a count trusted before it
# is checked against the input shows up here as a crash, not as a slow machine.
limits=(-malloc_limit_mb=128 -rss_limit_mb=2048 -timeout=10)

# CI keeps cargo's output in a cache dir (scripts/test.sh): the fuzz build gets its own corner.
if [ -n "${CARGO_TARGET_DIR:-}" ]; then
    export CARGO_TARGET_DIR="$CARGO_TARGET_DIR/fuzz"
fi
cargo +nightly fuzz build -O --debug-assertions
if [ "${FUZZ_BUILD_ONLY:-0}" = 1 ]; then
    exit 0
fi
targets=$(cargo +nightly fuzz list)
work="$(mktemp -d -t kelp-fuzz.XXXXXX)"
failed=0
for t in $targets; do
    corpus="$work/corpus-$t"
    mkdir -p "$corpus" "$work/artifacts-$t"
    if [ -d "corpus/$t" ]; then
        cp -r "corpus/$t/." "$corpus/"
    fi
    log="$work/$t.log"
    set +e
    # shellcheck disable=SC2086
    cargo +nightly fuzz run -O --debug-assertions "$t" "$corpus" -- \
        -max_total_time="$secs" -print_final_stats=1 "${limits[@]}" \
        -artifact_prefix="$work/artifacts-$t/" ${FUZZ_ARGS:-} >"$log" 2>&1
    rc=$?
    set -e
    # A target that did not run has no stats: report it below rather than stop here.
    execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' | tail -1) || true
    rate=$(grep -o 'stat::average_exec_per_sec: *[0-9]*' "$log" | grep -o '[0-9]*$' | tail -1) || true
    crashes=$(find "$work/artifacts-$t" -type f | wc -l)
    printf '%-20s execs %-12s exec/s %-8s crashes %s\n' "$t" "${execs:-?}" "${rate:-?}" "$crashes"
    if [ "$rc" -ne 0 ] || [ "$crashes" -ne 0 ]; then
        failed=1
        echo "--- $t failed (exit $rc); log $log" >&2
        grep -E 'ERROR|panicked|Test unit written' "$log" | head -20 >&2 || true
    fi
done
if [ "$failed" -ne 0 ]; then
    echo "fuzzing found crashes; inputs and logs kept in $work" >&2
    exit 1
fi
rm -rf "$work"
