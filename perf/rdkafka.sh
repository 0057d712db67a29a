#!/usr/bin/env bash
# Builds librdkafka's own load generator, examples/rdkafka_performance (C, one thread per
# client, no JVM), for perf/run.sh's light-client mode (PERF_CLIENT=rdkafka): the Java perf
# tools eat the same two cores as the broker and hide where the broker's time goes.
#
#   perf/rdkafka.sh          prints the path of the binary, building it on first use
#
# The source is the librdkafka that the node-rdkafka package on npm carries (its
# deps/librdkafka; npm is one of the registries this machine reaches, GitHub is not).
# Built without SSL, SASL/GSSAPI, zstd or curl (the perf runs are PLAINTEXT, uncompressed),
# statically linked against that librdkafka, into ${KELP_CACHE:-~/.cache/kelp}/rdkafka/.
set -euo pipefail

NODE_RDKAFKA_VERSION="${NODE_RDKAFKA_VERSION:-3.6.1}" # carries librdkafka 2.12.0
CACHE="${KELP_CACHE:-$HOME/.cache/kelp}"
DEST="$CACHE/rdkafka/node-rdkafka-$NODE_RDKAFKA_VERSION"
BIN="$DEST/rdkafka_performance"

if [[ -x "$BIN" ]]; then
  echo "$BIN"
  exit 0
fi
for tool in npm make cc; do
  command -v "$tool" >/dev/null || { echo "perf/rdkafka.sh: needs $tool" >&2; exit 1; }
done
work="$(mktemp -d -t kelp-rdkafka.XXXXXX)"
trap 'rm -rf "$work"' EXIT
echo "perf/rdkafka.sh: building rdkafka_performance from node-rdkafka@$NODE_RDKAFKA_VERSION" >&2
(cd "$work" && npm pack --silent "node-rdkafka@$NODE_RDKAFKA_VERSION" >/dev/null)
tar -xzf "$work"/node-rdkafka-*.tgz -C "$work" package/deps/librdkafka
src="$work/package/deps/librdkafka"
chmod +x "$src/configure" "$src"/mklove/*.sh 2>/dev/null || true
(
  cd "$src"
  ./configure --disable-ssl --disable-gssapi --disable-zstd --disable-curl \
    --disable-lz4-ext >"$work/configure.log" 2>&1 \
    || { tail -30 "$work/configure.log" >&2; exit 1; }
  make -j"$(nproc)" libs >"$work/make.log" 2>&1 || { tail -30 "$work/make.log" >&2; exit 1; }
  # The example against the static library (and the libraries configure found for it):
  # nothing to install, nothing to look up at run time.
  libs="$(sed -n 's/^LIBS=//p' Makefile.config)"
  # shellcheck disable=SC2086
  cc -O2 -I src -o rdkafka_performance examples/rdkafka_performance.c src/librdkafka.a \
    $libs -lz -lm -ldl -lrt -lpthread >>"$work/make.log" 2>&1 \
    || { tail -30 "$work/make.log" >&2; exit 1; }
)
mkdir -p "$DEST"
cp "$src/rdkafka_performance" "$BIN.tmp"
mv "$BIN.tmp" "$BIN"
echo "$BIN"
