//! Primitive Kafka wire types for the hand-written codecs: a bounds-checked reader over a byte
//! slice and writer helpers over `BytesMut`, for both classic and flexible (compact) encodings.

use bytes::{BufMut, BytesMut};

/// Failure to read a primitive: the input ended early or held an impossible value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("malformed {0}")]
pub struct WireError(pub &'static str);

/// Bounds-checked reader; positions are offsets into the original slice.
pub struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    /// Starts reading at the beginning of `buf`.
    pub fn new(buf: &'a [u8]) -> Self {
        Reader { buf, pos: 0 }
    }

    /// Current offset into the slice.
    pub fn pos(&self) -> usize {
        self.pos
    }

    /// Bytes left.
    pub fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    fn take(&mut self, n: usize, what: &'static str) -> Result<&'a [u8], WireError> {
        if self.remaining() < n {
            return Err(WireError(what));
        }
        let s = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    /// An int8; fails rather than read past the end, like every reader here.
    pub fn i8(&mut self) -> Result<i8, WireError> {
        Ok(self.take(1, "int8")?[0] as i8)
    }
    /// A big-endian int16.
    pub fn i16(&mut self) -> Result<i16, WireError> {
        let s = self.take(2, "int16")?;
        Ok(i16::from_be_bytes([s[0], s[1]]))
    }
    /// A big-endian int32.
    pub fn i32(&mut self) -> Result<i32, WireError> {
        let s = self.take(4, "int32")?;
        Ok(i32::from_be_bytes([s[0], s[1], s[2], s[3]]))
    }
    /// A big-endian int64.
    pub fn i64(&mut self) -> Result<i64, WireError> {
        let s = self.take(8, "int64")?;
        let mut a = [0u8; 8];
        a.copy_from_slice(s);
        Ok(i64::from_be_bytes(a))
    }

    /// Unsigned varint (flexible lengths, tag numbers).
    pub fn uvarint(&mut self) -> Result<u32, WireError> {
        let mut v: u32 = 0;
        for shift in (0..35).step_by(7) {
            let b = self.take(1, "varint")?[0];
            v |= u32::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(WireError("varint too long"))
    }

    /// Skips `n` bytes.
    pub fn skip(&mut self, n: usize) -> Result<(), WireError> {
        self.take(n, "field").map(|_| ())
    }

    /// Length of a string, array or bytes field: `None` for null. Compact forms store len+1.
    fn len_prefix(&mut self, compact: bool, wide: bool) -> Result<Option<usize>, WireError> {
        let n: i64 = if compact {
            i64::from(self.uvarint()?) - 1
        } else if wide {
            i64::from(self.i32()?)
        } else {
            i64::from(self.i16()?)
        };
        if n < 0 {
            return Ok(None);
        }
        Ok(Some(n as usize))
    }

    /// Nullable string (classic int16 length or compact).
    pub fn nullable_string(&mut self, compact: bool) -> Result<Option<&'a str>, WireError> {
        match self.len_prefix(compact, false)? {
            None => Ok(None),
            Some(n) => {
                let s = self.take(n, "string")?;
                std::str::from_utf8(s)
                    .map(Some)
                    .map_err(|_| WireError("utf-8 string"))
            }
        }
    }

    /// Non-null string.
    pub fn string(&mut self, compact: bool) -> Result<&'a str, WireError> {
        self.nullable_string(compact)?
            .ok_or(WireError("null string"))
    }

    /// Nullable bytes as (start offset, length) into the slice, so callers can split zero-copy.
    pub fn nullable_bytes_range(
        &mut self,
        compact: bool,
    ) -> Result<Option<(usize, usize)>, WireError> {
        match self.len_prefix(compact, true)? {
            None => Ok(None),
            Some(n) => {
                let start = self.pos;
                self.take(n, "bytes")?;
                Ok(Some((start, n)))
            }
        }
    }

    /// Length of a non-nullable array (classic int32 or compact) whose elements take at least
    /// `min_elem` bytes each; null or negative is an error, as in Kafka's generated readers.
    /// A count whose elements cannot fit in the bytes left is refused, so callers may allocate
    /// by it: the allocation is then bounded by the input's size.
    pub fn array_len(&mut self, compact: bool, min_elem: usize) -> Result<usize, WireError> {
        let n = self
            .len_prefix(compact, true)?
            .ok_or(WireError("null array"))?;
        if n.saturating_mul(min_elem.max(1)) > self.remaining() {
            return Err(WireError("array length"));
        }
        Ok(n)
    }

    /// Skips a tagged-field section (flexible versions only).
    pub fn skip_tagged_fields(&mut self) -> Result<(), WireError> {
        let count = self.uvarint()?;
        for _ in 0..count {
            let _tag = self.uvarint()?;
            let size = self.uvarint()? as usize;
            self.skip(size)?;
        }
        Ok(())
    }
}

/// Writes an unsigned varint.
pub fn put_uvarint(b: &mut BytesMut, mut v: u32) {
    while v >= 0x80 {
        b.put_u8((v as u8 & 0x7f) | 0x80);
        v >>= 7;
    }
    b.put_u8(v as u8);
}

/// Writes an array length: compact (len+1 varint) or classic int32.
pub fn put_array_len(b: &mut BytesMut, n: usize, compact: bool) {
    if compact {
        put_uvarint(b, n as u32 + 1);
    } else {
        b.put_i32(n as i32);
    }
}

/// Writes a non-null string: compact or classic int16 length.
pub fn put_string(b: &mut BytesMut, s: &str, compact: bool) {
    if compact {
        put_uvarint(b, s.len() as u32 + 1);
    } else {
        b.put_i16(s.len() as i16);
    }
    b.put_slice(s.as_bytes());
}

/// Writes the length prefix of a nullable bytes field (`None` = null).
pub fn put_bytes_len(b: &mut BytesMut, len: Option<usize>, compact: bool) {
    match (len, compact) {
        (None, true) => put_uvarint(b, 0),
        (None, false) => b.put_i32(-1),
        (Some(n), true) => put_uvarint(b, n as u32 + 1),
        (Some(n), false) => b.put_i32(n as i32),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_round_trip() {
        for v in [0u32, 1, 127, 128, 300, 16384, u32::MAX] {
            let mut b = BytesMut::new();
            put_uvarint(&mut b, v);
            assert_eq!(Reader::new(&b).uvarint().unwrap(), v);
        }
        assert!(Reader::new(&[0x80, 0x80]).uvarint().is_err());
    }

    #[test]
    fn strings_and_absurd_arrays() {
        let mut b = BytesMut::new();
        put_string(&mut b, "topic", true);
        put_string(&mut b, "t2", false);
        let mut r = Reader::new(&b);
        assert_eq!(r.string(true).unwrap(), "topic");
        assert_eq!(r.string(false).unwrap(), "t2");
        assert!(Reader::new(&[0x7f, 0xff, 0xff, 0xff])
            .array_len(false, 1)
            .is_err());
        assert!(Reader::new(&[0xff, 0xff, 0xff, 0xfb])
            .array_len(false, 1)
            .is_err());
        assert!(
            Reader::new(&[0]).array_len(true, 1).is_err(),
            "null compact array"
        );
        assert_eq!(Reader::new(&[0, 0, 0, 0]).array_len(false, 4).unwrap(), 0);
        // Two elements of at least 3 bytes do not fit in 5 bytes; they do in 6.
        assert!(Reader::new(&[3, 0, 0, 0, 0, 0]).array_len(true, 3).is_err());
        assert_eq!(
            Reader::new(&[3, 0, 0, 0, 0, 0, 0])
                .array_len(true, 3)
                .unwrap(),
            2
        );
    }
}
