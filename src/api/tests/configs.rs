//! DescribeConfigs and IncrementalAlterConfigs: topic overrides and defaults, broker
//! configs, group configs, the refusals, and an altered limit taking effect on the next
//! produce.

use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::describe_configs_response::{
    DescribeConfigsResourceResult, DescribeConfigsResult,
};
use kafka_protocol::messages::incremental_alter_configs_request::{
    AlterConfigsResource, AlterableConfig,
};
use kafka_protocol::messages::{DescribeConfigsRequest, IncrementalAlterConfigsRequest};

use super::*;
use crate::api::sb;
use crate::cluster::topic_config::TOPIC_CONFIGS;

const TOPIC: i8 = 2;
const BROKER: i8 = 4;
const SET: i8 = 0;
const DELETE: i8 = 1;
const APPEND: i8 = 2;
const SUBTRACT: i8 = 3;

fn resource(kind: i8, name: &str, keys: Option<&[&str]>) -> DescribeConfigsResource {
    DescribeConfigsResource::default()
        .with_resource_type(kind)
        .with_resource_name(sb(name))
        .with_configuration_keys(keys.map(|ks| ks.iter().map(|k| sb(*k)).collect()))
}

async fn describe(
    c: &Client,
    version: i16,
    resources: Vec<DescribeConfigsResource>,
) -> Vec<DescribeConfigsResult> {
    c.send(
        version,
        DescribeConfigsRequest::default().with_resources(resources),
    )
    .await
    .results
}

fn entry<'a>(r: &'a DescribeConfigsResult, name: &str) -> &'a DescribeConfigsResourceResult {
    r.configs
        .iter()
        .find(|c| c.name.as_str() == name)
        .unwrap_or_else(|| panic!("{name} not described"))
}

/// (value, source) of one topic config as DescribeConfigs reports it.
async fn topic_config(c: &Client, topic: &str, name: &str) -> (String, i8) {
    let rs = describe(c, 4, vec![resource(TOPIC, topic, Some(&[name]))]).await;
    assert_eq!(rs[0].error_code, code::NONE);
    let e = entry(&rs[0], name);
    (
        e.value.as_deref().unwrap_or_default().to_string(),
        e.config_source,
    )
}

fn alter(kind: i8, name: &str, ops: &[(&str, i8, Option<&str>)]) -> AlterConfigsResource {
    AlterConfigsResource::default()
        .with_resource_type(kind)
        .with_resource_name(sb(name))
        .with_configs(
            ops.iter()
                .map(|(k, op, v)| {
                    AlterableConfig::default()
                        .with_name(sb(*k))
                        .with_config_operation(*op)
                        .with_value(v.map(sb))
                })
                .collect(),
        )
}

/// Error code of each resource altered.
async fn alter_codes(
    c: &Client,
    version: i16,
    validate_only: bool,
    rs: Vec<AlterConfigsResource>,
) -> Vec<i16> {
    let req = IncrementalAlterConfigsRequest::default()
        .with_resources(rs)
        .with_validate_only(validate_only);
    let resp = c.send(version, req).await;
    resp.responses.iter().map(|r| r.error_code).collect()
}

#[test]
fn topic_configs_show_overrides_and_defaults_at_every_version() {
    run(1, &[], |b| async move {
        let c = &b.client;
        create_topic_with(c, "t", 1, &[("retention.ms", "1000")]).await;
        for v in [1i16, 2, 3, 4] {
            let rs = describe(c, v, vec![resource(TOPIC, "t", None)]).await;
            let r = &rs[0];
            assert_eq!(
                (r.error_code, r.resource_type, r.resource_name.as_str()),
                (0, TOPIC, "t")
            );
            assert_eq!(
                r.configs.len(),
                TOPIC_CONFIGS.len(),
                "v{v}: every known config"
            );
            let set = entry(r, "retention.ms");
            assert_eq!(
                (set.value.as_deref(), set.config_source, set.read_only),
                (Some("1000"), 1, false)
            );
            let default = entry(r, "max.message.bytes");
            assert_eq!(
                (default.value.as_deref(), default.config_source),
                (Some("1048588"), 5)
            );
            if v >= 3 {
                assert_eq!(
                    (set.config_type, default.config_type),
                    (5, 3),
                    "v{v}: long and int"
                );
            }
        }
        let rs = describe(
            c,
            4,
            vec![resource(
                TOPIC,
                "t",
                Some(&["segment.bytes", "retention.ms"]),
            )],
        )
        .await;
        let mut names: Vec<&str> = rs[0].configs.iter().map(|c| c.name.as_str()).collect();
        names.sort();
        assert_eq!(names, ["retention.ms", "segment.bytes"]);
    });
}

