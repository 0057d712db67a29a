//! Kafka's ACL model and authorizer: bindings of (resource type, name, LITERAL or PREFIXED
//! pattern) to (principal, host, operation, ALLOW or DENY), filters over them (DescribeAcls,
//! DeleteAcls), and the decision Kafka's StandardAuthorizer makes: super users may do
//! anything; a matching DENY wins; then a matching ALLOW, where READ, WRITE, DELETE and ALTER
//! imply DESCRIBE and ALTER_CONFIGS implies DESCRIBE_CONFIGS; a resource no ACL names at all
//! is allowed only with `--allow-everyone-if-no-acl-found`.
//!
//! The bindings are an in-memory snapshot of the storage engine's cluster-wide records
//! (space [`SPACE`], one record per binding), stored and re-read by the shard
//! (`shard/security.rs`) as the SCRAM credentials are. Calls nothing.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::refreshed::Refreshed;
use serde::{Deserialize, Serialize};

/// The engine record space of ACL bindings.
pub const SPACE: &str = "acls";

/// The one cluster resource's name.
pub const CLUSTER_NAME: &str = "kafka-cluster";

/// The literal name that matches every resource of its type.
pub const WILDCARD: &str = "*";

macro_rules! kafka_enum {
    ($(#[$doc:meta])* $name:ident { $($(#[$vdoc:meta])* $variant:ident = $code:expr,)* }) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        pub enum $name {
            $($(#[$vdoc])* $variant,)*
        }

        impl $name {
            /// Kafka's wire code.
            pub fn code(self) -> i8 {
                match self {
                    $($name::$variant => $code,)*
                }
            }

            /// From Kafka's wire code (None for ANY, UNKNOWN and codes Kafka does not have).
            pub fn from_code(code: i8) -> Option<Self> {
                match code {
                    $($code => Some($name::$variant),)*
                    _ => None,
                }
            }
        }
    };
}

kafka_enum!(
    /// What an ACL is about.
    ResourceType {
        /// A topic.
        Topic = 2,
        /// A consumer group.
        Group = 3,
        /// The cluster (name `kafka-cluster`).
        Cluster = 4,
        /// A transactional id.
        TransactionalId = 5,
        /// Delegation tokens.
        DelegationToken = 6,
        /// A user (for delegation tokens).
        User = 7,
    }
);

kafka_enum!(
    /// How an ACL's resource name matches.
    PatternType {
        /// The name itself (or `*`, every name).
        Literal = 3,
        /// Every name that starts with it.
        Prefixed = 4,
    }
);

kafka_enum!(
    /// What an ACL lets a principal do (or not).
    Operation {
        /// Everything.
        All = 2,
        /// Consume, commit offsets, join groups.
        Read = 3,
        /// Produce.
        Write = 4,
        /// Create topics.
        Create = 5,
        /// Delete topics, records, groups.
        Delete = 6,
        /// Change ACLs, SCRAM credentials.
        Alter = 7,
        /// See that something exists.
        Describe = 8,
        /// Broker-to-broker requests.
        ClusterAction = 9,
        /// Read configs.
        DescribeConfigs = 10,
        /// Change configs.
        AlterConfigs = 11,
        /// Idempotent produce.
        IdempotentWrite = 12,
        /// Create delegation tokens.
        CreateTokens = 13,
        /// See delegation tokens.
        DescribeTokens = 14,
    }
);

kafka_enum!(
    /// Whether an ACL allows or denies.
    Permission {
        /// Denies: wins over any ALLOW.
        Deny = 2,
        /// Allows.
        Allow = 3,
    }
);

/// One ACL.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct AclBinding {
    /// The resource's type.
    pub resource_type: ResourceType,
    /// Its name, a prefix of names, or `*`.
    pub resource_name: String,
    /// How the name matches.
    pub pattern: PatternType,
    /// `User:<name>` or `User:*`.
    pub principal: String,
    /// The client's IP, or `*`.
    pub host: String,
    /// The operation.
    pub operation: Operation,
    /// ALLOW or DENY.
    pub permission: Permission,
}

impl AclBinding {
    /// The key of its record: a digest of the binding, so creating one twice stores it
    /// once and any resource name fits in a file name.
    pub fn key(&self) -> String {
        use sha2::Digest;
        let json = serde_json::to_vec(self).unwrap_or_default();
        crate::hex::encode(&sha2::Sha256::digest(&json)[..16])
    }

    /// Why Kafka would refuse to create it (None: it is fine).
    pub fn invalid(&self) -> Option<String> {
        if self.resource_name.is_empty() {
            return Some("the resource name must not be empty".into());
        }
        if self.resource_type == ResourceType::Cluster && self.resource_name != CLUSTER_NAME {
            return Some(format!("the cluster resource is named {CLUSTER_NAME}"));
        }
        match self.principal.split_once(':') {
            Some((kind, name)) if !kind.is_empty() && !name.is_empty() => {}
            _ => return Some(format!("principal '{}' is not TYPE:NAME", self.principal)),
        }
        if self.host.is_empty() {
            return Some("the host must be an IP address or *".into());
        }
        None
    }

    /// Whether it names `name` of its resource type.
    fn covers(&self, name: &str) -> bool {
        match self.pattern {
            PatternType::Literal => self.resource_name == name || self.resource_name == WILDCARD,
            PatternType::Prefixed => name.starts_with(&self.resource_name),
        }
    }
}

/// A pattern-type filter (DescribeAcls, DeleteAcls).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PatternFilter {
    /// Any pattern type, the name (if given) exactly.
    Any,
    /// Every binding that would apply to the name: literal equal or `*`, or a prefix of it.
    Match,
    /// This pattern type, the name (if given) exactly.
    Exactly(PatternType),
}

