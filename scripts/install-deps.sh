#!/usr/bin/env bash
# Installs what the test suite (and scripts/kafka.sh) needs, each step skipped when already done:
#   - Debian's kcat (1.7.1 on librdkafka 2.0.2: the old, strict ApiVersions client the tests keep);
#   - Debian's prometheus and promtool (2.42 on bookworm; its service is not started), for
#     scripts/prometheus.sh and the Prometheus e2e test;
#   - Python: confluent-kafka (librdkafka), kafka-python with its codec packages, pytest,
#     prometheus-client;
#   - Java: kafka-clients and kafka-streams $KAFKA_VERSION and their runtime jars -> $CACHE/jars/clients;
#   - Java: kafka-clients and kafka-tools $SHARE_KAFKA_VERSION (default 4.2.1) for the share-group
#     (KIP-932) tests: KafkaShareConsumer and kafka-share-groups -> $CACHE/jars/clients-share;
#   - Java: the full Apache Kafka broker (kafka_2.13, kafka-server, kafka-tools, connect-file,
#     same version)
#     -> $CACHE/jars/kafka, for scripts/kafka.sh and the perf comparisons;
#   - only when asked (KELP_KAFKA_42=1, or KELP_KAFKA_BROKERS="4.2.1 ..."): the same broker at
#     other versions -> $CACHE/jars/kafka-VERSION, for `KAFKA_VERSION=4.2.1 scripts/kafka.sh`
#     (share groups are on by default from Kafka 4.2), which installs it itself on first use with
#       scripts/install-deps.sh --kafka-broker VERSION   # that broker's jars only, nothing else
#   - kafkajs (npm ci from tests/node/package-lock.json) and franz-go modules (Go proxy);
#   - SeaweedFS's weed 4.48 (scripts/seaweedfs.sh install), for --storage seaweedmq;
#   - the Rust toolchain pinned in rust-toolchain.toml (with rustfmt and clippy);
#   - Rust nightly and cargo-fuzz, for scripts/fuzz.sh.
# Maven reuses ~/.m2. Caches live under ${KELP_CACHE:-$HOME/.cache/kelp}.
set -euo pipefail
cd "$(dirname "$0")/.."
CACHE="${KELP_CACHE:-$HOME/.cache/kelp}"
KAFKA_VERSION="${KAFKA_VERSION:-4.1.1}"
# The share-group (KIP-932) tests' Java client and kafka-share-groups (Kafka 4.2: share groups on).
SHARE_KAFKA_VERSION="${SHARE_KAFKA_VERSION:-4.2.1}"
mkdir -p "$CACHE"
log() { echo "install-deps: $*"; }

