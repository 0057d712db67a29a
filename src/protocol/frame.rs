//! Length-prefixed framing: the length of the request frame at the front of a connection's
//! read buffer, checked before anything is sized from it.

use crate::error::ConnectionError;

/// Smallest frame that can hold a request header (key, version, correlation id, client id len).
pub const MIN_FRAME: usize = 10;

/// The length of the frame at the front of `buf` (prefix not included), once its 4-byte
/// prefix is there. Lengths outside `MIN_FRAME..=max` are errors.
pub fn peek_len(buf: &[u8], max: usize) -> Result<Option<usize>, ConnectionError> {
    if buf.len() < 4 {
        return Ok(None);
    }
    let len = i32::from_be_bytes([buf[0], buf[1], buf[2], buf[3]]);
    if len < MIN_FRAME as i32 || len as usize > max {
        return Err(ConnectionError::BadFrameLength(i64::from(len), max));
    }
    Ok(Some(len as usize))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_lengths_and_rejects_bad_ones() {
        assert_eq!(peek_len(&[0, 0, 0], 100).unwrap(), None);
        assert_eq!(peek_len(&[0, 0, 0, 10, 1], 100).unwrap(), Some(10));
        assert_eq!(peek_len(&[0, 0, 0, 100], 100).unwrap(), Some(100));
        for bad in [
            [0u8, 0, 0, 0],
            [0, 0, 0, 9],
            [0, 0, 0, 101],
            [0xff, 0xff, 0xff, 0xff],
            [0x7f, 0xff, 0xff, 0xff],
        ] {
            assert!(peek_len(&bad, 100).is_err());
        }
    }
}
