//! Fuzzes the request header parser (api key, version, correlation id, client id, header
//! tags): any bytes must give a header or an error, never a panic, and a parsed header's body
//! offset must lie within the frame.
#![no_main]

use kelp::protocol::RequestHeader;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|frame: &[u8]| {
    if let Ok(h) = RequestHeader::parse(frame) {
        assert!(h.body_offset <= frame.len());
        // A parsed header always names an api Kelp knows.
        let _ = h.support();
    }
});