# copy_jars POM DIR WHAT VERSION JAR...: skipped when every JAR (a file name) is in DIR; otherwise
# resolves POM's runtime dependencies at Kafka VERSION and syncs DIR to exactly that set
# of jars (a stale version left on a 'DIR/*' class path would be a silent mess). DIR itself stays,
# so a broker running from it keeps its open jars; perf/install.sh fills the same kafka dir.
# MVN_ARGS (an array, empty by default) goes to Maven as well.
MVN_ARGS=()
copy_jars() {
  local pom="$1" dir="$2" what="$3" version="$4"
  shift 4
  local missing=0 j
  for j in "$@"; do
    [ -f "$dir/$j" ] || missing=1
  done
  if [ "$missing" = 0 ]; then
    log "maven: $what $version present in $dir"
    return
  fi
  if ! command -v mvn >/dev/null 2>&1; then
    log "mvn not found: apt-get install maven (needed for $what)" >&2
    return 1
  fi
  log "maven: $what $version -> $dir"
  local tmp="$dir.tmp.$$"
  rm -rf "$tmp"
  mkdir -p "$tmp" "$dir"
  mvn -q -B -Dstyle.color=never -f "$pom" dependency:copy-dependencies -Dkafka.version="$version" \
    ${MVN_ARGS[@]+"${MVN_ARGS[@]}"} -DoutputDirectory="$tmp" -DincludeScope=runtime </dev/null 2>&1 | sed 's/\x1b\[[0-9;]*m//g'
  for j in "$dir"/*.jar; do
    [ -e "$j" ] || continue
    [ -f "$tmp/$(basename "$j")" ] || rm -f "$j"
  done
  cp -p "$tmp"/*.jar "$dir"/
  rm -rf "$tmp"
  log "maven: $(ls "$dir"/*.jar | wc -l) jars in $dir"
}

# The full Apache Kafka broker at VERSION into DIR (scripts/maven/kafka-pom.xml), with Connect's
# file connectors (the Connect e2e) unless a 3rd argument says "broker-only".
kafka_broker_jars() {
  local version="$1" dir="$2" only="${3:-}"
  local jars=("kafka_2.13-$version.jar" "kafka-server-$version.jar" "kafka-tools-$version.jar"
              "kafka-clients-$version.jar" log4j-slf4j-impl-2.24.3.jar "connect-runtime-$version.jar")
  if [ "$only" = "broker-only" ]; then
    MVN_ARGS=(-Dkafka.broker.only=true)
  else
    jars+=("connect-file-$version.jar")
  fi
  copy_jars scripts/maven/kafka-pom.xml "$dir" "Apache Kafka broker" "$version" "${jars[@]}"
  MVN_ARGS=()
}

# scripts/install-deps.sh --kafka-broker VERSION: only that broker's jars, in $CACHE/jars/kafka-VERSION
# (what scripts/kafka.sh runs for KAFKA_VERSION=VERSION when it is not the default's version).
if [ "${1:-}" = "--kafka-broker" ]; then
  [ -n "${2:-}" ] || { echo "usage: $0 --kafka-broker VERSION" >&2; exit 2; }
  kafka_broker_jars "$2" "$CACHE/jars/kafka-$2" broker-only
  exit 0
fi

# --- kcat (apt) -------------------------------------------------------------------------------
if command -v kcat >/dev/null 2>&1; then
  log "kcat: present ($(kcat -V 2>&1 | grep -o 'Version [0-9.]* ([^)]*librdkafka [0-9.]*' | sed 's/ (.*librdkafka/, librdkafka/'))"
else
  log "apt: installing kcat"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq kcat >/dev/null
fi

# --- openssl (apt): the TLS tests make their CA and certificates with it -------------------
if command -v openssl >/dev/null 2>&1; then
  log "openssl: present ($(openssl version))"
else
  log "apt: installing openssl"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openssl >/dev/null
fi

# --- Debian package (scripts/package-deb.sh) and its test on a fresh Debian (apt) ------------
# dpkg-shlibdeps, objcopy, debootstrap and systemd-analyze; then the minimal bookworm the test
# installs the package into, debootstrapped once and cached as a tarball (needs root).
deb_pkgs=()
command -v dpkg-shlibdeps >/dev/null 2>&1 || deb_pkgs+=(dpkg-dev)
command -v objcopy >/dev/null 2>&1 || deb_pkgs+=(binutils)
[ -x /usr/sbin/debootstrap ] || command -v debootstrap >/dev/null 2>&1 || deb_pkgs+=(debootstrap)
command -v systemd-analyze >/dev/null 2>&1 || deb_pkgs+=(systemd)
if [ ${#deb_pkgs[@]} -eq 0 ]; then
  log "dpkg-dev, binutils, debootstrap, systemd-analyze: present"
else
  log "apt: installing ${deb_pkgs[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${deb_pkgs[@]}" >/dev/null
fi
if [ "$(id -u)" = 0 ]; then
  log "fresh Debian for the package test: $(PATH="$PATH:/usr/sbin:/sbin" scripts/debian-rootfs.sh)"
else
  log "not root: the package test's fresh Debian (scripts/debian-rootfs.sh) is not made"
fi

# --- Prometheus and promtool (apt): tests/e2e/test_prometheus.py, scripts/prometheus.sh --------
# Debian's package (bookworm: 2.42) would start its own service on install: a policy-rc.d that
# refuses every start is put in place for the install when the system has none (containers
# usually do), and a daemon its init script started anyway is stopped by the PID it wrote.
# scripts/prometheus.sh runs its own prometheus per test instead.
if command -v prometheus >/dev/null 2>&1 && command -v promtool >/dev/null 2>&1; then
  log "prometheus: present ($(prometheus --version 2>&1 | head -1))"
else
  log "apt: installing prometheus (without its service)"
  own_policy=0
  if [ ! -e /usr/sbin/policy-rc.d ]; then
    printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d
    chmod 755 /usr/sbin/policy-rc.d
    own_policy=1
  fi
  rc=0
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
    apt-get install -y -qq --no-install-recommends prometheus >/dev/null || rc=$?
  [ "$own_policy" = 0 ] || rm -f /usr/sbin/policy-rc.d
  [ "$rc" = 0 ] || { log "apt-get install prometheus failed ($rc)" >&2; exit "$rc"; }
  # Under systemd the package also enabled the unit for the next boot: not wanted either.
  if [ -d /run/systemd/system ]; then
    systemctl disable --now prometheus.service >/dev/null 2>&1 || true
  fi
  pid="$(cat /run/prometheus/prometheus.pid 2>/dev/null || true)"  # its init script's
  if [ -n "$pid" ] && [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = prometheus ]; then
    log "prometheus: stopping the service the package started (pid $pid)"
    kill "$pid"
  fi
fi

# --- Python packages (pip) --------------------------------------------------------------------
PY_PKGS=(confluent-kafka==2.16.1 kafka-python==3.0.12 pytest==9.2.0 prometheus-client==0.26.0
         lz4==4.4.5 zstandard==0.25.0 python-snappy==0.7.3 cramjam==2.14.0)
if python3 -c "import confluent_kafka, kafka, pytest, lz4.frame, zstandard, snappy, cramjam, prometheus_client" 2>/dev/null; then
  log "pip: clients present (confluent-kafka $(python3 -c 'import confluent_kafka as c; print(c.version(), "on librdkafka", c.libversion()[0])'), kafka-python $(python3 -c 'import kafka; print(kafka.__version__)'))"
else
  log "pip: installing ${PY_PKGS[*]}"
  python3 -m pip install -q --disable-pip-version-check "${PY_PKGS[@]}"
fi

# --- Java jars (Maven Central) ----------------------------------------------------------------
copy_jars scripts/maven/clients-pom.xml "$CACHE/jars/clients" "kafka-clients" "$KAFKA_VERSION" \
  "kafka-clients-$KAFKA_VERSION.jar" "kafka-streams-$KAFKA_VERSION.jar" jackson-databind-2.19.0.jar \
  jose4j-0.9.6.jar
copy_jars scripts/maven/clients-share-pom.xml "$CACHE/jars/clients-share" \
  "kafka-clients + kafka-tools (share groups)" "$SHARE_KAFKA_VERSION" \
  "kafka-clients-$SHARE_KAFKA_VERSION.jar" "kafka-tools-$SHARE_KAFKA_VERSION.jar" slf4j-simple-1.7.36.jar
kafka_broker_jars "$KAFKA_VERSION" "$CACHE/jars/kafka"
# More broker versions only when asked (CI needs none): KELP_KAFKA_42=1 adds 4.2.1.
extra_brokers="${KELP_KAFKA_BROKERS:-}"
if [ "${KELP_KAFKA_42:-0}" = "1" ]; then
  extra_brokers="$extra_brokers 4.2.1"
fi
for v in $extra_brokers; do
  [ "$v" = "$KAFKA_VERSION" ] || kafka_broker_jars "$v" "$CACHE/jars/kafka-$v" broker-only
done

# --- Node and Go clients ----------------------------------------------------------------------
if command -v npm >/dev/null 2>&1 && [ -d tests/node ]; then
  if [ -d tests/node/node_modules/kafkajs ]; then
    log "npm: kafkajs present"
  else
    log "npm: kafkajs (tests/node)"
    (cd tests/node && npm ci --no-audit --no-fund --silent)
  fi
fi

if command -v go >/dev/null 2>&1 && [ -d tests/go ]; then
  log "go: franz-go modules (tests/go)"
  (cd tests/go && GOMODCACHE="$CACHE/gomod" GOFLAGS=-mod=mod go mod download)
fi
# --- SeaweedFS (weed: master, volume, filer, mq broker, Go Kafka gateway) ----------------------
scripts/seaweedfs.sh install

# --- Rust: the toolchain pinned in rust-toolchain.toml ---------------------------------------
# Installed explicitly rather than left to rustup's install-on-first-use, which some rustup
# versions and RUSTUP_AUTO_INSTALL=0 turn off: a fresh clone would then fail at cargo fmt.
pinned="$(sed -n 's/^channel *= *"\(.*\)"/\1/p' rust-toolchain.toml)"
if rustup run "$pinned" cargo clippy --version >/dev/null 2>&1 \
    && rustup run "$pinned" cargo fmt --version >/dev/null 2>&1; then
  log "rust $pinned: present ($(rustup run "$pinned" rustc --version))"
else
  log "rustup: installing the pinned toolchain $pinned"
  rustup toolchain install "$pinned" --profile minimal --component rustfmt,clippy
fi

# --- Fuzzing (scripts/fuzz.sh): a nightly toolchain and cargo-fuzz (crates.io) ----------------
if rustup run nightly rustc --version >/dev/null 2>&1; then
  log "rust nightly: present ($(rustup run nightly rustc --version))"
else
  log "rustup: installing the nightly toolchain"
  rustup toolchain install nightly --profile minimal
fi
if cargo fuzz --version >/dev/null 2>&1; then
  log "cargo-fuzz: present ($(cargo fuzz --version))"
else
  log "cargo: installing cargo-fuzz 0.13.2"
  cargo install --locked cargo-fuzz --version 0.13.2
fi

log "done"
