#!/usr/bin/env python3
"""Generates src/protocol/error_codes/generated.rs: how to walk every error code of the
responses Kelp encodes with the kafka-protocol crate (`ErrorCodes` impls).

Reads the crate's own message structs (src/messages/*_response.rs of the kafka-protocol
version in Cargo.lock, from the cargo registry), and for each response type Kelp names in
RESPONSES emits an impl that hands every error code field (CODE_FIELDS) to a callback, recursing into
nested structs, lists and optional lists: the codes Kafka's `AbstractResponse.errorCounts()`
counts (top-level, per topic, per partition, per group, ...).

    python3 scripts/gen_error_codes.py

Regenerate when Kelp starts answering a new API (add it to RESPONSES; the compiler asks for
it, since `Response::encode_at` requires `ErrorCodes`) or when the crate is upgraded. The
output is run through rustfmt so `cargo fmt --check` stays clean.
"""
import glob
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "src/protocol/error_codes/generated.rs")

# (module, top-level response type): every response Kelp encodes through Response::encode.
RESPONSES = [
    "add_offsets_to_txn_response::AddOffsetsToTxnResponse",
    "add_partitions_to_txn_response::AddPartitionsToTxnResponse",
    "alter_configs_response::AlterConfigsResponse",
    "alter_partition_reassignments_response::AlterPartitionReassignmentsResponse",
    "alter_share_group_offsets_response::AlterShareGroupOffsetsResponse",
    "alter_user_scram_credentials_response::AlterUserScramCredentialsResponse",
    "api_versions_response::ApiVersionsResponse",
    "consumer_group_describe_response::ConsumerGroupDescribeResponse",
    "consumer_group_heartbeat_response::ConsumerGroupHeartbeatResponse",
    "create_acls_response::CreateAclsResponse",
    "create_partitions_response::CreatePartitionsResponse",
    "create_topics_response::CreateTopicsResponse",
    "delete_acls_response::DeleteAclsResponse",
    "delete_groups_response::DeleteGroupsResponse",
    "delete_records_response::DeleteRecordsResponse",
    "delete_share_group_offsets_response::DeleteShareGroupOffsetsResponse",
    "delete_topics_response::DeleteTopicsResponse",
    "describe_acls_response::DescribeAclsResponse",
    "describe_client_quotas_response::DescribeClientQuotasResponse",
    "describe_cluster_response::DescribeClusterResponse",
    "describe_configs_response::DescribeConfigsResponse",
    "describe_groups_response::DescribeGroupsResponse",
    "describe_log_dirs_response::DescribeLogDirsResponse",
    "describe_producers_response::DescribeProducersResponse",
    "describe_share_group_offsets_response::DescribeShareGroupOffsetsResponse",
    "describe_topic_partitions_response::DescribeTopicPartitionsResponse",
    "describe_transactions_response::DescribeTransactionsResponse",
    "describe_user_scram_credentials_response::DescribeUserScramCredentialsResponse",
    "elect_leaders_response::ElectLeadersResponse",
    "end_txn_response::EndTxnResponse",
    "fetch_response::FetchResponse",
    "find_coordinator_response::FindCoordinatorResponse",
    "heartbeat_response::HeartbeatResponse",
    "incremental_alter_configs_response::IncrementalAlterConfigsResponse",
    "init_producer_id_response::InitProducerIdResponse",
    "join_group_response::JoinGroupResponse",
    "leave_group_response::LeaveGroupResponse",
    "list_config_resources_response::ListConfigResourcesResponse",
    "list_groups_response::ListGroupsResponse",
    "list_offsets_response::ListOffsetsResponse",
    "list_partition_reassignments_response::ListPartitionReassignmentsResponse",
    "list_transactions_response::ListTransactionsResponse",
    "metadata_response::MetadataResponse",
    "offset_commit_response::OffsetCommitResponse",
    "offset_delete_response::OffsetDeleteResponse",
    "offset_fetch_response::OffsetFetchResponse",
    "offset_for_leader_epoch_response::OffsetForLeaderEpochResponse",
    "produce_response::ProduceResponse",
    "sasl_authenticate_response::SaslAuthenticateResponse",
    "sasl_handshake_response::SaslHandshakeResponse",
    "share_acknowledge_response::ShareAcknowledgeResponse",
    "share_fetch_response::ShareFetchResponse",
    "share_group_describe_response::ShareGroupDescribeResponse",
    "share_group_heartbeat_response::ShareGroupHeartbeatResponse",
    "sync_group_response::SyncGroupResponse",
    "txn_offset_commit_response::TxnOffsetCommitResponse",
]

