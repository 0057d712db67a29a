//! Pre-decode structural check of request bodies against Kafka's message schemas.
//!
//! The kafka-protocol crate's array decoders call `Vec::with_capacity(count)` with the count
//! read from the frame before checking it against the bytes that remain, so a 21-byte frame
//! could ask for a 150 GB allocation and abort the process. This module owns the schema types,
//! the generated table of Kafka's request shapes (`schema`) and a walk over a body that
//! allocates nothing and refuses every length or count larger than what is left (a count is
//! checked as count × the element's smallest encoding). Only a body that passes reaches the
//! crate, whose allocations are then bounded by the frame size.

mod schema;
#[cfg(test)]
mod tests;

pub use schema::CONSUMER_PROTOCOL_SUBSCRIPTION;

use super::wire::{Reader, WireError};

/// Open upper bound of a version range ("3+").
pub const MAX: i16 = i16::MAX;

/// An inclusive version range, as Kafka's "0-4" / "3+"; [`V::NONE`] holds no version.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct V(pub i16, pub i16);

impl V {
    /// An empty range: for "never nullable" and "never tagged".
    pub const NONE: V = V(1, 0);

    /// Whether `version` is in the range.
    pub const fn has(self, version: i16) -> bool {
        self.0 <= version && version <= self.1
    }
}