#[test]
fn synonyms_and_documentation_come_when_asked() {
    run(1, &[], |b| async move {
        let c = &b.client;
        create_topic_with(c, "t", 1, &[("cleanup.policy", "compact")]).await;
        let req = DescribeConfigsRequest::default()
            .with_resources(vec![resource(TOPIC, "t", Some(&["cleanup.policy"]))])
            .with_include_synonyms(true)
            .with_include_documentation(true);
        let resp = c.send(4, req).await;
        let e = entry(&resp.results[0], "cleanup.policy");
        // As Kafka: the override, then the broker config giving the default.
        let syn: Vec<_> = e
            .synonyms
            .iter()
            .map(|s| (s.name.as_str(), s.value.as_deref(), s.source))
            .collect();
        assert_eq!(
            syn,
            [
                ("cleanup.policy", Some("compact"), 1),
                ("log.cleanup.policy", Some("delete"), 5)
            ]
        );
        assert!(e.documentation.as_ref().is_some_and(|d| !d.is_empty()));
        // Not asked: neither.
        let rs = describe(c, 4, vec![resource(TOPIC, "t", Some(&["cleanup.policy"]))]).await;
        let e = entry(&rs[0], "cleanup.policy");
        assert!(e.synonyms.is_empty() && e.documentation.is_none());
    });
}

#[test]
fn unknown_topics_and_resource_types_fail_alone_and_broker_configs_are_read_only() {
    run(
        1,
        &["--default-partitions", "6", "--auto-create-topics", "false"],
        |b| async move {
            let c = &b.client;
            create_topic(c, "t", 1).await;
            let rs = describe(
                c,
                4,
                vec![
                    resource(TOPIC, "nope", None),
                    resource(BROKER, "0", None),
                    resource(8, "logger", None),
                    resource(TOPIC, "t", Some(&["retention.ms"])),
                ],
            )
            .await;
            let codes: Vec<i16> = rs.iter().map(|r| r.error_code).collect();
            assert_eq!(
                codes,
                [
                    code::UNKNOWN_TOPIC_OR_PARTITION,
                    0,
                    code::INVALID_REQUEST,
                    0
                ]
            );
            assert!(rs[0].configs.is_empty() && rs[0].error_message.is_some());
            assert!(rs[2].configs.is_empty());
            let n = entry(&rs[1], "num.partitions");
            assert_eq!(
                (n.value.as_deref(), n.read_only, n.config_source),
                (Some("6"), true, 4)
            );
            let auto = entry(&rs[1], "auto.create.topics.enable");
            assert_eq!(auto.value.as_deref(), Some("false"));
            assert_eq!(rs[3].configs.len(), 1);
        },
    );
}

#[test]
fn set_delete_append_and_subtract_change_what_is_described() {
    run(1, &[], |b| async move {
        let c = &b.client;
        create_topic(c, "t", 1).await;
        for v in [0i16, 1] {
            let set = alter(TOPIC, "t", &[("retention.ms", SET, Some("5000"))]);
            assert_eq!(alter_codes(c, v, false, vec![set]).await, [0], "v{v}");
            assert_eq!(
                topic_config(c, "t", "retention.ms").await,
                ("5000".into(), 1)
            );
            let del = alter(TOPIC, "t", &[("retention.ms", DELETE, None)]);
            assert_eq!(alter_codes(c, v, false, vec![del]).await, [0], "v{v}");
            let default = crate::cluster::topic_config::default_of("retention.ms").unwrap();
            assert_eq!(
                topic_config(c, "t", "retention.ms").await,
                (default.into(), 5)
            );
        }
        let append = alter(TOPIC, "t", &[("cleanup.policy", APPEND, Some("compact"))]);
        assert_eq!(alter_codes(c, 1, false, vec![append]).await, [0]);
        assert_eq!(
            topic_config(c, "t", "cleanup.policy").await,
            ("delete,compact".into(), 1)
        );
        let subtract = alter(TOPIC, "t", &[("cleanup.policy", SUBTRACT, Some("delete"))]);
        assert_eq!(alter_codes(c, 1, false, vec![subtract]).await, [0]);
        assert_eq!(
            topic_config(c, "t", "cleanup.policy").await,
            ("compact".into(), 1)
        );
    });
}

