#!/usr/bin/env bash
# Starts Kelp secured, in one command: SASL_SSL only (TLS + SCRAM), ACLs on, one admin.
#
#   scripts/secure-quickstart.sh [DIR] [-- more kelp flags]
#
# In DIR (default ./kelp-secure), made once and reused on later runs:
#   ca.pem, ca.key         a CA of its own (openssl), valid 825 days
#   server.pem, server.key Kelp's certificate from that CA, for localhost, 127.0.0.1 and this
#                          host's name
#   users                  "admin:<random password>", Kelp's bootstrap user (a super user)
#   admin.properties       Java clients and Kafka's tools (kafka-acls, kafka-configs, ...)
#   admin.librdkafka.conf  librdkafka clients (kcat -F, confluent-kafka)
#   data/                  Kelp's data directory
# then runs target/release/kelp (scripts/install.sh builds it) in the foreground on
# SASL_SSL://0.0.0.0:${KELP_PORT:-9093}, advertised as ${KELP_HOST:-localhost}.
# Add users with kafka-configs (SCRAM) and grant them ACLs with kafka-acls, as the admin.
set -euo pipefail
cd "$(dirname "$0")/.."
root="$(pwd)"
dir="${1:-./kelp-secure}"
[ $# -gt 0 ] && shift
[ "${1:-}" = "--" ] && shift
port="${KELP_PORT:-9093}"
host="${KELP_HOST:-localhost}"
kelp="${KELP_BIN:-$root/target/release/kelp}"
log() { echo "secure-quickstart: $*" >&2; }

command -v openssl >/dev/null || { log "openssl is needed (apt-get install openssl)"; exit 1; }
[ -x "$kelp" ] || { log "$kelp not built: run scripts/install.sh first"; exit 1; }
mkdir -p "$dir/data"
dir="$(cd "$dir" && pwd)"
umask 077

if [ ! -f "$dir/ca.pem" ]; then
  log "making a CA and a server certificate in $dir"
  openssl req -x509 -newkey rsa:2048 -nodes -days 825 -subj "/CN=Kelp quick start CA" \
    -keyout "$dir/ca.key" -out "$dir/ca.pem" 2>/dev/null
  openssl req -newkey rsa:2048 -nodes -subj "/CN=$host" \
    -keyout "$dir/server.key" -out "$dir/server.csr" 2>/dev/null
  printf 'subjectAltName=DNS:localhost,DNS:%s,DNS:%s,IP:127.0.0.1\n' "$host" "$(hostname)" \
    >"$dir/server.ext"
  openssl x509 -req -in "$dir/server.csr" -CA "$dir/ca.pem" -CAkey "$dir/ca.key" \
    -CAcreateserial -days 825 -extfile "$dir/server.ext" -out "$dir/server.pem" 2>/dev/null
  rm -f "$dir/server.csr" "$dir/server.ext"
fi
if [ ! -f "$dir/users" ]; then
  password="$(openssl rand -hex 16)"
  echo "admin:$password" >"$dir/users"
  cat >"$dir/admin.properties" <<EOF
security.protocol=SASL_SSL
sasl.mechanism=SCRAM-SHA-512
sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username="admin" password="$password";
ssl.truststore.type=PEM
ssl.truststore.location=$dir/ca.pem
EOF
  cat >"$dir/admin.librdkafka.conf" <<EOF
security.protocol=SASL_SSL
sasl.mechanisms=SCRAM-SHA-512
sasl.username=admin
sasl.password=$password
ssl.ca.location=$dir/ca.pem
EOF
fi
log "admin's settings: $dir/admin.properties (Java, Kafka tools), $dir/admin.librdkafka.conf"
log "bootstrap: $host:$port (SASL_SSL)"
exec "$kelp" --listeners "SASL_SSL://0.0.0.0:$port" \
  --advertised-listeners "SASL_SSL://$host:$port" \
  --ssl-certificate-file "$dir/server.pem" --ssl-key-file "$dir/server.key" \
  --sasl-bootstrap-users "$dir/users" \
  --authorizer acl --super-users "User:admin" \
  --data-dir "$dir/data" "$@"
