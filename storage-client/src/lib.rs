//! SeaweedMQ gRPC client for Kelp's forwarder core.
//!
//! This crate holds the prost/tonic clients for the SeaweedMQ broker (`messaging_pb`), the
//! filer (`filer_pb`) and the master (`master_pb`), generated from the hand-written protocol
//! subset in `proto/` (see `shared/specs/seaweedmq-grpc.md`), plus small helpers that encode
//! the conventions of SeaweedFS's Go Kafka gateway: the Kafka partition ↔ ring range mapping
//! ([`ring`]), SeaweedFS address forms ([`addr`]), consumer-group offset files on the filer
//! ([`group_offsets`], [`filer`]), broker error codes ([`errors`]), master discovery
//! ([`discovery`]) and a few broker call sequences ([`broker`]).

#![warn(missing_docs)]

pub mod addr;
pub mod broker;
pub mod discovery;
pub mod errors;
pub mod filer;
pub mod group_offsets;
pub mod ring;

pub use errors::{Error, Result};

/// Generated protobuf messages and tonic clients, one module per proto package.
///
/// Messages are prost structs (`bytes` fields are `Vec<u8>`); each service has a client at
/// `<package>::<service_snake>_client::<Service>Client`, e.g.
/// [`pb::messaging_pb::seaweed_messaging_client::SeaweedMessagingClient`]. Only clients are
/// generated.
pub mod pb {
    /// `schema_pb`: topics, partitions, offsets and record schemas.
    pub mod schema_pb {
        #![allow(missing_docs)]
        tonic::include_proto!("schema_pb");
    }
    /// `messaging_pb`: the SeaweedMQ broker service `SeaweedMessaging`.
    pub mod messaging_pb {
        #![allow(missing_docs)]
        tonic::include_proto!("messaging_pb");
    }
    /// `filer_pb`: the filer service `SeaweedFiler` (entry CRUD and listing).
    pub mod filer_pb {
        #![allow(missing_docs)]
        tonic::include_proto!("filer_pb");
    }
    /// `master_pb`: the master service `Seaweed` (cluster node discovery).
    pub mod master_pb {
        #![allow(missing_docs)]
        tonic::include_proto!("master_pb");
    }
}