#[test]
fn refused_alterations_change_nothing() {
    run(1, &[], |b| async move {
        let c = &b.client;
        create_topic_with(c, "t", 1, &[("retention.ms", "1000")]).await;
        let good = ("retention.ms", SET, Some("2000"));
        let rs = vec![
            alter(TOPIC, "nope", &[good]),
            alter(TOPIC, "t", &[good, ("no.such", SET, Some("1"))]),
            alter(TOPIC, "t", &[good, ("segment.bytes", SET, Some("big"))]),
            alter(TOPIC, "t", &[good, ("segment.bytes", SET, None)]),
            alter(TOPIC, "t", &[good, ("segment.ms", APPEND, Some("1"))]),
            alter(TOPIC, "t", &[good, ("segment.ms", 9, Some("1"))]),
            alter(BROKER, "0", &[("num.partitions", SET, Some("3"))]),
            // No dynamic broker config exists: deleting one (as kafka-reassign-partitions
            // clears throttles) changes nothing; on another broker id it is refused.
            alter(
                BROKER,
                "0",
                &[("leader.replication.throttled.rate", DELETE, None)],
            ),
            alter(
                BROKER,
                "",
                &[("follower.replication.throttled.rate", DELETE, None)],
            ),
            alter(
                BROKER,
                "9",
                &[("leader.replication.throttled.rate", DELETE, None)],
            ),
        ];
        let codes = alter_codes(c, 1, false, rs).await;
        assert_eq!(
            codes,
            [
                code::UNKNOWN_TOPIC_OR_PARTITION,
                code::INVALID_CONFIG,
                code::INVALID_CONFIG,
                code::INVALID_CONFIG,
                code::INVALID_CONFIG,
                code::INVALID_REQUEST,
                code::INVALID_REQUEST,
                code::NONE,
                code::NONE,
                code::INVALID_REQUEST,
            ]
        );
        // Each resource is applied whole or not at all.
        assert_eq!(
            topic_config(c, "t", "retention.ms").await,
            ("1000".into(), 1)
        );
        // validate_only checks and answers, and changes nothing either.
        let ok = alter(TOPIC, "t", &[good]);
        assert_eq!(alter_codes(c, 1, true, vec![ok]).await, [0]);
        assert_eq!(
            topic_config(c, "t", "retention.ms").await,
            ("1000".into(), 1)
        );
        assert!(c.shard.cluster.topic("nope").is_none());
    });
}

#[test]
fn an_altered_max_message_bytes_applies_to_the_next_produce_on_every_shard() {
    run(2, &[], |b| async move {
        let c = &b.client;
        create_topic(c, "t", 2).await;
        let limit = alter(TOPIC, "t", &[("max.message.bytes", SET, Some("200"))]);
        assert_eq!(alter_codes(c, 1, false, vec![limit]).await, [0]);
        for p in 0..2 {
            let r = produce(c, "t", p, sized_batch(1, 500, 0)).await;
            assert_eq!(r.error_code, code::MESSAGE_TOO_LARGE, "p{p}");
            let r = b
                .on(1, move |c| async move {
                    produce(&c, "t", p, sized_batch(1, 500, 0)).await.error_code
                })
                .await;
            assert_eq!(r, code::MESSAGE_TOO_LARGE, "p{p} from shard 1");
        }
        let lift = alter(TOPIC, "t", &[("max.message.bytes", DELETE, None)]);
        assert_eq!(alter_codes(c, 1, false, vec![lift]).await, [0]);
        for p in 0..2 {
            assert_eq!(produce_ok(c, "t", p, sized_batch(1, 500, 0)).await, 0);
        }
    });
}

