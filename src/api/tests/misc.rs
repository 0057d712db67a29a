//! ApiVersions (with KIP-511's answer to unknown versions), InitProducerId,
//! DescribeCluster, FindCoordinator, and what dispatch does with requests it cannot serve.

use kafka_protocol::messages::{
    ApiVersionsRequest, ApiVersionsResponse, BrokerId, DescribeClusterRequest,
    FindCoordinatorRequest, InitProducerIdRequest, MetadataRequest, ProducerId, TransactionalId,
};

use super::*;
use crate::api::sb;
use crate::protocol::versions::{key, SUPPORTED};

fn api_versions(name: &str, version: &str) -> ApiVersionsRequest {
    ApiVersionsRequest::default()
        .with_client_software_name(sb(name))
        .with_client_software_version(sb(version))
}

#[test]
fn api_versions_lists_every_supported_api_at_every_version() {
    run(1, &[], |b| async move {
        let c = &b.client;
        let want: Vec<(i16, i16, i16)> = SUPPORTED.iter().map(|a| (a.key, a.min, a.max)).collect();
        for v in 0..=4i16 {
            // The decode reads a v0 response header whatever the version, as clients do.
            let resp = c.send(v, api_versions("api-test", "1.0.0")).await;
            assert_eq!(resp.error_code, code::NONE, "v{v}");
            let got: Vec<(i16, i16, i16)> = resp
                .api_keys
                .iter()
                .map(|a| (a.api_key, a.min_version, a.max_version))
                .collect();
            assert_eq!(got, want, "v{v}");
        }
    });
}

#[test]
fn api_versions_refuses_bad_client_software_fields() {
    run(1, &[], |b| async move {
        let c = &b.client;
        for (name, version) in [("bad name!", "1.0"), ("librdkafka", ""), ("-x", "1")] {
            let resp = c.send(3, api_versions(name, version)).await;
            assert_eq!(
                resp.error_code,
                code::INVALID_REQUEST,
                "{name:?} {version:?}"
            );
            assert!(resp.api_keys.is_empty());
        }
        // Before v3 the fields are not on the wire: nothing to refuse.
        assert_eq!(
            c.send(2, ApiVersionsRequest::default()).await.error_code,
            code::NONE
        );
    });
}

#[test]
fn an_unknown_api_versions_version_is_answered_at_v0_kip_511() {
    run(1, &[], |b| async move {
        let c = &b.client;
        for version in [5i16, 127] {
            // A newer client: header v2 and a body Kelp cannot know; only the header is read.
            let mut frame = BytesMut::new();
            let mut header = WireHeader::default();
            header.request_api_key = key::API_VERSIONS;
            header.request_api_version = version;
            header.correlation_id = 4242;
            header.client_id = Some(sb("future-client"));
            header.encode(&mut frame, 2).expect("header");
            api_versions("future-client", "9.9")
                .encode(&mut frame, 3)
                .expect("body");
            frame.extend_from_slice(&[0xde, 0xad]);
            let resp = c
                .dispatch(frame)
                .await
                .expect("answered")
                .expect("a response");
            let resp: ApiVersionsResponse = decode(&resp, 0, 4242);
            assert_eq!(resp.error_code, code::UNSUPPORTED_VERSION, "v{version}");
            let keys: Vec<(i16, i16, i16)> = resp
                .api_keys
                .iter()
                .map(|a| (a.api_key, a.min_version, a.max_version))
                .collect();
            assert_eq!(keys, [(key::API_VERSIONS, 0, 4)], "v{version}");
        }
    });
}

