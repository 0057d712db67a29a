//! Zeroed room ahead of an O_DIRECT-appended segment's logical end, written before the
//! rounds that will overwrite it.
//!
//! Why: on ext4 a write past the end of a file allocates blocks and grows the file, so the
//! fdatasync after it writes the inode besides flushing the device's cache; a write over
//! blocks already written, inside the file's size, changes nothing fdatasync must write but
//! the data, so it only flushes. On this project's VM (ext4 without a journal on virtio-blk),
//! 1 GiB in 131,584-byte O_DIRECT rounds each followed by fdatasync cost 0.57-0.63 CPU-s and
//! 1.7-1.8 s appending, 0.29 CPU-s and 1.25 s overwriting zeros written first (8 MiB
//! O_DIRECT writes of zeros: 0.03-0.04 CPU-s per GiB). fallocate does not help: it leaves
//! unwritten extents, whose conversion on the first write is metadata again.
//!
//! The room is written by a pool thread off the rounds' path ([`super::appender`] decides
//! when) from one shared buffer of zeros. It is zeros past the logical length, which every
//! reader already treats as the padding of an O_DIRECT tail block: reads stop at the logical
//! length, sealing trims the file, recovery cuts a zero tail. What DescribeLogDirs reports
//! is the log's bytes, as Kafka counts a preallocated segment: [`Logical`] publishes an
//! active segment's logical length for [`super::usage`], which reads every shard's
//! directories from one thread. Calls std and libc only.

use std::collections::HashMap;
use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use super::direct::{Aligned, BLOCK};

/// The most room one extension adds: big enough that its cost (one inode write at the next
/// fdatasync, one trip to the pool) is spread over tens of rounds, small enough to take a
/// pool thread and the device for only a millisecond or two.
pub const MAX_STEP: u64 = 4 << 20;
/// The least room one extension adds.
pub const MIN_STEP: u64 = 64 << 10;
/// Bytes of the shared zero buffer; one `pwritev` repeats it.
const ZEROS: usize = super::direct::HUGE;

fn zeros() -> &'static Aligned {
    static Z: OnceLock<Aligned> = OnceLock::new();
    Z.get_or_init(|| Aligned::new(ZEROS))
}

type Lengths = Mutex<HashMap<PathBuf, Arc<AtomicU64>>>;

fn lengths() -> &'static Lengths {
    static L: OnceLock<Lengths> = OnceLock::new();
    L.get_or_init(Lengths::default)
}

/// The logical length of an appended file, published while it lives (a file's length may
/// count zeros written ahead).
pub struct Logical {
    path: PathBuf,
    len: Arc<AtomicU64>,
}

impl Logical {
    /// Publishes `len` as `path`'s logical length.
    pub fn new(path: &Path, len: u64) -> Logical {
        let len = Arc::new(AtomicU64::new(len));
        lengths()
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(path.to_path_buf(), len.clone());
        Logical {
            path: path.to_path_buf(),
            len,
        }
    }

    /// The file now holds `len` bytes of log.
    pub fn set(&self, len: u64) {
        self.len.store(len, Ordering::Relaxed);
    }
}

impl Drop for Logical {
    fn drop(&mut self) {
        let mut all = lengths().lock().unwrap_or_else(PoisonError::into_inner);
        // Only if it is still this one's: a new appender of the same file may have taken over.
        if all
            .get(&self.path)
            .is_some_and(|l| Arc::ptr_eq(l, &self.len))
        {
            all.remove(&self.path);
        }
    }
}

/// The logical length published for `path`, if an appender of it lives.
pub fn logical_len(path: &Path) -> Option<u64> {
    lengths()
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .get(path)
        .map(|l| l.load(Ordering::Relaxed))
}

fn round_up(n: u64) -> u64 {
    n.div_ceil(BLOCK as u64) * BLOCK as u64
}

/// The range to zero next, once a segment holds `len` bytes, zeros end at `reserved` and the
/// segment rolls at `limit` bytes: none while at least half a step of room is left, or once
/// the room reaches the limit (rounded up to a block). A step is the segment's length so far
/// (a young segment gets little room), between [`MIN_STEP`] and [`MAX_STEP`]. Both ends are
/// block-aligned; the range starts at or past the block holding `len`, which the next round
/// writes whole.
pub fn next_extension(len: u64, reserved: u64, limit: u64) -> Option<(u64, u64)> {
    let end = round_up(len);
    let from = round_up(reserved).max(end);
    let step = round_up(len.clamp(MIN_STEP, MAX_STEP));
    let to = (from + step).min(round_up(limit));
    (from - end < step / 2 && to > from).then_some((from, to))
}

