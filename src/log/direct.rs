//! O_DIRECT appends of the active segment: whole aligned blocks written from a staging
//! buffer, the partial block at the logical end kept in memory and written again, whole, by
//! the next append.
//!
//! Why: under `--fsync always` the bytes acks=all producers wait for are fdatasynced right
//! after their write, so the page cache only costs: the copy into freshly allocated cache
//! pages, then the writeback (acks=1 rounds measured cheaper this way too). On this
//! project's test VM, writing 1 GiB in ~130 KiB rounds each followed by fdatasync took
//! 0.88-1.33 CPU-s buffered and 0.64-0.72 CPU-s with O_DIRECT (`perf/fsync_rounds.py`), and
//! a broker run whose page cache landed on pages the host had taken back spent 52 % of its
//! CPU in `copy_folio_from_iter_atomic` (7.0 CPU-s/GB instead of 2.6): docs/storage.md.
//!
//! The file may end in zero padding past the logical length (the rest of the last block):
//! readers never read past the logical length, sealing trims it, and recovery cuts padding
//! as it always has. Reads stay buffered: the kernel drops cached pages of a range a direct
//! write covers. Runs on the blocking pool, like every other write of the log; calls std
//! and libc only.

use std::alloc;
use std::cell::RefCell;
use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::Path;

use bytes::Bytes;

/// Alignment of O_DIRECT file offsets, lengths and buffers: the largest logical block size of
/// common devices (512 and 4096 byte sectors both divide it).
pub const BLOCK: usize = 4096;
/// Bytes staged per `pwrite`; one per blocking-pool thread, allocated on its first append.
/// One huge page ([`HUGE`]).
const STAGE: usize = HUGE;
/// A transparent huge page: buffers of this size are mapped aligned to it and marked for
/// huge pages, so pinning them for each O_DIRECT write looks up one page table entry instead
/// of 256 or 512 (pinning the 4 KiB pages of a 1 MiB stage was 3-5 % of the broker's CPU,
/// `gup_fast_fallback` in perf/steady.sh local 1 dwarf).
pub(super) const HUGE: usize = 2 << 20;

/// A zeroed mapping aligned to [`BLOCK`] (to [`HUGE`] when it is a multiple of it, and then
/// backed by huge pages where the kernel allows), as O_DIRECT buffers must be: the staging
/// buffer here, the shared zeros of [`super::prealloc`].
pub(super) struct Aligned {
    ptr: std::ptr::NonNull<u8>,
    len: usize,
}

// SAFETY: `Aligned` owns its mapping like a `Box<[u8]>`: shared references only read it,
// writes need `&mut`.
unsafe impl Send for Aligned {}
// SAFETY: as above.
unsafe impl Sync for Aligned {}

impl Aligned {
    /// `len` zeroed bytes (a non-zero multiple of [`BLOCK`]). Out of memory aborts, as an
    /// allocation does.
    pub(super) fn new(len: usize) -> Aligned {
        debug_assert!(len > 0 && len.is_multiple_of(BLOCK));
        let huge = len.is_multiple_of(HUGE);
        // Room to find a huge page boundary inside the mapping.
        let map = if huge { len + HUGE } else { len };
        // SAFETY: a new private anonymous mapping; no existing memory is touched.
        let raw = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                map,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if raw == libc::MAP_FAILED {
            match alloc::Layout::from_size_align(len, BLOCK) {
                Ok(layout) => alloc::handle_alloc_error(layout),
                Err(_) => unreachable!("BLOCK is a power of two"),
            }
        }
        let raw = raw.cast::<u8>();
        let start = if huge {
            let skip = (HUGE - raw as usize % HUGE) % HUGE;
            // SAFETY: `skip` < HUGE, so `start..start + len` lies inside the mapping; the
            // parts before and after it are unmapped and never used.
            unsafe {
                let start = raw.add(skip);
                if skip > 0 {
                    libc::munmap(raw.cast(), skip);
                }
                libc::munmap(start.add(len).cast(), HUGE - skip);
                // Advice only: a kernel without (or with disabled) huge pages keeps 4 KiB
                // pages, which work the same.
                libc::madvise(start.cast(), len, libc::MADV_HUGEPAGE);
                start
            }
        } else {
            raw
        };
        match std::ptr::NonNull::new(start) {
            Some(ptr) => Aligned { ptr, len },
            None => unreachable!("mmap maps nothing at address 0"),
        }
    }