#[test]
fn legacy_alter_configs_replaces_every_override() {
    use kafka_protocol::messages::alter_configs_request::{
        AlterConfigsResource as Legacy, AlterableConfig as LegacyConfig,
    };
    use kafka_protocol::messages::AlterConfigsRequest;
    run(1, &[], |b| async move {
        let c = &b.client;
        create_topic_with(
            c,
            "t",
            1,
            &[("retention.ms", "1000"), ("cleanup.policy", "compact")],
        )
        .await;
        let legacy = |kind: i8, name: &str, configs: &[(&str, Option<&str>)]| {
            Legacy::default()
                .with_resource_type(kind)
                .with_resource_name(sb(name))
                .with_configs(
                    configs
                        .iter()
                        .map(|(k, v)| {
                            LegacyConfig::default()
                                .with_name(sb(*k))
                                .with_value(v.map(sb))
                        })
                        .collect(),
                )
        };
        let send = |resources: Vec<Legacy>, validate_only: bool| {
            let c = c.clone();
            async move {
                let req = AlterConfigsRequest::default()
                    .with_resources(resources)
                    .with_validate_only(validate_only);
                c.send(1, req)
                    .await
                    .responses
                    .iter()
                    .map(|r| r.error_code)
                    .collect::<Vec<_>>()
            }
        };
        let codes = send(
            vec![
                legacy(TOPIC, "t", &[("retention.ms", Some("soon"))]),
                legacy(TOPIC, "t", &[("retention.ms", None)]),
                legacy(TOPIC, "missing", &[("retention.ms", Some("5"))]),
                legacy(BROKER, "0", &[("num.partitions", Some("3"))]),
            ],
            false,
        )
        .await;
        assert_eq!(
            codes,
            [
                code::INVALID_CONFIG,
                code::INVALID_REQUEST,
                code::UNKNOWN_TOPIC_OR_PARTITION,
                code::INVALID_REQUEST
            ]
        );
        let set = [("retention.bytes", Some("5000"))];
        assert_eq!(send(vec![legacy(TOPIC, "t", &set)], true).await, [0]);
        assert_eq!(
            topic_config(c, "t", "retention.ms").await,
            ("1000".into(), 1)
        );
        // The overrides become exactly what was sent: the others go back to their defaults.
        assert_eq!(send(vec![legacy(TOPIC, "t", &set)], false).await, [0]);
        assert_eq!(
            topic_config(c, "t", "retention.bytes").await,
            ("5000".into(), 1)
        );
        assert_eq!(
            topic_config(c, "t", "retention.ms").await,
            ("604800000".into(), 5)
        );
        assert_eq!(
            topic_config(c, "t", "cleanup.policy").await,
            ("delete".into(), 5)
        );
    });
}

/// A broker resource is this node's id (every config), the empty name (Kafka's cluster-wide
/// dynamic defaults: Kelp has none) or an error; a flag that gives topics their default
/// (--segment-bytes) shows on the topic as the broker's static config, with Kafka's synonyms.
#[test]
fn broker_names_and_flag_given_topic_defaults_are_described_as_kafka() {
    run(1, &["--segment-bytes", "1048576"], |b| async move {
        let c = &b.client;
        create_topic(c, "t", 1).await;
        let rs = describe(
            c,
            4,
            vec![
                resource(BROKER, "", None),
                resource(BROKER, "7", None),
                resource(BROKER, "x", None),
                resource(BROKER, "0", None),
            ],
        )
        .await;
        let codes: Vec<i16> = rs.iter().map(|r| r.error_code).collect();
        assert_eq!(
            codes,
            [0, code::INVALID_REQUEST, code::INVALID_REQUEST, 0],
            "{rs:?}"
        );
        assert!(rs[0].configs.is_empty());
        assert!(rs[3].configs.len() > 60, "{}", rs[3].configs.len());
        assert!(rs[3].configs.iter().all(|e| e.read_only));
        let seg = entry(&rs[3], "log.segment.bytes");
        assert_eq!(
            (seg.value.as_deref(), seg.config_source),
            (Some("1048576"), 4)
        );
        // Unset nullable configs are null, as Kafka's.
        let issuer = entry(&rs[3], "sasl.oauthbearer.expected.issuer");
        assert_eq!((issuer.value.as_deref(), issuer.config_source), (None, 5));

        let mut req = DescribeConfigsRequest::default().with_resources(vec![resource(
            TOPIC,
            "t",
            Some(&["segment.bytes"]),
        )]);
        req.include_synonyms = true;
        let rs = c.send(4, req).await.results;
        let e = entry(&rs[0], "segment.bytes");
        assert_eq!(
            (e.value.as_deref(), e.config_source, e.read_only),
            (Some("1048576"), 4, false)
        );
        let syn: Vec<(&str, Option<&str>, i8)> = e
            .synonyms
            .iter()
            .map(|s| (s.name.as_str(), s.value.as_deref(), s.source))
            .collect();
        assert_eq!(
            syn,
            [
                ("log.segment.bytes", Some("1048576"), 4),
                ("log.segment.bytes", Some("1073741824"), 5)
            ]
        );
    });
}

