//! Lower-case hex, the one codec for bytes kept as text: record file names
//! (`storage::record_file`), SCRAM keys in stored JSON, ACL record keys. A leaf: names no
//! other module.

/// `bytes` as lower-case hex.
pub fn encode(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        out.push(char::from(DIGITS[usize::from(b >> 4)]));
        out.push(char::from(DIGITS[usize::from(b & 15)]));
    }
    out
}

/// The bytes of hex `text` (either case); None for an odd length or a non-hex digit.
pub fn decode(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|i| {
            text.get(i..i + 2)
                .filter(|h| h.bytes().all(|c| c.is_ascii_hexdigit()))
                .and_then(|h| u8::from_str_radix(h, 16).ok())
        })
        .collect()
}

#[cfg(test)]
mod tests {
    #[test]
    fn round_trip_and_refusals() {
        let all: Vec<u8> = (0..=255).collect();
        assert_eq!(super::decode(&super::encode(&all)), Some(all));
        assert_eq!(super::encode(b"\x00\xafZ"), "00af5a");
        assert_eq!(super::decode("AF"), Some(vec![0xaf]));
        for bad in ["a", "zz", "+1", "é1"] {
            assert_eq!(super::decode(bad), None, "{bad}");
        }
    }
}