/// A field's wire type.
#[derive(Debug)]
pub enum Kind {
    /// One byte.
    Bool,
    /// One byte.
    Int8,
    /// Two bytes.
    Int16,
    /// Two bytes.
    Uint16,
    /// Four bytes.
    Int32,
    /// Four bytes.
    Uint32,
    /// Eight bytes.
    Int64,
    /// Eight bytes.
    Float64,
    /// Sixteen bytes.
    Uuid,
    /// Length-prefixed (int16, or a varint when flexible); the length is checked against
    /// what remains.
    String,
    /// Length-prefixed (int32, or a varint when flexible).
    Bytes,
    /// A record set: length-prefixed like `Bytes`; its batches are checked later by `record`.
    Records,
    /// A nested struct with its own fields (and tagged section when flexible).
    Struct(&'static [Field]),
    /// A counted array; the count is checked as count × the element's smallest encoding.
    Array(&'static Kind),
}

/// One field of a message or struct.
#[derive(Debug)]
pub struct Field {
    /// Kafka's field name, reported in a [`ShapeError`].
    pub name: &'static str,
    /// Its wire type.
    pub kind: Kind,
    /// The versions that carry it.
    pub versions: V,
    /// The versions in which it may be null (length -1).
    pub nullable: V,
    /// Tag number and the versions in which the field travels in the tagged section.
    pub tag: Option<(u32, V)>,
}

/// A field present in `versions`, never null, not tagged (the generated table's shorthand).
pub const fn f(name: &'static str, kind: Kind, versions: V) -> Field {
    Field {
        name,
        kind,
        versions,
        nullable: V::NONE,
        tag: None,
    }
}

impl Field {
    /// The field, nullable in `versions`.
    pub const fn nullable(mut self, versions: V) -> Self {
        self.nullable = versions;
        self
    }

    /// The field, carried as tag `tag` in `versions`.
    pub const fn tagged(mut self, tag: u32, versions: V) -> Self {
        self.tag = Some((tag, versions));
        self
    }

    /// Whether the field is in the fixed part of the struct at `version`.
    fn in_body(&self, version: i16) -> bool {
        self.versions.has(version) && !matches!(self.tag, Some((_, tv)) if tv.has(version))
    }

    /// Whether tag `tag` names this field at `version`.
    fn is_tag(&self, tag: u32, version: i16) -> bool {
        self.versions.has(version)
            && matches!(self.tag, Some((t, tv)) if t == tag && tv.has(version))
    }
}

/// A top-level message: a request, or a message carried inside one (consumer protocol).
#[derive(Debug)]
pub struct Message {
    /// Kafka's message name, reported in a [`ShapeError`].
    pub name: &'static str,
    /// -1 for messages that are not requests.
    pub api_key: i16,
    /// The versions that exist; others are refused before any field is read.
    pub valid: V,
    /// The versions with compact lengths and tagged sections.
    pub flexible: V,
    /// Its fields in wire order.
    pub fields: &'static [Field],
}

/// Why a body was refused: which field, what was wrong, where.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message} v{version}: {what} in {field} at byte {at}")]
pub struct ShapeError {
    /// The message being checked.
    pub message: &'static str,
    /// Its version.
    pub version: i16,
    /// The field where the walk stopped ("-" before the first).
    pub field: &'static str,
    /// What was wrong.
    pub what: &'static str,
    /// Byte offset in the body.
    pub at: usize,
}

/// The schema of request `api_key`, if Kelp decodes it with the crate.
pub fn request(api_key: i16) -> Option<&'static Message> {
    schema::ALL.iter().copied().find(|m| m.api_key == api_key)
}

impl Message {
    /// Walks `body` as this message at `version`; returns how many bytes the message takes.
    /// Trailing bytes are the caller's business (the crate ignores them, as Kafka does).
    pub fn check(&self, version: i16, body: &[u8]) -> Result<usize, ShapeError> {
        let mut w = Walk {
            body,
            r: Reader::new(body),
            base: 0,
            version,
            flex: self.flexible.has(version),
        };
        let fail = |f: Fail| ShapeError {
            message: self.name,
            version,
            field: f.field,
            what: f.what,
            at: f.at,
        };
        if !self.valid.has(version) {
            return Err(fail(Fail {
                field: "-",
                what: "unknown version",
                at: 0,
            }));
        }
        w.fields(self.fields).map_err(fail)?;
        Ok(w.r.pos())
    }
}

/// Where the walk stopped.
struct Fail {
    field: &'static str,
    what: &'static str,
    at: usize,
}

/// Smallest encoding of a value of `kind` at `version`: what an array element needs at least.
fn min_size(kind: &Kind, version: i16, flex: bool) -> usize {
    match kind {
        Kind::Bool | Kind::Int8 => 1,
        Kind::Int16 | Kind::Uint16 => 2,
        Kind::Int32 | Kind::Uint32 => 4,
        Kind::Int64 | Kind::Float64 => 8,
        Kind::Uuid => 16,
        // Compact lengths are one varint byte at least; classic ones int16 or int32.
        Kind::String if flex => 1,
        Kind::String => 2,
        Kind::Bytes | Kind::Records | Kind::Array(_) if flex => 1,
        Kind::Bytes | Kind::Records | Kind::Array(_) => 4,
        Kind::Struct(fields) => {
            let body: usize = fields
                .iter()
                .filter(|f| f.in_body(version))
                .map(|f| min_size(&f.kind, version, flex))
                .sum();
            // The tagged-field count of a flexible struct is one varint byte at least.
            body + usize::from(flex)
        }
    }
}

/// The walk over one body (or one tagged field's bytes, `base` being where they start).
struct Walk<'a> {
    body: &'a [u8],
    r: Reader<'a>,
    base: usize,
    version: i16,
    flex: bool,
}