impl PatternFilter {
    /// From Kafka's code: 1 ANY, 2 MATCH, 3 LITERAL, 4 PREFIXED.
    pub fn from_code(code: i8) -> Option<Self> {
        match code {
            1 => Some(PatternFilter::Any),
            2 => Some(PatternFilter::Match),
            other => PatternType::from_code(other).map(PatternFilter::Exactly),
        }
    }
}

/// A filter over bindings; `None` fields match anything (Kafka's ANY and nulls).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AclFilter {
    /// Resource type.
    pub resource_type: Option<ResourceType>,
    /// Resource name.
    pub resource_name: Option<String>,
    /// Pattern type.
    pub pattern: PatternFilter,
    /// Principal.
    pub principal: Option<String>,
    /// Host.
    pub host: Option<String>,
    /// Operation.
    pub operation: Option<Operation>,
    /// Permission.
    pub permission: Option<Permission>,
}

impl AclFilter {
    /// A filter from Kafka's wire codes (ANY is 1); None when a code is unknown (Kafka answers
    /// INVALID_REQUEST).
    #[allow(
        clippy::too_many_arguments,
        reason = "the seven fields of Kafka's filter, in its order"
    )]
    pub fn from_wire(
        resource_type: i8,
        resource_name: Option<&str>,
        pattern: i8,
        principal: Option<&str>,
        host: Option<&str>,
        operation: i8,
        permission: i8,
    ) -> Option<Self> {
        let any_or = |code: i8, known: Option<()>| code == 1 || known.is_some();
        if !any_or(
            resource_type,
            ResourceType::from_code(resource_type).map(|_| ()),
        ) || !any_or(operation, Operation::from_code(operation).map(|_| ()))
            || !any_or(permission, Permission::from_code(permission).map(|_| ()))
        {
            return None;
        }
        Some(AclFilter {
            resource_type: ResourceType::from_code(resource_type),
            resource_name: resource_name.map(str::to_string),
            pattern: PatternFilter::from_code(pattern)?,
            principal: principal.map(str::to_string),
            host: host.map(str::to_string),
            operation: Operation::from_code(operation),
            permission: Permission::from_code(permission),
        })
    }

    /// Whether `b` passes the filter.
    pub fn matches(&self, b: &AclBinding) -> bool {
        let eq = |want: &Option<String>, have: &str| want.as_deref().is_none_or(|w| w == have);
        let pattern_ok = match self.pattern {
            PatternFilter::Any => eq(&self.resource_name, &b.resource_name),
            PatternFilter::Exactly(p) => {
                p == b.pattern && eq(&self.resource_name, &b.resource_name)
            }
            PatternFilter::Match => match &self.resource_name {
                None => true,
                Some(name) => b.covers(name),
            },
        };
        pattern_ok
            && self.resource_type.is_none_or(|t| t == b.resource_type)
            && eq(&self.principal, &b.principal)
            && eq(&self.host, &b.host)
            && self.operation.is_none_or(|o| o == b.operation)
            && self.permission.is_none_or(|p| p == b.permission)
    }
}

