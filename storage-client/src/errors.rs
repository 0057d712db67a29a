//! Error type of this crate and SeaweedMQ broker error codes.
//!
//! The broker reports structured errors as an `int32 error_code` in `PublishMessageResponse`
//! (codes from `weed/mq/broker/broker_errors.go`) next to a human-readable `error` string.
//! [`kafka_code`] maps them to Kafka protocol error codes (spec §6.3), with one deliberate
//! difference from the Go gateway: unknown errors map to Kafka's UNKNOWN_SERVER_ERROR (-1),
//! not to 1 (which is OFFSET_OUT_OF_RANGE in Kafka).

use crate::addr::AddrError;
use crate::group_offsets::DecodeError;

/// No error.
pub const NONE: i32 = 0;
/// Unknown server error.
pub const UNKNOWN_SERVER_ERROR: i32 = 1;
/// The topic does not exist.
pub const TOPIC_NOT_FOUND: i32 = 2;
/// The partition does not exist.
pub const PARTITION_NOT_FOUND: i32 = 3;
/// This broker is not the partition leader; look the topic up again.
pub const NOT_LEADER: i32 = 6;
/// The request timed out.
pub const REQUEST_TIMED_OUT: i32 = 7;
/// The broker is not available.
pub const BROKER_NOT_AVAILABLE: i32 = 8;
/// The message exceeds the size limit.
pub const MESSAGE_TOO_LARGE: i32 = 10;
/// Network error.
pub const NETWORK_EXCEPTION: i32 = 13;
/// Offsets are still loading.
pub const OFFSET_LOAD_IN_PROGRESS: i32 = 14;
/// The topic already exists.
pub const TOPIC_ALREADY_EXISTS: i32 = 36;
/// Invalid partition count.
pub const INVALID_PARTITIONS: i32 = 37;
/// Invalid configuration.
pub const INVALID_CONFIG: i32 = 40;
/// Invalid record (also: publish stream without init message).
pub const INVALID_RECORD: i32 = 42;
/// Publisher not found.
pub const PUBLISHER_NOT_FOUND: i32 = 100;
/// Connection failed.
pub const CONNECTION_FAILED: i32 = 101;
/// The leader could not connect to its follower.
pub const FOLLOWER_CONNECTION_FAILED: i32 = 102;

/// `FetchMessageResponse.error_code`: partition not found locally (missing topic, or this
/// broker is not the leader); look the topic up again.
pub const FETCH_PARTITION_NOT_FOUND: i32 = 1;
/// `FetchMessageResponse.error_code`: read error (e.g. offset out of range); retryable.
pub const FETCH_READ_ERROR: i32 = 2;

/// Text of the broker's publish error while a partition is being unloaded.
pub const PARTITION_STOPPING: &str = "log buffer is stopping";

/// Kafka's UNKNOWN_SERVER_ERROR.
pub const KAFKA_UNKNOWN_SERVER_ERROR: i16 = -1;

/// Maps a broker error code to a Kafka protocol error code.
pub fn kafka_code(broker_code: i32) -> i16 {
    match broker_code {
        NONE => 0,
        TOPIC_NOT_FOUND | PARTITION_NOT_FOUND => 3,
        NOT_LEADER => 6,
        REQUEST_TIMED_OUT => 7,
        BROKER_NOT_AVAILABLE => 8,
        MESSAGE_TOO_LARGE => 10,
        NETWORK_EXCEPTION | CONNECTION_FAILED | FOLLOWER_CONNECTION_FAILED => 13,
        OFFSET_LOAD_IN_PROGRESS => 14,
        TOPIC_ALREADY_EXISTS => 36,
        INVALID_PARTITIONS => 37,
        INVALID_CONFIG => 40,
        INVALID_RECORD => 42,
        // UNKNOWN_SERVER_ERROR, PUBLISHER_NOT_FOUND and anything unknown.
        _ => KAFKA_UNKNOWN_SERVER_ERROR,
    }
}

