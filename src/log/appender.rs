//! Append-only writes through a glommio DMA (O_DIRECT) file.
//!
//! O_DIRECT needs block-aligned positions and lengths, but record batches have any length.
//! The appender keeps the logical length and a copy of the last, partial block: every append
//! rewrites that block from its aligned start together with the new bytes, zero-padding the
//! final block. The prefix of a rewritten block is byte-identical to what was there, so a
//! write torn at sector granularity cannot damage data written before; the zero padding past
//! the logical length is cut by recovery (a zero batch length is not a valid batch).
//! Used by segments, index files and the group offsets log; calls only glommio.

use std::io;
use std::path::Path;
use std::rc::Rc;

use bytes::Bytes;
use glommio::io::{BufferedFile, DmaFile, OpenOptions};

/// A DMA file opened for appending at a known logical length.
pub struct Appender {
    file: Rc<DmaFile>,
    align: u64,
    len: u64,
    /// The bytes of the last partial block (`len % align` of them).
    tail: Vec<u8>,
}

fn glommio_io<T>(what: &str, path: &Path) -> impl FnOnce(glommio::GlommioError<T>) -> io::Error {
    let ctx = format!("{what} {}", path.display());
    move |e| {
        let e = io::Error::from(e);
        io::Error::new(e.kind(), format!("{ctx}: {e}"))
    }
}

impl Appender {
    /// Creates (or truncates) `path` for appending from offset 0.
    pub async fn create(path: &Path) -> io::Result<Appender> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .dma_open(path)
            .await
            .map_err(glommio_io("creating", path))?;
        Ok(Self::with_file(Rc::new(file), 0, Vec::new()))
    }

    /// Opens an existing file to append after its first `len` bytes; whatever lies past them
    /// (a torn tail, DMA padding) is cut off first.
    pub async fn open(path: &Path, len: u64) -> io::Result<Appender> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .dma_open(path)
            .await
            .map_err(glommio_io("opening", path))?;
        file.truncate(len)
            .await
            .map_err(glommio_io("truncating", path))?;
        let align = file.alignment();
        let start = len - len % align;
        let tail = if start < len {
            // Reads go through the page cache (coherent with DMA writes): polled O_DIRECT
            // reads are not supported on every device.
            let reader = BufferedFile::open(path)
                .await
                .map_err(glommio_io("opening", path))?;
            let r = read_at(&reader, start, (len - start) as usize).await?;
            let _ = reader.close().await;
            if (r.len() as u64) < len - start {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    format!("short read of the tail block of {}", path.display()),
                ));
            }
            r.to_vec()
        } else {
            Vec::new()
        };
        Ok(Self::with_file(Rc::new(file), len, tail))
    }

    fn with_file(file: Rc<DmaFile>, len: u64, tail: Vec<u8>) -> Appender {
        let align = file.alignment();
        Appender {
            file,
            align,
            len,
            tail,
        }
    }

    /// The file, shared with readers.
    pub fn file(&self) -> Rc<DmaFile> {
        self.file.clone()
    }

    /// Logical length: bytes appended so far.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether nothing was appended.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Writes `parts` after the logical end. On error the logical length is unchanged, so a
    /// later append rewrites the same blocks.
    pub async fn append(&mut self, parts: &[Bytes]) -> io::Result<()> {
        let added: usize = parts.iter().map(Bytes::len).sum();
        if added == 0 {
            return Ok(());
        }
        let start = self.len - self.tail.len() as u64;
        let logical = self.tail.len() + added;
        let padded = logical.div_ceil(self.align as usize) * self.align as usize;
        let mut buf = self.file.alloc_dma_buffer(padded);
        {
            let dst = buf.as_bytes_mut();
            dst[..self.tail.len()].copy_from_slice(&self.tail);
            let mut at = self.tail.len();
            for p in parts {
                dst[at..at + p.len()].copy_from_slice(p);
                at += p.len();
            }
            dst[at..].fill(0);
        }
        let keep_from = logical - logical % self.align as usize;
        let new_tail = buf.as_bytes()[keep_from..logical].to_vec();
        let written = self.file.write_at(buf, start).await.map_err(|e| {
            let e = io::Error::from(e);
            io::Error::new(e.kind(), format!("writing a log file: {e}"))
        })?;
        if written < logical {
            return Err(io::Error::new(
                io::ErrorKind::WriteZero,
                format!("short write: {written} of {logical} bytes"),
            ));
        }
        self.len += added as u64;
        self.tail = new_tail;
        Ok(())
    }

    /// fdatasync: everything appended so far is on stable storage.
    pub async fn sync(&self) -> io::Result<()> {
        self.file.fdatasync().await.map_err(|e| {
            let e = io::Error::from(e);
            io::Error::new(e.kind(), format!("fdatasync of a log file: {e}"))
        })
    }

    /// Cuts the padding of the last block so the file size is the logical length (for files
    /// that are complete: sealed segments, index files).
    pub async fn trim(&self) -> io::Result<()> {
        self.file.truncate(self.len).await.map_err(|e| {
            let e = io::Error::from(e);
            io::Error::new(e.kind(), format!("truncating a log file: {e}"))
        })
    }
}

/// Reads `len` bytes at `pos` (fewer at end of file).
pub async fn read_at(file: &BufferedFile, pos: u64, len: usize) -> io::Result<Bytes> {
    let r = file.read_at(pos, len).await.map_err(|e| {
        let e = io::Error::from(e);
        io::Error::new(e.kind(), format!("reading a log file: {e}"))
    })?;
    Ok(Bytes::copy_from_slice(&r))
}