# The fields Kafka's errorCounts() counts. Not CreateTopics' topic_config_error_code (the
# configs' describe outcome) nor ShareFetch's acknowledge_error_code, which Kafka leaves out.
CODE_FIELDS = {"error_code", "partition_error_code"}

STRUCT = re.compile(r"^pub struct (\w+) \{(.*?)^\}", re.S | re.M)
FIELD = re.compile(r"^\s*pub (\w+): (.+),\s*$", re.M)


def crate_dir():
    lock = open(os.path.join(ROOT, "Cargo.lock")).read()
    m = re.search(r'name = "kafka-protocol"\nversion = "([^"]+)"', lock)
    if not m:
        sys.exit("kafka-protocol not in Cargo.lock")
    home = os.environ.get("CARGO_HOME", os.path.expanduser("~/.cargo"))
    found = glob.glob(f"{home}/registry/src/*/kafka-protocol-{m.group(1)}")
    if not found:
        sys.exit(f"kafka-protocol {m.group(1)} not in {home}/registry (cargo fetch first)")
    return found[0]


def structs_of(path):
    """{struct name: [(field, type)]} of one generated message file."""
    text = open(path).read()
    return {m.group(1): FIELD.findall(m.group(2)) for m in STRUCT.finditer(text)}


def nested(ty, structs):
    """(how to iterate, struct) when a field's type holds a struct of the same file."""
    for pattern, how in [
        (r"Vec<(\w+)>", "vec"),
        (r"Option<Vec<(\w+)>>", "optvec"),
        (r"Option<(\w+)>", "opt"),
        (r"(\w+)", "one"),
    ]:
        m = re.fullmatch(pattern, ty)
        if m and m.group(1) in structs:
            return how, m.group(1)
    return None


def main():
    base = os.path.join(crate_dir(), "src/messages")
    impls = []
    for entry in RESPONSES:
        module, top = entry.split("::")
        structs = structs_of(os.path.join(base, module + ".rs"))
        memo = {}

        def has_codes(name, seen=()):
            if name in memo:
                return memo[name]
            if name in seen:
                return False
            found = False
            for field, ty in structs[name]:
                if field in CODE_FIELDS and ty == "i16":
                    found = True
                n = nested(ty, structs)
                if n and has_codes(n[1], seen + (name,)):
                    found = True
            memo[name] = found
            return found

        done = set()

        def emit(name):
            if name in done:
                return
            done.add(name)
            body = []
            for field, ty in structs[name]:
                if field in CODE_FIELDS and ty == "i16":
                    body.append(f"f(self.{field});")
                    continue
                n = nested(ty, structs)
                if not n or not has_codes(n[1]):
                    continue
                how, inner = n
                emit(inner)
                if how == "vec":
                    body.append(f"for x in &self.{field} {{ x.error_codes(f); }}")
                elif how == "optvec":
                    body.append(f"for x in self.{field}.iter().flatten() {{ x.error_codes(f); }}")
                elif how == "opt":
                    body.append(f"if let Some(x) = &self.{field} {{ x.error_codes(f); }}")
                else:
                    body.append(f"self.{field}.error_codes(f);")
            arg = "f" if body else "_f"
            impls.append(
                f"impl ErrorCodes for {module}::{name} {{\n"
                f"    fn error_codes(&self, {arg}: &mut dyn FnMut(i16)) {{\n"
                + "".join(f"        {b}\n" for b in body)
                + "    }\n}\n"
            )

        if top not in structs:
            sys.exit(f"{entry}: no such struct")
        emit(top)
    modules = sorted({e.split("::")[0] for e in RESPONSES})
    out = (
        "//! Generated by scripts/gen_error_codes.py from the kafka-protocol crate's message\n"
        "//! structs: do not edit. Every `error_code` of each response Kelp encodes, for the\n"
        "//! request error counters.\n\n"
        "use kafka_protocol::messages::{" + ", ".join(modules) + "};\n\n"
        "use super::ErrorCodes;\n\n" + "\n".join(impls)
    )
    with open(OUT, "w") as fh:
        fh.write(out)
    subprocess.run(["rustfmt", "--edition", "2021", OUT], check=True)
    print(f"wrote {OUT}: {len(impls)} impls")


if __name__ == "__main__":
    main()