/// Errors of this crate.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// An address could not be turned into an endpoint.
    #[error(transparent)]
    Addr(#[from] AddrError),
    /// A gRPC transport failure (for example an invalid endpoint URI).
    #[error("gRPC transport error: {}", chain(.0))]
    Transport(#[from] tonic::transport::Error),
    /// Connecting a gRPC channel to `endpoint` failed.
    #[error("cannot connect to {endpoint}: {}", chain(.source))]
    Connect {
        /// The endpoint URI.
        endpoint: String,
        /// The transport error.
        #[source]
        source: tonic::transport::Error,
    },
    /// A gRPC call failed with a status.
    #[error("gRPC call failed: {0}")]
    Status(Box<tonic::Status>),
    /// The broker answered with an error in the response body.
    #[error("broker error {code}: {message}")]
    Broker {
        /// Structured broker error code (see the constants of this module); 0 if the broker
        /// only gave a message.
        code: i32,
        /// The broker's error text.
        message: String,
    },
    /// The filer answered with an error, or an entry is not what was expected.
    #[error("filer {path}: {message}")]
    Filer {
        /// Full path of the entry concerned.
        path: String,
        /// What went wrong.
        message: String,
    },
    /// A consumer offset file could not be decoded.
    #[error(transparent)]
    OffsetFile(#[from] DecodeError),
    /// The peer did not follow the expected protocol (e.g. a stream ended early).
    #[error("protocol error: {0}")]
    Protocol(String),
    /// Something that was looked up does not exist (topic, partition, cluster node).
    #[error("not found: {0}")]
    NotFound(String),
}

/// `e` followed by its sources, `: `-separated (tonic's transport errors say little alone).
fn chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        let next = c.to_string();
        if !s.contains(&next) {
            s.push_str(": ");
            s.push_str(&next);
        }
        cur = c.source();
    }
    s
}

impl From<tonic::Status> for Error {
    fn from(s: tonic::Status) -> Self {
        Error::Status(Box::new(s))
    }
}

impl Error {
    /// The gRPC status, if this error is one.
    pub fn status(&self) -> Option<&tonic::Status> {
        match self {
            Error::Status(s) => Some(s),
            _ => None,
        }
    }

    /// True if the broker refused a publish because the partition is being unloaded (its
    /// last publisher just left). Nothing was appended; retry on a new stream shortly.
    pub fn is_partition_stopping(&self) -> bool {
        self.status()
            .is_some_and(|s| s.message().contains(PARTITION_STOPPING))
    }

    /// True for errors that may go away by retrying shortly (broker starting up, balancer
    /// lock not yet taken, connection refused or timed out).
    pub fn is_transient(&self) -> bool {
        match self {
            Error::Transport(_) | Error::Connect { .. } => true,
            Error::Status(s) => {
                matches!(
                    s.code(),
                    tonic::Code::Unavailable
                        | tonic::Code::DeadlineExceeded
                        | tonic::Code::ResourceExhausted
                ) || s.message().contains("broker_balancer")
                    || s.message().contains("no broker")
                    || s.message().contains(PARTITION_STOPPING)
            }
            Error::Broker { code, .. } => matches!(
                *code,
                NOT_LEADER
                    | REQUEST_TIMED_OUT
                    | BROKER_NOT_AVAILABLE
                    | NETWORK_EXCEPTION
                    | OFFSET_LOAD_IN_PROGRESS
                    | CONNECTION_FAILED
                    | FOLLOWER_CONNECTION_FAILED
            ),
            _ => false,
        }
    }
}

/// Result with this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kafka_mapping() {
        let cases = [
            (0, 0),
            (1, -1),
            (2, 3),
            (3, 3),
            (6, 6),
            (7, 7),
            (8, 8),
            (10, 10),
            (13, 13),
            (14, 14),
            (36, 36),
            (37, 37),
            (40, 40),
            (42, 42),
            (100, -1),
            (101, 13),
            (102, 13),
            (9999, -1),
            (-5, -1),
        ];
        for (broker, kafka) in cases {
            assert_eq!(kafka_code(broker), kafka, "broker code {broker}");
        }
    }

    #[test]
    fn transient_errors() {
        assert!(Error::from(tonic::Status::unavailable("x")).is_transient());
        assert!(
            Error::from(tonic::Status::unknown("lock broker_balancer not found")).is_transient()
        );
        assert!(!Error::from(tonic::Status::invalid_argument("x")).is_transient());
        assert!(Error::Broker {
            code: NOT_LEADER,
            message: String::new()
        }
        .is_transient());
        assert!(!Error::NotFound("t".into()).is_transient());
        let stopping = Error::from(tonic::Status::unknown(
            "publish error: failed to add message to buffer: log buffer is stopping",
        ));
        assert!(stopping.is_partition_stopping() && stopping.is_transient());
    }
}
