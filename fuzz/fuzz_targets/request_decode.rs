//! Fuzzes the whole decode path a client reaches, as the broker runs it: a request frame
//! (without its length prefix) through the header parser, the version check, the shape check
//! and the hand-written or crate decoder, for every api and version Kelp supports.
#![no_main]

use bytes::BytesMut;
use kelp::protocol::request;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|frame: &[u8]| {
    let _ = request::decode_frame(BytesMut::from(frame));
});