#[test]
fn requests_kelp_cannot_serve_close_the_connection() {
    run(1, &[], |b| async move {
        let c = &b.client;
        // A version past what is advertised, of anything but ApiVersions.
        let mut frame = BytesMut::new();
        let mut header = WireHeader::default();
        header.request_api_key = key::METADATA;
        header.request_api_version = 13;
        header.correlation_id = 1;
        header.encode(&mut frame, 2).expect("header");
        frame.extend_from_slice(&[1, 0]);
        assert!(matches!(
            c.dispatch(frame).await,
            Err(ConnectionError::UnsupportedVersion(3, 13))
        ));
        // A body cut short, through the shape check and the hand-written Produce decoder.
        let (_, mut frame) = c.frame(12, &MetadataRequest::default().with_topics(Some(vec![])));
        frame.truncate(frame.len() - 2);
        assert!(matches!(
            c.dispatch(frame).await,
            Err(ConnectionError::Malformed(_))
        ));
        let produce = produce_request(-1, &[("t", 0, Some(batch(&["x"], 1).freeze()))]);
        let (_, mut frame) = c.frame(9, &produce);
        frame.truncate(frame.len() - 10);
        assert!(matches!(
            c.dispatch(frame).await,
            Err(ConnectionError::Malformed(_))
        ));
        // An api key Kelp does not implement (57: UpdateFeatures) fails at the header.
        let unknown = [0u8, 57, 0, 0, 0, 0, 0, 9, 0xff, 0xff, 0];
        assert!(matches!(
            c.dispatch(BytesMut::from(&unknown[..])).await,
            Err(ConnectionError::UnknownApiKey(57))
        ));
        // Nothing was created by any of it.
        assert!(c.shard.cluster.topic("t").is_none());
    });
}

#[test]
fn only_produce_lets_the_next_request_start_early() {
    run(1, &[], |b| async move {
        let c = &b.client;
        let (_, frame) = c.frame(12, &MetadataRequest::default().with_topics(None));
        let header = RequestHeader::parse(&frame).expect("header");
        let (tx, mut rx) = oneshot::channel();
        let out =
            crate::api::dispatch(c.shard.clone(), header, super::session(&c.shard), frame, tx)
                .await;
        assert!(out.expect("answered").is_some());
        // Never fired: the connection waits for the whole request (the sender is gone).
        assert!(rx.try_recv().is_err());
    });
}

#[test]
fn init_producer_id_hands_out_distinct_ids_and_bumps_epochs() {
    run(2, &[], |b| async move {
        let c = &b.client;
        let fresh = || InitProducerIdRequest::default().with_transactional_id(None);
        let mut ids = Vec::new();
        for v in 0..=4i16 {
            let r = c.send(v, fresh()).await;
            assert_eq!((r.error_code, r.producer_epoch), (code::NONE, 0), "v{v}");
            ids.push(r.producer_id.0);
        }
        let far = b
            .on(
                1,
                move |c| async move { c.send(4, fresh()).await.producer_id.0 },
            )
            .await;
        ids.push(far);
        assert!(ids.iter().all(|&id| id >= 0));
        let mut unique = ids.clone();
        unique.sort();
        unique.dedup();
        assert_eq!(unique.len(), ids.len(), "ids {ids:?}");
        // A known producer re-initialising (KIP-360) keeps its id, one epoch on.
        let again = InitProducerIdRequest::default()
            .with_transactional_id(None)
            .with_producer_id(ProducerId(ids[0]))
            .with_producer_epoch(4);
        let r = c.send(4, again).await;
        assert_eq!(
            (r.error_code, r.producer_id.0, r.producer_epoch),
            (0, ids[0], 5)
        );
        // A transactional id without a usable timeout (Kafka: 1..=transaction.max.timeout.ms).
        let tx = InitProducerIdRequest::default()
            .with_transactional_id(Some(TransactionalId(sb("tx-1"))));
        let r = c.send(4, tx).await;
        assert_eq!(
            (r.error_code, r.producer_id.0, r.producer_epoch),
            (code::INVALID_TRANSACTION_TIMEOUT, -1, -1)
        );
    });
}