const GROUP: i8 = 32;

/// (value, source, synonyms) of one group config as DescribeConfigs v4 reports it.
async fn group_config(c: &Client, group: &str, name: &str) -> (String, i8, Vec<(String, i8)>) {
    let req = DescribeConfigsRequest::default()
        .with_resources(vec![resource(GROUP, group, Some(&[name]))])
        .with_include_synonyms(true);
    let rs = c.send(4, req).await.results;
    assert_eq!(rs[0].error_code, code::NONE, "{:?}", rs[0].error_message);
    let e = entry(&rs[0], name);
    assert!(!e.read_only);
    (
        e.value.as_deref().unwrap_or_default().to_string(),
        e.config_source,
        e.synonyms
            .iter()
            .map(|s| (s.value.as_deref().unwrap_or_default().to_string(), s.source))
            .collect(),
    )
}

#[test]
fn group_configs_are_set_described_and_deleted_for_any_group() {
    use crate::cluster::group_config::GROUP_CONFIGS;
    run(
        2,
        &["--group-consumer-session-timeout-ms", "50000"],
        |b| async move {
            let c = &b.client;
            // Every group config, for a group that does not exist, at every version.
            for v in [1i16, 2, 3, 4] {
                let rs = describe(c, v, vec![resource(GROUP, "nobody", None)]).await;
                assert_eq!((rs[0].error_code, rs[0].resource_type), (0, GROUP));
                assert_eq!(rs[0].configs.len(), GROUP_CONFIGS.len());
            }
            // The default is the broker's: its flag where Kelp has one.
            assert_eq!(
                group_config(c, "g", "consumer.session.timeout.ms").await,
                ("50000".into(), 5, vec![("50000".into(), 5)])
            );
            assert_eq!(
                group_config(c, "g", "share.auto.offset.reset").await,
                ("latest".into(), 5, vec![("latest".into(), 5)])
            );
            let set = alter(
                GROUP,
                "g",
                &[
                    ("share.auto.offset.reset", SET, Some("earliest")),
                    ("share.record.lock.duration.ms", SET, Some("20000")),
                ],
            );
            assert_eq!(alter_codes(c, 1, true, vec![set.clone()]).await, [0]);
            assert_eq!(group_config(c, "g", "share.auto.offset.reset").await.1, 5);
            assert_eq!(alter_codes(c, 1, false, vec![set]).await, [0]);
            assert_eq!(
                group_config(c, "g", "share.auto.offset.reset").await,
                ("earliest".into(), 8, vec![("earliest".into(), 8)])
            );
            assert_eq!(
                c.shard
                    .cluster
                    .group_config("g", "share.record.lock.duration.ms")
                    .as_deref(),
                Some("20000")
            );
            // Refusals, each alone, and none changes anything.
            let codes = alter_codes(
                c,
                0,
                false,
                vec![
                    alter(
                        GROUP,
                        "g",
                        &[("share.record.lock.duration.ms", SET, Some("1"))],
                    ),
                    alter(
                        GROUP,
                        "g",
                        &[("share.record.lock.duration.ms", SET, Some("61000"))],
                    ),
                    alter(GROUP, "g", &[("no.such.config", SET, Some("1"))]),
                    alter(
                        GROUP,
                        "g",
                        &[("share.auto.offset.reset", SET, Some("sometime"))],
                    ),
                    alter(GROUP, "g", &[("share.isolation.level", APPEND, Some("x"))]),
                    alter(GROUP, "g", &[("share.isolation.level", SET, None)]),
                    alter(
                        GROUP,
                        "",
                        &[("share.isolation.level", SET, Some("read_committed"))],
                    ),
                ],
            )
            .await;
            assert_eq!(
                codes,
                [
                    code::INVALID_CONFIG,
                    code::INVALID_CONFIG,
                    code::INVALID_CONFIG,
                    code::INVALID_CONFIG,
                    code::INVALID_CONFIG,
                    code::INVALID_REQUEST,
                    code::INVALID_REQUEST
                ]
            );
            assert_eq!(
                group_config(c, "g", "share.record.lock.duration.ms")
                    .await
                    .0,
                "20000"
            );
            let rs = describe(c, 4, vec![resource(GROUP, "", None)]).await;
            assert_eq!(rs[0].error_code, code::INVALID_REQUEST);
            // DELETE goes back to the default; deleting an unset one is no error (Kafka).
            let del = alter(
                GROUP,
                "g",
                &[
                    ("share.auto.offset.reset", DELETE, None),
                    ("share.isolation.level", DELETE, None),
                ],
            );
            assert_eq!(alter_codes(c, 1, false, vec![del]).await, [0]);
            assert_eq!(
                group_config(c, "g", "share.auto.offset.reset").await,
                ("latest".into(), 5, vec![("latest".into(), 5)])
            );
            assert_eq!(
                group_config(c, "g", "share.record.lock.duration.ms")
                    .await
                    .1,
                8
            );
        },
    );
}