impl Walk<'_> {
    fn fail(&self, field: &'static Field, what: &'static str) -> Fail {
        Fail {
            field: field.name,
            what,
            at: self.base + self.r.pos(),
        }
    }

    fn wire(&self, field: &'static Field) -> impl Fn(WireError) -> Fail + '_ {
        move |e| self.fail(field, e.0)
    }

    fn fields(&mut self, fields: &'static [Field]) -> Result<(), Fail> {
        let version = self.version;
        for f in fields.iter().filter(|f| f.in_body(version)) {
            self.value(f, &f.kind)?;
        }
        if self.flex {
            self.tagged(fields)?;
        }
        Ok(())
    }

    fn skip(&mut self, field: &'static Field, n: usize) -> Result<(), Fail> {
        match self.r.skip(n) {
            Ok(()) => Ok(()),
            Err(_) => Err(self.fail(field, "length past the end")),
        }
    }

    fn value(&mut self, field: &'static Field, kind: &'static Kind) -> Result<(), Fail> {
        match kind {
            // A nullable struct (not an array's element) starts with an int8 marker, as
            // Kafka and the crate read it: negative is null, anything else is present.
            Kind::Struct(fields)
                if std::ptr::eq(kind, &field.kind) && field.nullable.has(self.version) =>
            {
                if self.r.i8().map_err(self.wire(field))? < 0 {
                    Ok(())
                } else {
                    self.fields(fields)
                }
            }
            Kind::Struct(fields) => self.fields(fields),
            Kind::String => match self.len(field, false)? {
                Some(n) => self.skip(field, n),
                None => Ok(()),
            },
            Kind::Bytes | Kind::Records => match self.len(field, true)? {
                Some(n) => self.skip(field, n),
                None => Ok(()),
            },
            Kind::Array(elem) => {
                let Some(n) = self.len(field, true)? else {
                    return Ok(());
                };
                // Kafka's own readers refuse a count above the bytes left even for elements
                // that could encode in zero bytes; so does this check.
                let min = min_size(elem, self.version, self.flex).max(1);
                if n.checked_mul(min)
                    .is_none_or(|need| need > self.r.remaining())
                {
                    return Err(self.fail(field, "array count past the end"));
                }
                for _ in 0..n {
                    self.value(field, elem)?;
                }
                Ok(())
            }
            fixed => {
                let n = min_size(fixed, self.version, self.flex);
                self.skip(field, n)
            }
        }
    }

    /// A length prefix: `None` for null (refused unless the field is nullable now).
    fn len(&mut self, field: &'static Field, wide: bool) -> Result<Option<usize>, Fail> {
        let n: i64 = if self.flex {
            i64::from(self.r.uvarint().map_err(self.wire(field))?) - 1
        } else if wide {
            i64::from(self.r.i32().map_err(self.wire(field))?)
        } else {
            i64::from(self.r.i16().map_err(self.wire(field))?)
        };
        match n {
            -1 if field.nullable.has(self.version) => Ok(None),
            -1 => Err(self.fail(field, "null in a non-nullable field")),
            n if n < 0 => Err(self.fail(field, "negative length")),
            n => Ok(Some(n as usize)),
        }
    }

    /// A tagged-field section: known tags are walked as their type and must fill their size
    /// exactly (the crate reads them without looking at the size); unknown ones are skipped.
    fn tagged(&mut self, fields: &'static [Field]) -> Result<(), Fail> {
        const SECTION: &Field = &f("tagged fields", Kind::Bool, V::NONE);
        let count = self.r.uvarint().map_err(self.wire(SECTION))? as usize;
        // Each entry takes a tag and a size byte at least.
        if count.saturating_mul(2) > self.r.remaining() {
            return Err(self.fail(SECTION, "tag count past the end"));
        }
        for _ in 0..count {
            let tag = self.r.uvarint().map_err(self.wire(SECTION))?;
            let size = self.r.uvarint().map_err(self.wire(SECTION))? as usize;
            let start = self.r.pos();
            let field = fields.iter().find(|f| f.is_tag(tag, self.version));
            self.skip(field.unwrap_or(SECTION), size)?;
            if let Some(field) = field {
                let bytes = &self.body[start..start + size];
                let mut sub = Walk {
                    body: bytes,
                    r: Reader::new(bytes),
                    base: self.base + start,
                    version: self.version,
                    flex: self.flex,
                };
                sub.value(field, &field.kind)?;
                if sub.r.remaining() != 0 {
                    return Err(sub.fail(field, "tagged field shorter than its size"));
                }
            }
        }
        Ok(())
    }
}