#[test]
fn describe_cluster_names_the_nodes_and_the_controller() {
    run(2, &["--cluster-id", "test-cluster"], |b| async move {
        let c = &b.client;
        for v in [0i16, 1] {
            let resp = c.send(v, DescribeClusterRequest::default()).await;
            assert_eq!(resp.error_code, code::NONE);
            assert_eq!(
                (resp.cluster_id.as_str(), resp.controller_id),
                ("test-cluster", BrokerId(0))
            );
            let nodes: Vec<(i32, &str, i32)> = resp
                .brokers
                .iter()
                .map(|n| (n.broker_id.0, n.host.as_str(), n.port))
                .collect();
            assert_eq!(nodes, [(0, "127.0.0.1", 9092)], "v{v}");
            if v >= 1 {
                assert_eq!(resp.endpoint_type, 1);
            }
        }
    });
}

#[test]
fn describe_cluster_lists_every_shard_when_advertised() {
    run(
        2,
        &[
            "--advertise-shards",
            "--listen",
            "127.0.0.1:7100",
            "--node-id",
            "10",
        ],
        |b| async move {
            let resp = b.client.send(1, DescribeClusterRequest::default()).await;
            let nodes: Vec<(i32, i32)> = resp
                .brokers
                .iter()
                .map(|n| (n.broker_id.0, n.port))
                .collect();
            assert_eq!(nodes, [(10, 7101), (11, 7102)]);
            assert_eq!(resp.controller_id, BrokerId(10));
        },
    );
}

#[test]
fn find_coordinator_answers_groups_and_transactional_ids_and_refuses_other_keys() {
    run(2, &[], |b| async move {
        let c = &b.client;
        let find = |k: &str, kind: i8| {
            FindCoordinatorRequest::default()
                .with_key(sb(k))
                .with_key_type(kind)
        };
        for v in [0i16, 1, 3] {
            let r = c.send(v, find("group-a", 0)).await;
            assert_eq!(
                (r.error_code, r.node_id, r.host.as_str(), r.port),
                (0, BrokerId(0), "127.0.0.1", 9092),
                "v{v}"
            );
            let r = c.send(v, find("", 0)).await;
            assert_eq!(
                (r.error_code, r.node_id, r.port),
                (code::INVALID_GROUP_ID, BrokerId(-1), -1),
                "v{v}"
            );
        }
        // Transactional ids are placed like groups.
        let r = c.send(3, find("tx", 1)).await;
        assert_eq!((r.error_code, r.node_id, r.port), (0, BrokerId(0), 9092));
        assert_eq!(
            c.send(3, find("g", 7)).await.error_code,
            code::INVALID_REQUEST
        );
        // v4+: a batch of keys, one answer each.
        for v in [4i16, 6] {
            let req = FindCoordinatorRequest::default()
                .with_key_type(0)
                .with_coordinator_keys(vec![sb("a"), sb(""), sb("b")]);
            let resp = c.send(v, req).await;
            let got: Vec<(&str, i16, i32)> = resp
                .coordinators
                .iter()
                .map(|x| (x.key.as_str(), x.error_code, x.node_id.0))
                .collect();
            assert_eq!(
                got,
                [("a", 0, 0), ("", code::INVALID_GROUP_ID, -1), ("b", 0, 0)],
                "v{v}"
            );
        }
    });
}

#[test]
fn with_advertised_shards_the_coordinator_is_the_owning_shard() {
    run(
        2,
        &["--advertise-shards", "--listen", "127.0.0.1:7200"],
        |b| async move {
            let c = &b.client;
            let keys: Vec<String> = (0..8).map(|i| format!("g{i}")).collect();
            let req = FindCoordinatorRequest::default()
                .with_coordinator_keys(keys.iter().map(|k| sb(k.as_str())).collect());
            let resp = c.send(4, req).await;
            let got: Vec<(i32, i32)> = resp
                .coordinators
                .iter()
                .map(|x| (x.node_id.0, x.port))
                .collect();
            let want: Vec<(i32, i32)> = keys
                .iter()
                .map(|k| {
                    let s = c.shard.group_owner(k) as i32;
                    (s, 7201 + s)
                })
                .collect();
            assert_eq!(got, want);
            assert!(want.iter().any(|w| w.0 == 0) && want.iter().any(|w| w.0 == 1));
        },
    );
}
