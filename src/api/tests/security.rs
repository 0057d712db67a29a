//! ACL administration and enforcement through the handlers (the connection's principal is
//! `User:ANONYMOUS` here: these clients come in on a plaintext listener).

use kafka_protocol::messages::create_acls_request::AclCreation;
use kafka_protocol::messages::{CreateAclsRequest, DescribeAclsRequest, MetadataRequest};

use super::{batch, create_topic, fetch, produce, produce_ok, run};
use crate::api::sb;
use crate::error::code;

fn deny_anonymous_write(topic: &str) -> CreateAclsRequest {
    CreateAclsRequest::default().with_creations(vec![AclCreation::default()
        .with_resource_type(2)
        .with_resource_name(sb(topic))
        .with_resource_pattern_type(3)
        .with_principal(sb("User:ANONYMOUS"))
        .with_host(sb("*"))
        .with_operation(4)
        .with_permission_type(2)])
}

#[test]
fn acl_requests_without_an_authorizer_are_security_disabled() {
    run(1, &[], |b| async move {
        let c = &b.client;
        let r = c.send(3, deny_anonymous_write("t")).await;
        assert_eq!(r.results[0].error_code, code::SECURITY_DISABLED);
        let r = c.send(3, DescribeAclsRequest::default()).await;
        assert_eq!(r.error_code, code::SECURITY_DISABLED);
    });
}

#[test]
fn the_authorizer_decides_per_api() {
    let args = [
        "--authorizer",
        "acl",
        "--allow-everyone-if-no-acl-found",
        "--super-users",
        "User:admin",
    ];
    run(2, &args, |b| async move {
        let c = &b.client;
        // No ACL names the topic yet: open to everyone.
        create_topic(c, "open", 1).await;
        produce_ok(c, "open", 0, batch(&["a"], 1)).await;
        // The cluster has no ACL either, so ANONYMOUS may create ACLs: deny its writes.
        let r = c.send(3, deny_anonymous_write("open")).await;
        assert_eq!(r.results[0].error_code, code::NONE);
        let r = produce(c, "open", 0, batch(&["b"], 2)).await;
        assert_eq!(r.error_code, code::TOPIC_AUTHORIZATION_FAILED);
        // Now an ACL names the topic: READ is no longer open (no ALLOW for it), and the
        // topic drops out of the all-topics Metadata (DESCRIBE is not allowed either).
        let p = fetch(c, "open", 0, 0).await;
        assert_eq!(p.error_code, code::TOPIC_AUTHORIZATION_FAILED);
        let md = c
            .send(12, MetadataRequest::default().with_topics(None))
            .await;
        assert!(md
            .topics
            .iter()
            .all(|t| t.name.as_ref().map(|n| n.0.as_str()) != Some("open")));
        // The ACL is listed (DESCRIBE on the cluster: still no ACL names the cluster).
        let acls = c
            .send(
                3,
                DescribeAclsRequest::default()
                    .with_resource_name_filter(None)
                    .with_principal_filter(None)
                    .with_host_filter(None)
                    .with_resource_type_filter(1)
                    .with_pattern_type_filter(1)
                    .with_operation(1)
                    .with_permission_type(1),
            )
            .await;
        assert_eq!(acls.error_code, code::NONE);
        assert_eq!(acls.resources.len(), 1);
        assert_eq!(acls.resources[0].resource_name.as_str(), "open");
    });
}
