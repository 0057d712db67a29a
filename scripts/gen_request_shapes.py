#!/usr/bin/env python3
"""Generates src/protocol/shape/schema.rs, the request shapes Kelp's pre-decode validator walks.

Reads Apache Kafka's message definitions (common/message/*.json) straight out of the
kafka-clients jar, so the table is exactly Kafka's: which fields exist in which versions,
which are nullable, which are tagged, and from which version a message is flexible.

    python3 scripts/gen_request_shapes.py [path/to/kafka-clients-X.jar]

Default jar: the newest ~/.cache/kelp/jars/clients/kafka-clients-*.jar. The output is run
through rustfmt so `cargo fmt --check` stays clean. Regenerate when Kelp starts decoding a new
API (add it to MESSAGES) or when the jar is upgraded.
"""
import glob
import json
import os
import re
import subprocess
import sys
import zipfile

# (Rust static name, Kafka message name): every request Kelp decodes with the kafka-protocol
# crate, plus the consumer-protocol subscription Kelp decodes out of JoinGroup metadata.
MESSAGES = [
    ("FETCH", "FetchRequest"),
    ("LIST_OFFSETS", "ListOffsetsRequest"),
    ("METADATA", "MetadataRequest"),
    ("OFFSET_COMMIT", "OffsetCommitRequest"),
    ("OFFSET_FETCH", "OffsetFetchRequest"),
    ("FIND_COORDINATOR", "FindCoordinatorRequest"),
    ("JOIN_GROUP", "JoinGroupRequest"),
    ("HEARTBEAT", "HeartbeatRequest"),
    ("LEAVE_GROUP", "LeaveGroupRequest"),
    ("SYNC_GROUP", "SyncGroupRequest"),
    ("DESCRIBE_GROUPS", "DescribeGroupsRequest"),
    ("LIST_GROUPS", "ListGroupsRequest"),
    ("API_VERSIONS", "ApiVersionsRequest"),
    ("CREATE_TOPICS", "CreateTopicsRequest"),
    ("DELETE_TOPICS", "DeleteTopicsRequest"),
    ("DELETE_RECORDS", "DeleteRecordsRequest"),
    ("INIT_PRODUCER_ID", "InitProducerIdRequest"),
    ("OFFSET_FOR_LEADER_EPOCH", "OffsetForLeaderEpochRequest"),
    ("DESCRIBE_CONFIGS", "DescribeConfigsRequest"),
    ("DELETE_GROUPS", "DeleteGroupsRequest"),
    ("INCREMENTAL_ALTER_CONFIGS", "IncrementalAlterConfigsRequest"),
    ("OFFSET_DELETE", "OffsetDeleteRequest"),
    ("DESCRIBE_CLUSTER", "DescribeClusterRequest"),
    ("CREATE_PARTITIONS", "CreatePartitionsRequest"),
    ("ALTER_CONFIGS", "AlterConfigsRequest"),
    ("DESCRIBE_TOPIC_PARTITIONS", "DescribeTopicPartitionsRequest"),
    ("SASL_HANDSHAKE", "SaslHandshakeRequest"),
    ("SASL_AUTHENTICATE", "SaslAuthenticateRequest"),
    ("DESCRIBE_USER_SCRAM_CREDENTIALS", "DescribeUserScramCredentialsRequest"),
    ("ALTER_USER_SCRAM_CREDENTIALS", "AlterUserScramCredentialsRequest"),
    ("DESCRIBE_CLIENT_QUOTAS", "DescribeClientQuotasRequest"),
    ("DESCRIBE_ACLS", "DescribeAclsRequest"),
    ("CREATE_ACLS", "CreateAclsRequest"),
    ("DELETE_ACLS", "DeleteAclsRequest"),
    ("ADD_PARTITIONS_TO_TXN", "AddPartitionsToTxnRequest"),
    ("ADD_OFFSETS_TO_TXN", "AddOffsetsToTxnRequest"),
    ("END_TXN", "EndTxnRequest"),
    ("TXN_OFFSET_COMMIT", "TxnOffsetCommitRequest"),
    ("DESCRIBE_TRANSACTIONS", "DescribeTransactionsRequest"),
    ("DESCRIBE_PRODUCERS", "DescribeProducersRequest"),
    ("LIST_TRANSACTIONS", "ListTransactionsRequest"),
    ("DESCRIBE_LOG_DIRS", "DescribeLogDirsRequest"),
    ("ELECT_LEADERS", "ElectLeadersRequest"),
    ("ALTER_PARTITION_REASSIGNMENTS", "AlterPartitionReassignmentsRequest"),
    ("LIST_PARTITION_REASSIGNMENTS", "ListPartitionReassignmentsRequest"),
    ("CONSUMER_GROUP_HEARTBEAT", "ConsumerGroupHeartbeatRequest"),
    ("CONSUMER_GROUP_DESCRIBE", "ConsumerGroupDescribeRequest"),
    ("LIST_CONFIG_RESOURCES", "ListConfigResourcesRequest"),
    ("SHARE_GROUP_HEARTBEAT", "ShareGroupHeartbeatRequest"),
    ("SHARE_GROUP_DESCRIBE", "ShareGroupDescribeRequest"),
    ("SHARE_FETCH", "ShareFetchRequest"),
    ("SHARE_ACKNOWLEDGE", "ShareAcknowledgeRequest"),
    ("DESCRIBE_SHARE_GROUP_OFFSETS", "DescribeShareGroupOffsetsRequest"),
    ("ALTER_SHARE_GROUP_OFFSETS", "AlterShareGroupOffsetsRequest"),
    ("DELETE_SHARE_GROUP_OFFSETS", "DeleteShareGroupOffsetsRequest"),
    ("CONSUMER_PROTOCOL_SUBSCRIPTION", "ConsumerProtocolSubscription"),
]

