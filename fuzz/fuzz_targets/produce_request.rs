//! Fuzzes the hand-written Produce decoder, every version Kelp supports: the first input byte
//! picks the version, the rest is the request body. Any body must decode or fail without a
//! panic or an allocation beyond its size, and decoded records must be slices of the body.
#![no_main]

use bytes::BytesMut;
use kelp::protocol::produce_request;
use kelp::protocol::versions::{self, key};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&pick, body)) = data.split_first() else {
        return;
    };
    let Some(produce) = versions::lookup(key::PRODUCE) else {
        return;
    };
    let span = (produce.max - produce.min + 1) as u8;
    let version = produce.min + i16::from(pick % span);
    if let Ok(req) = produce_request::decode(BytesMut::from(body), version) {
        let records: usize = req
            .topics
            .iter()
            .flat_map(|t| &t.partitions)
            .filter_map(|p| p.records.as_ref().map(|r| r.len()))
            .sum();
        assert!(records <= body.len());
    }
});
