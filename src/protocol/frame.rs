//! Length-prefixed framing: splits complete request frames off the connection's read buffer.

use bytes::{Buf, BytesMut};

use crate::error::ConnectionError;

/// Smallest frame that can hold a request header (key, version, correlation id, client id len).
pub const MIN_FRAME: usize = 10;

/// Takes the next complete frame (without its length prefix) off the front of `buf`.
/// `Ok(None)` means more bytes are needed; the returned count is how many in total.
/// Lengths outside `MIN_FRAME..=max` are errors: the connection must be closed.
pub fn next_frame(
    buf: &mut BytesMut,
    max: usize,
) -> Result<Result<BytesMut, usize>, ConnectionError> {
    if buf.len() < 4 {
        return Ok(Err(4));
    }
    let len = i32::from_be_bytes([buf[0], buf[1], buf[2], buf[3]]);
    if len < MIN_FRAME as i32 || len as usize > max {
        return Err(ConnectionError::BadFrameLength(i64::from(len), max));
    }
    let need = 4 + len as usize;
    if buf.len() < need {
        return Ok(Err(need));
    }
    buf.advance(4);
    Ok(Ok(buf.split_to(len as usize)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_pipelined_frames_and_rejects_bad_lengths() {
        let mut b = BytesMut::new();
        for n in [10u8, 12] {
            b.extend_from_slice(&[0, 0, 0, n]);
            b.extend_from_slice(&vec![n; n as usize]);
        }
        b.extend_from_slice(&[0, 0, 0, 11, 1]);
        assert_eq!(next_frame(&mut b, 100).unwrap().unwrap().len(), 10);
        assert_eq!(next_frame(&mut b, 100).unwrap().unwrap().len(), 12);
        assert_eq!(next_frame(&mut b, 100).unwrap(), Err(15));
        for bad in [
            [0u8, 0, 0, 0],
            [0xff, 0xff, 0xff, 0xff],
            [0x7f, 0xff, 0xff, 0xff],
        ] {
            let mut b = BytesMut::from(&bad[..]);
            assert!(next_frame(&mut b, 1 << 20).is_err());
        }
    }
}