/// Every ACL binding.
#[derive(Default)]
pub struct Acls {
    bindings: Refreshed<Vec<AclBinding>>,
}

impl Acls {
    /// Replaces the snapshot with the stored `records` (key, JSON); records that do not
    /// decode are logged and skipped.
    pub fn set_all(&self, records: Vec<(String, Vec<u8>)>) {
        self.bindings.set(Self::decode(records));
    }

    /// How many changes have been made: taken before a re-read of the records and handed
    /// to [`Acls::refresh`].
    pub fn changes(&self) -> u64 {
        self.bindings.changes()
    }

    /// Replaces the snapshot with `records` read after [`Acls::changes`] returned `since`,
    /// unless a change was made meanwhile. True if replaced.
    pub fn refresh(&self, records: Vec<(String, Vec<u8>)>, since: u64) -> bool {
        self.bindings.refresh(Self::decode(records), since)
    }

    fn decode(records: Vec<(String, Vec<u8>)>) -> Vec<AclBinding> {
        let mut all: Vec<AclBinding> = records
            .into_iter()
            .filter_map(|(key, body)| match serde_json::from_slice(&body) {
                Ok(b) => Some(b),
                Err(e) => {
                    tracing::warn!(%key, error = %e, "skipping an unreadable ACL record");
                    None
                }
            })
            .collect();
        all.sort();
        all.dedup();
        all
    }

    /// The bindings passing `filter`.
    pub fn matching(&self, filter: &AclFilter) -> Vec<AclBinding> {
        self.bindings
            .load()
            .iter()
            .filter(|b| filter.matches(b))
            .cloned()
            .collect()
    }

    /// Puts bindings (once stored) into the snapshot.
    pub fn add(&self, added: &[AclBinding]) {
        self.bindings.change(|all| {
            let mut all = Vec::clone(all);
            all.extend(added.iter().cloned());
            all.sort();
            all.dedup();
            all
        });
    }

    /// Takes bindings (once their records are deleted) out of the snapshot.
    pub fn remove(&self, removed: &[AclBinding]) {
        self.bindings.change(|all| {
            all.iter()
                .filter(|b| !removed.contains(b))
                .cloned()
                .collect::<Vec<_>>()
        });
    }

    /// The bindings grouped by resource (DescribeAcls' answer shape).
    pub fn by_resource(
        bindings: Vec<AclBinding>,
    ) -> BTreeMap<(ResourceType, String, PatternType), Vec<AclBinding>> {
        let mut out: BTreeMap<_, Vec<AclBinding>> = BTreeMap::new();
        for b in bindings {
            out.entry((b.resource_type, b.resource_name.clone(), b.pattern))
                .or_default()
                .push(b);
        }
        out
    }
}

/// The ACL checks of a broker (`--authorizer acl`).
pub struct Authorizer {
    /// The bindings.
    pub acls: Arc<Acls>,
    /// Principals allowed everything (`--super-users`).
    pub super_users: Vec<String>,
    /// Whether a resource no ACL names is open to everyone.
    pub allow_if_no_acl: bool,
}

