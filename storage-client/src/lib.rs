//! SeaweedMQ gRPC client for Kelp's forwarder core.
//!
//! This crate will hold the prost/tonic client for the SeaweedMQ broker, master and filer
//! services (see `shared/specs/seaweedmq-grpc.md`). It is deliberately empty until the
//! SeaweedMQ forwarder issue lands: the broker builds and runs on its embedded storage without it.