/// Writes zeros over `from..to` of `file` (opened with O_DIRECT; both ends block-aligned).
pub fn fill(file: &File, from: u64, to: u64) -> io::Result<()> {
    debug_assert!(from.is_multiple_of(BLOCK as u64) && to.is_multiple_of(BLOCK as u64));
    let z = zeros().bytes();
    let mut at = from;
    while at < to {
        let left = to - at;
        let n = (left / ZEROS as u64).min(1024) as usize;
        let iov: Vec<libc::iovec> = (0..n.max(1))
            .map(|_| libc::iovec {
                iov_base: z.as_ptr() as *mut libc::c_void,
                iov_len: if n == 0 { left as usize } else { ZEROS },
            })
            .collect();
        // SAFETY: every iovec points into the live, never written shared zero buffer and
        // is no longer than it.
        let w = unsafe { super::appender::pwritev_at(file, &iov, at)? };
        if w == 0 || !w.is_multiple_of(BLOCK) {
            return Err(io::Error::other(format!(
                "O_DIRECT write of zeros stopped after {w} bytes"
            )));
        }
        at += w as u64;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn room_grows_with_the_segment_and_only_when_half_a_step_is_left() {
        const B: u64 = BLOCK as u64;
        let ext = |len, reserved| next_extension(len, reserved, u64::MAX / 2);
        // A new segment after its first small round: a minimal step past its block.
        assert_eq!(ext(100, 0), Some((B, B + MIN_STEP)));
        // Plenty of room left: nothing.
        assert_eq!(ext(100, B + MIN_STEP), None);
        // Less than half a step left: the next step starts where the zeros end.
        let len = 40 * B + 5;
        let step = round_up(len.max(MIN_STEP));
        assert_eq!(ext(len, 42 * B), Some((42 * B, 42 * B + step)));
        // A big segment: steps stop growing at MAX_STEP.
        let len = 1 << 30;
        let r = len + MAX_STEP / 2 - B;
        assert_eq!(ext(len, r), Some((r, r + MAX_STEP)));
        assert_eq!(ext(len, len + MAX_STEP / 2), None);
        // Zeros known to end before the logical end (a cut file): start past the tail block.
        assert_eq!(ext(3 * B + 1, B), Some((4 * B, 4 * B + MIN_STEP)));
        // Never past the length the segment rolls at, rounded up to a block.
        assert_eq!(next_extension(100, 0, 3 * B - 7), Some((B, 3 * B)));
        assert_eq!(next_extension(2 * B + 1, 0, 3 * B - 7), None);
        assert_eq!(next_extension(100, 0, 100), None);
    }

    #[test]
    fn logical_lengths_are_published_while_their_appender_lives() {
        let path = std::env::temp_dir().join(format!("kelp-logical-{}", std::process::id()));
        assert_eq!(logical_len(&path), None);
        let a = Logical::new(&path, 10);
        a.set(25);
        assert_eq!(logical_len(&path), Some(25));
        // A newer appender of the same file takes over; the old one's drop leaves it.
        let b = Logical::new(&path, 7);
        drop(a);
        assert_eq!(logical_len(&path), Some(7));
        drop(b);
        assert_eq!(logical_len(&path), None);
    }

    #[test]
    fn fill_writes_zeros_over_exactly_the_range() {
        use std::os::unix::fs::FileExt;
        let dir = std::env::temp_dir().join(format!("kelp-prealloc-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("f");
        std::fs::write(&path, vec![7u8; BLOCK]).unwrap();
        let Some(file) = super::super::direct::open(&path).unwrap() else {
            // A file system without O_DIRECT: nothing here to test.
            return;
        };
        // Whole zero buffers, then a short remainder.
        let to = BLOCK as u64 + 3 * ZEROS as u64 + 3 * BLOCK as u64;
        fill(&file, BLOCK as u64, to).unwrap();
        let got = std::fs::read(&path).unwrap();
        assert_eq!(got.len() as u64, to);
        assert!(got[..BLOCK].iter().all(|&b| b == 7));
        assert!(got[BLOCK..].iter().all(|&b| b == 0));
        // A descriptor that cannot write reports the error.
        let ro = File::open(&path).unwrap();
        assert!(fill(&ro, 0, BLOCK as u64).is_err());
        let mut one = [1u8; 1];
        ro.read_exact_at(&mut one, 0).unwrap();
        assert_eq!(one, [7]);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