/// The operations whose ALLOW also allows `op` (Kafka's implied operations).
fn allowing(op: Operation) -> &'static [Operation] {
    use Operation::*;
    match op {
        Describe => &[All, Describe, Read, Write, Delete, Alter],
        DescribeConfigs => &[All, DescribeConfigs, AlterConfigs],
        Read => &[All, Read],
        Write => &[All, Write],
        Create => &[All, Create],
        Delete => &[All, Delete],
        Alter => &[All, Alter],
        ClusterAction => &[All, ClusterAction],
        AlterConfigs => &[All, AlterConfigs],
        IdempotentWrite => &[All, IdempotentWrite],
        CreateTokens => &[All, CreateTokens],
        DescribeTokens => &[All, DescribeTokens],
        All => &[All],
    }
}

impl Authorizer {
    /// Whether `principal` from `host` may do `op` on `name` of `resource_type`.
    pub fn authorize(
        &self,
        principal: &str,
        host: &str,
        op: Operation,
        resource_type: ResourceType,
        name: &str,
    ) -> bool {
        if self.super_users.iter().any(|s| s == principal) {
            return true;
        }
        let all = self.acls.bindings.load();
        let mut named = all
            .iter()
            .filter(|b| b.resource_type == resource_type && b.covers(name))
            .peekable();
        if named.peek().is_none() {
            return self.allow_if_no_acl;
        }
        let applies = |b: &AclBinding| {
            (b.principal == principal || b.principal == "User:*")
                && (b.host == host || b.host == WILDCARD)
        };
        let mut allowed = false;
        for b in named.filter(|b| applies(b)) {
            match b.permission {
                Permission::Deny if b.operation == op || b.operation == Operation::All => {
                    return false;
                }
                Permission::Allow if allowing(op).contains(&b.operation) => allowed = true,
                _ => {}
            }
        }
        allowed
    }