PRIMITIVES = {
    "bool": "Bool",
    "int8": "Int8",
    "int16": "Int16",
    "uint16": "Uint16",
    "int32": "Int32",
    "uint32": "Uint32",
    "int64": "Int64",
    "float64": "Float64",
    "uuid": "Uuid",
    "string": "String",
    "bytes": "Bytes",
    "records": "Records",
}


def versions(spec):
    """Kafka version spec ("3+", "0-4", "5", "none") as a Rust `V(lo, hi)`."""
    if spec is None or spec == "none":
        return "V::NONE"
    if spec.endswith("+"):
        return "V(%d, MAX)" % int(spec[:-1])
    if "-" in spec:
        lo, hi = spec.split("-")
        return "V(%d, %d)" % (int(lo), int(hi))
    return "V(%d, %d)" % (int(spec), int(spec))


def load(jar, name):
    with zipfile.ZipFile(jar) as z:
        text = z.read("common/message/%s.json" % name).decode()
    # Kafka's JSON files carry // line comments (the licence header); "about" texts may hold
    # "//" inside URLs, so only whole comment lines are dropped.
    text = re.sub(r"^\s*//.*$", "", text, flags=re.M)
    return json.loads(text)


def kind(field, common):
    t = field["type"]
    if t.startswith("[]"):
        inner = t[2:]
        if inner in PRIMITIVES:
            return "Kind::Array(&Kind::%s)" % PRIMITIVES[inner]
        return "Kind::Array(&%s)" % struct(field, inner, common)
    if t in PRIMITIVES:
        return "Kind::%s" % PRIMITIVES[t]
    # A nullable struct (DescribeTopicPartitions' Cursor) is walked behind its int8 marker.
    return struct(field, t, common)


def struct(field, type_name, common):
    fields = field.get("fields")
    if fields is None:
        fields = common[type_name]
    return "Kind::Struct(&[%s])" % ", ".join(emit(f, common) for f in fields)


def emit(f, common):
    out = 'f("%s", %s, %s)' % (f["name"], kind(f, common), versions(f.get("versions")))
    if f.get("nullableVersions"):
        out += ".nullable(%s)" % versions(f["nullableVersions"])
    if "tag" in f:
        out += ".tagged(%d, %s)" % (f["tag"], versions(f.get("taggedVersions")))
    return out


def main():
    if len(sys.argv) > 1:
        jar = sys.argv[1]
    else:
        jars = sorted(glob.glob(os.path.expanduser("~/.cache/kelp/jars/clients/kafka-clients-*.jar")))
        if not jars:
            sys.exit("no kafka-clients jar under ~/.cache/kelp/jars/clients/")
        jar = jars[-1]
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    out = os.path.join(root, "src/protocol/shape/schema.rs")
    lines = [
        "//! Kafka's request shapes, GENERATED by scripts/gen_request_shapes.py from",
        "//! %s (common/message/*.json); do not edit by hand." % os.path.basename(jar),
        "//!",
        "//! One [`Message`] per message Kelp decodes with the kafka-protocol crate: its fields per",
        "//! version, nullability, tags and first flexible version, exactly as Kafka defines them.",
        "",
        "use super::{f, Kind, Message, MAX, V};",
        "",
    ]
    names = []
    for static, name in MESSAGES:
        m = load(jar, name)
        common = {c["name"]: c["fields"] for c in m.get("commonStructs", [])}
        key = m.get("apiKey", -1)
        fields = ", ".join(emit(f, common) for f in m["fields"])
        lines.append("/// `%s` (valid versions %s, flexible %s)." % (name, m["validVersions"], m["flexibleVersions"]))
        lines.append(
            'pub static %s: Message = Message { name: "%s", api_key: %d, valid: %s, flexible: %s, fields: &[%s] };'
            % (static, name, key, versions(m["validVersions"]), versions(m["flexibleVersions"]), fields)
        )
        lines.append("")
        names.append(static)
    lines.append("/// Every message above.")
    lines.append("pub static ALL: &[&Message] = &[%s];" % ", ".join("&" + n for n in names))
    with open(out, "w") as fh:
        fh.write("\n".join(lines) + "\n")
    subprocess.run(["rustfmt", "--edition", "2021", out], check=True)
    print("wrote", out)


if __name__ == "__main__":
    main()
