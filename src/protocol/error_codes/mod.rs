//! Which error codes a response carries, for `kelp_request_errors_total`: the codes Kafka's
//! `AbstractResponse.errorCounts()` counts (its RequestMetrics ErrorsPerSec), every top-level,
//! topic, partition and group code of the response.
//!
//! [`crate::protocol::Response::encode_at`] requires [`ErrorCodes`] of the message it
//! encodes, so every response type Kelp answers with has a walker; the impls are generated
//! from the kafka-protocol crate's structs by `scripts/gen_error_codes.py` ([`generated`]).
//! Calls nothing.

pub mod generated;

/// A response message whose error codes can be walked.
pub trait ErrorCodes {
    /// Calls `f` with each error code field of the message (zeros included), in any order.
    fn error_codes(&self, f: &mut dyn FnMut(i16));
}

#[cfg(test)]
mod tests {
    use super::ErrorCodes;
    use kafka_protocol::messages::produce_response::{
        PartitionProduceResponse, ProduceResponse, TopicProduceResponse,
    };

    #[test]
    fn every_partition_code_of_a_produce_response_is_walked() {
        let part = |code| PartitionProduceResponse::default().with_error_code(code);
        let resp = ProduceResponse::default().with_responses(vec![
            TopicProduceResponse::default().with_partition_responses(vec![part(0), part(3)]),
            TopicProduceResponse::default().with_partition_responses(vec![part(6)]),
        ]);
        let mut seen = Vec::new();
        resp.error_codes(&mut |c| seen.push(c));
        assert_eq!(seen, vec![0, 3, 6]);
    }
}