    /// Whether `principal` may do `op` on any resource of `resource_type` (Kafka's check for
    /// idempotent producers: WRITE on any topic). A literal or prefixed ALLOW for the
    /// principal counts unless a DENY for every name (`*` or an empty prefix) stops it.
    pub fn authorize_any(
        &self,
        principal: &str,
        host: &str,
        op: Operation,
        resource_type: ResourceType,
    ) -> bool {
        if self.super_users.iter().any(|s| s == principal) {
            return true;
        }
        let all = self.acls.bindings.load();
        let applies = |b: &&AclBinding| {
            b.resource_type == resource_type
                && (b.principal == principal || b.principal == "User:*")
                && (b.host == host || b.host == WILDCARD)
        };
        let denied_everywhere = all.iter().filter(applies).any(|b| {
            let every_name = match b.pattern {
                PatternType::Literal => b.resource_name == WILDCARD,
                PatternType::Prefixed => b.resource_name.is_empty(),
            };
            b.permission == Permission::Deny
                && (b.operation == op || b.operation == Operation::All)
                && every_name
        });
        if denied_everywhere {
            return false;
        }
        all.iter()
            .filter(applies)
            .any(|b| b.permission == Permission::Allow && allowing(op).contains(&b.operation))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn acl(
        t: ResourceType,
        name: &str,
        pattern: PatternType,
        principal: &str,
        op: Operation,
        perm: Permission,
    ) -> AclBinding {
        AclBinding {
            resource_type: t,
            resource_name: name.into(),
            pattern,
            principal: principal.into(),
            host: "*".into(),
            operation: op,
            permission: perm,
        }
    }

    fn authorizer(bindings: Vec<AclBinding>) -> Authorizer {
        let acls = Arc::new(Acls::default());
        acls.add(&bindings);
        Authorizer {
            acls,
            super_users: vec!["User:admin".into()],
            allow_if_no_acl: false,
        }
    }

    use Operation::*;
    use PatternType::*;
    use Permission::*;
    use ResourceType::*;

    #[test]
    fn allow_deny_implied_and_patterns() {
        let a = authorizer(vec![
            acl(Topic, "orders", Literal, "User:alice", Read, Allow),
            acl(Topic, "logs-", Prefixed, "User:alice", Write, Allow),
            acl(Topic, "logs-secret", Literal, "User:alice", All, Deny),
            acl(Topic, "*", Literal, "User:*", Describe, Allow),
            acl(Group, "g", Literal, "User:alice", Read, Allow),
        ]);
        let ok = |p: &str, op, t, n: &str| a.authorize(p, "10.0.0.1", op, t, n);
        assert!(ok("User:alice", Read, Topic, "orders"));
        assert!(!ok("User:alice", Write, Topic, "orders"));
        // READ implies DESCRIBE; the wildcard gives everyone DESCRIBE anyway.
        assert!(ok("User:alice", Describe, Topic, "orders"));
        assert!(ok("User:bob", Describe, Topic, "orders"));
        assert!(!ok("User:bob", Read, Topic, "orders"));
        assert!(ok("User:alice", Write, Topic, "logs-app"));
        assert!(!ok("User:alice", Write, Topic, "logs-secret"));
        assert!(!ok("User:alice", Describe, Topic, "logs-secret"));
        // A resource no ACL names: denied unless allow.everyone.if.no.acl.found.
        assert!(!ok("User:alice", Read, Group, "other"));
        assert!(ok("User:alice", Read, Group, "g"));
        assert!(ok("User:admin", Delete, Cluster, CLUSTER_NAME));
        let open = Authorizer {
            allow_if_no_acl: true,
            ..authorizer(Vec::new())
        };
        assert!(open.authorize("User:x", "h", Read, Group, "other"));
        // Idempotent producers: WRITE on any topic.
        assert!(a.authorize_any("User:alice", "h", Write, Topic));
        assert!(!a.authorize_any("User:bob", "h", Write, Topic));
    }

    #[test]
    fn hosts_and_filters() {
        let mut b = acl(Topic, "t", Literal, "User:alice", Read, Allow);
        b.host = "10.0.0.1".into();
        let a = authorizer(vec![b.clone()]);
        assert!(a.authorize("User:alice", "10.0.0.1", Read, Topic, "t"));
        assert!(!a.authorize("User:alice", "10.0.0.2", Read, Topic, "t"));

        let any = AclFilter::from_wire(1, None, 1, None, None, 1, 1).unwrap();
        assert!(any.matches(&b));
        let matching = AclFilter::from_wire(2, Some("t"), 2, None, None, 1, 1).unwrap();
        assert!(matching.matches(&b));
        let prefixed = acl(Topic, "t", Prefixed, "User:x", Write, Deny);
        assert!(AclFilter::from_wire(2, Some("tx"), 2, None, None, 1, 1)
            .unwrap()
            .matches(&prefixed));
        assert!(!AclFilter::from_wire(2, Some("t"), 4, None, None, 1, 1)
            .unwrap()
            .matches(&b));
        assert!(AclFilter::from_wire(9, None, 1, None, None, 1, 1).is_none());
        assert!(AclFilter::from_wire(2, None, 7, None, None, 1, 1).is_none());
        assert_ne!(b.key(), prefixed.key());
        assert!(acl(Cluster, "x", Literal, "User:a", Alter, Allow)
            .invalid()
            .is_some());
        assert!(acl(Topic, "t", Literal, "alice", Read, Allow)
            .invalid()
            .is_some());
    }

    #[test]
    fn records_round_trip() {
        let b = acl(Topic, "t", Prefixed, "User:a", Write, Deny);
        let acls = Acls::default();
        acls.set_all(vec![
            (b.key(), serde_json::to_vec(&b).unwrap()),
            ("bad".into(), b"{".to_vec()),
        ]);
        assert_eq!(
            acls.matching(&AclFilter::from_wire(1, None, 1, None, None, 1, 1).unwrap()),
            vec![b.clone()]
        );
        // A re-read begun before a change does not bring the removed binding back.
        let since = acls.changes();
        let read = vec![(b.key(), serde_json::to_vec(&b).unwrap())];
        acls.remove(&[b]);
        assert!(!acls.refresh(read.clone(), since));
        let all = AclFilter::from_wire(1, None, 1, None, None, 1, 1).unwrap();
        assert!(acls.matching(&all).is_empty());
        // One begun after it does (another node added it again).
        assert!(acls.refresh(read, acls.changes()));
        assert_eq!(acls.matching(&all).len(), 1);
    }
}