#[test]
fn legacy_alter_configs_replaces_a_groups_overrides() {
    use kafka_protocol::messages::alter_configs_request::{
        AlterConfigsResource as Legacy, AlterableConfig as LegacyConfig,
    };
    use kafka_protocol::messages::AlterConfigsRequest;
    run(1, &[], |b| async move {
        let c = &b.client;
        let set = alter(
            GROUP,
            "g",
            &[("share.isolation.level", SET, Some("read_committed"))],
        );
        assert_eq!(alter_codes(c, 1, false, vec![set]).await, [0]);
        let legacy = |configs: &[(&str, &str)]| {
            AlterConfigsRequest::default().with_resources(vec![Legacy::default()
                .with_resource_type(GROUP)
                .with_resource_name(sb("g"))
                .with_configs(
                    configs
                        .iter()
                        .map(|(k, v)| {
                            LegacyConfig::default()
                                .with_name(sb(*k))
                                .with_value(Some(sb(*v)))
                        })
                        .collect(),
                )])
        };
        let bad = legacy(&[("share.heartbeat.interval.ms", "1")]);
        assert_eq!(
            c.send(2, bad).await.responses[0].error_code,
            code::INVALID_CONFIG
        );
        let good = legacy(&[("share.heartbeat.interval.ms", "6000")]);
        assert_eq!(c.send(2, good).await.responses[0].error_code, 0);
        assert_eq!(
            group_config(c, "g", "share.heartbeat.interval.ms").await.0,
            "6000"
        );
        assert_eq!(
            group_config(c, "g", "share.isolation.level").await,
            (
                "read_uncommitted".into(),
                5,
                vec![("read_uncommitted".into(), 5)]
            )
        );
    });
}

#[test]
fn list_config_resources_names_topics_brokers_and_groups_with_configs() {
    use kafka_protocol::messages::ListConfigResourcesRequest;
    run(1, &[], |b| async move {
        let c = &b.client;
        create_topic(c, "lc", 1).await;
        let all = c.send(1, ListConfigResourcesRequest::default()).await;
        assert_eq!(all.error_code, code::NONE);
        let names: Vec<(i8, &str)> = all
            .config_resources
            .iter()
            .map(|r| (r.resource_type, r.resource_name.as_str()))
            .collect();
        assert!(names.contains(&(2, "lc")), "{names:?}");
        let node = c.shard.config.node_id.to_string();
        assert!(names.contains(&(4, node.as_str())), "{names:?}");
        let topics = c
            .send(
                1,
                ListConfigResourcesRequest::default().with_resource_types(vec![2]),
            )
            .await;
        assert!(topics.config_resources.iter().all(|r| r.resource_type == 2));
        // v0 (ListClientMetricsResources): Kelp has no client metrics resources.
        let v0 = c.send(0, ListConfigResourcesRequest::default()).await;
        assert!(v0.config_resources.is_empty());
        let bad = c
            .send(
                1,
                ListConfigResourcesRequest::default().with_resource_types(vec![99]),
            )
            .await;
        assert_eq!(bad.error_code, code::INVALID_REQUEST);
    });
}