    pub(super) fn bytes(&self) -> &[u8] {
        // SAFETY: `ptr` is a live allocation of `len` initialised bytes, borrowed through
        // `self`.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }

    fn bytes_mut(&mut self) -> &mut [u8] {
        // SAFETY: as in `bytes`, borrowed mutably through `self`.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl Drop for Aligned {
    fn drop(&mut self) {
        // SAFETY: mapped in `new` (exactly these bytes remain of it) and unmapped only here.
        unsafe { libc::munmap(self.ptr.as_ptr().cast(), self.len) };
    }
}

thread_local! {
    static STAGED: RefCell<Option<Aligned>> = const { RefCell::new(None) };
}

/// Opens `path` a second time for O_DIRECT writes; `None` when the file system refuses
/// O_DIRECT (the appends then go through the page cache).
pub fn open(path: &Path) -> io::Result<Option<File>> {
    match OpenOptions::new()
        .write(true)
        .custom_flags(libc::O_DIRECT)
        .open(path)
    {
        Ok(f) => Ok(Some(f)),
        Err(e) if refused(&e) => Ok(None),
        Err(e) => Err(e),
    }
}

/// The bytes of `file` from the start of the block holding `len` up to `len`: the partial
/// block the next direct append starts with.
pub fn read_tail(file: &File, len: u64) -> io::Result<Vec<u8>> {
    let start = len - len % BLOCK as u64;
    let mut tail = vec![0u8; (len - start) as usize];
    file.read_exact_at(&mut tail, start)?;
    Ok(tail)
}

/// Whether `e` is O_DIRECT's refusal (EINVAL: the file system or an alignment; nothing was
/// opened or written).
pub fn refused(e: &io::Error) -> bool {
    e.raw_os_error() == Some(libc::EINVAL)
}

/// Writes `parts` at logical offset `at` of `file` (opened with O_DIRECT), where `tail` holds
/// the file's bytes from the start of `at`'s block up to `at`. Writes whole blocks only, the
/// last one zero-padded.
pub fn write(file: &File, at: u64, tail: &[u8], parts: &[Bytes]) -> io::Result<()> {
    debug_assert_eq!(tail.len() as u64, at % BLOCK as u64);
    STAGED.with(|staged| {
        let mut staged = staged.borrow_mut();
        let stage = staged
            .get_or_insert_with(|| Aligned::new(STAGE))
            .bytes_mut();
        let mut pos = at - tail.len() as u64;
        stage[..tail.len()].copy_from_slice(tail);
        let mut fill = tail.len();
        for part in parts {
            let mut src = &part[..];
            while !src.is_empty() {
                let n = (STAGE - fill).min(src.len());
                stage[fill..fill + n].copy_from_slice(&src[..n]);
                fill += n;
                src = &src[n..];
                if fill == STAGE {
                    pwrite_all(file, &stage[..STAGE], pos)?;
                    pos += STAGE as u64;
                    fill = 0;
                }
            }
        }
        if fill == 0 {
            return Ok(());
        }
        let padded = fill.div_ceil(BLOCK) * BLOCK;
        stage[fill..padded].fill(0);
        pwrite_all(file, &stage[..padded], pos)
    })
}

/// The partial block at the end after appending `parts` at `at`, where `tail` was the one
/// before (the bytes from the start of `at`'s block up to `at`).
pub fn next_tail(at: u64, tail: &[u8], parts: &[Bytes]) -> Vec<u8> {
    let added: u64 = parts.iter().map(|p| p.len() as u64).sum();
    let end = at + added;
    let keep = (end % BLOCK as u64) as usize;
    let mut out = Vec::with_capacity(keep);
    if (keep as u64) > added {
        // Still in the old tail's block.
        out.extend_from_slice(tail);
    }
    let mut skip = added.saturating_sub(keep as u64);
    for p in parts {
        let n = (p.len() as u64).min(skip) as usize;
        skip -= n as u64;
        out.extend_from_slice(&p[n..]);
    }
    out
}

/// Writes all of `buf` (whole blocks) at `at`, going on after short writes of whole blocks.
fn pwrite_all(file: &File, mut buf: &[u8], mut at: u64) -> io::Result<()> {
    while !buf.is_empty() {
        match file.write_at(buf, at) {
            Ok(0) => {
                return Err(io::Error::new(
                    io::ErrorKind::WriteZero,
                    "O_DIRECT write wrote 0 bytes",
                ))
            }
            Ok(n) if n % BLOCK != 0 => {
                return Err(io::Error::other(format!(
                    "O_DIRECT write stopped after {n} bytes, inside a block"
                )))
            }
            Ok(n) => {
                buf = &buf[n..];
                at += n as u64;
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp(name: &str) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("kelp-direct-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        dir.join("f")
    }

    #[test]
    fn aligned_buffers_are_zeroed_and_aligned_as_o_direct_and_huge_pages_need() {
        for len in [BLOCK, 3 * BLOCK, HUGE, 2 * HUGE] {
            let mut a = Aligned::new(len);
            assert_eq!(a.bytes().len(), len);
            assert_eq!(a.bytes().as_ptr() as usize % BLOCK, 0);
            if len % HUGE == 0 {
                assert_eq!(a.bytes().as_ptr() as usize % HUGE, 0, "{len}");
            }
            assert!(a.bytes().iter().all(|&b| b == 0));
            // All of it is writable (the trimmed ends of the mapping were not the buffer).
            a.bytes_mut().fill(7);
            assert!(a.bytes().iter().all(|&b| b == 7));
        }
    }

    #[test]
    fn direct_and_buffered_appends_of_any_size_read_back_whole_with_only_zero_padding_after() {
        let path = temp("sizes");
        std::fs::write(&path, b"").unwrap();
        let Some(file) = open(&path).unwrap() else {
            // A file system without O_DIRECT: nothing here to test.
            return;
        };
        let buffered = OpenOptions::new().write(true).open(&path).unwrap();
        let mut want = Vec::new();
        let mut tail = Vec::new();
        // Sizes crossing blocks and the stage, with empty parts among them.
        for (i, size) in [1usize, 4095, 1, 5000, 0, STAGE + 7, 3 * BLOCK, 123]
            .into_iter()
            .enumerate()
        {
            let part = Bytes::from(vec![(i as u8).wrapping_mul(37) | 1; size]);
            let at = want.len() as u64;
            let parts = [part.clone(), Bytes::new()];
            if i % 3 == 2 {
                // Appends through the page cache in between move the tail as well.
                buffered.write_all_at(&part, at).unwrap();
            } else {
                write(&file, at, &tail, &parts).unwrap();
            }
            tail = next_tail(at, &tail, &parts);
            want.extend_from_slice(&part);
            assert_eq!(tail, want[want.len() - want.len() % BLOCK..]);
        }
        let got = std::fs::read(&path).unwrap();
        assert_eq!(got.len() % BLOCK, 0);
        assert_eq!(&got[..want.len()], &want[..]);
        assert!(got[want.len()..].iter().all(|&b| b == 0));
        let reader = File::open(&path).unwrap();
        assert_eq!(read_tail(&reader, want.len() as u64).unwrap(), tail);
        std::fs::remove_dir_all(path.parent().unwrap()).unwrap();
    }
}
