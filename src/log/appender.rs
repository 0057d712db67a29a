//! Append-only file writes, done on the shard's blocking thread pool.
//!
//! Why not glommio's DMA files: with a DMA (O_DIRECT) write or an fdatasync in flight,
//! glommio 0.9's executor never parks — it loops through its reactor (a timer armed and
//! cancelled per turn) until the I/O completes, and the kernel runs an extending O_DIRECT
//! write on ext4 in an io-wq worker pinned to the same core as that spinning executor.
//! Measured with acks=all on one partition: the shard core at 100 % for ~250 writes+syncs
//! per second. A plain `pwritev` into the page cache plus `fdatasync`, on a pool thread,
//! lets the executor sleep until the pool wakes it (docs/storage.md has the figures). On the
//! test VM's newer kernel (6.18) DMA writes park again but cost the pool's CPU, no less
//! (perf/results/tries-dfd380c/notes.md), so the pool stays.
//!
//! Writes only ever go past the logical end (or, after a failed fdatasync, write the same
//! bytes again), so a write torn by a crash can damage nothing written before; recovery cuts
//! a torn tail, and a write that fails is cut off at once. Used by segments, index files and
//! the group offsets log; calls std, libc and glommio's `spawn_blocking`, and in test builds
//! routes every file call through `faults`.

use std::cell::Cell;
use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use glommio::io::BufferedFile;

/// O_DIRECT's block, as file offsets count it.
const BLOCK: u64 = super::direct::BLOCK as u64;

/// A file opened for appending at a known logical length.
pub struct Appender {
    file: SyncHandle,
    len: u64,
    /// Present when appends bypass the page cache ([`super::direct`]).
    direct: Option<Direct>,
    /// The file may hold bytes of a failed write past `len`: cutting them failed too, so the
    /// next append or trim cuts them first.
    dirty_tail: bool,
}

/// A shared handle to an appended file, for fdatasync while the appender is out writing.
#[derive(Clone)]
pub struct SyncHandle(Arc<Handle>);

/// The O_DIRECT descriptor of an appended file and the partial block at its logical end.
struct Direct {
    file: Arc<File>,
    /// The file's bytes from the start of the block holding the logical end up to it.
    tail: Vec<u8>,
    /// Where the zeros written ahead of the logical end stop ([`super::prealloc`]); at or
    /// below the logical end when there are none.
    reserved: u64,
    /// Zeros being written ahead by the pool.
    extending: Option<Extension>,
    /// An extension failed (a full disk, say): this file gets no more.
    no_room: bool,
    /// The logical length, published: the file's length counts the zeros.
    logical: super::prealloc::Logical,
    /// The segment rolls at this length: no zeros past it.
    limit: u64,
}

/// Zeros being written over `from..to` by a pool thread, off the rounds' path.
struct Extension {
    from: u64,
    to: u64,
    done: Rc<Cell<Option<io::Result<()>>>>,
    task: glommio::task::JoinHandle<()>,
}

impl Direct {
    fn new(file: File, tail: Vec<u8>, path: &Path, len: u64) -> Direct {
        Direct {
            file: Arc::new(file),
            tail,
            reserved: len,
            extending: None,
            no_room: false,
            logical: super::prealloc::Logical::new(path, len),
            limit: u64::MAX / 2,
        }
    }

    /// Takes the outcome of the extension in flight if it ended; waits for it first if
    /// `wait`, or if it is writing within `from..to` (a write there must not race it).
    async fn settle(&mut self, path: &Path, from: u64, to: u64, wait: bool) {
        let Some(ext) = &mut self.extending else {
            return;
        };
        let overlaps = from < ext.to && ext.from < to;
        let outcome = match ext.done.take() {
            Some(r) => r,
            None if wait || overlaps => {
                (&mut ext.task).await;
                ext.done
                    .take()
                    .unwrap_or_else(|| Err(io::Error::other("the extension's task was dropped")))
            }
            None => return,
        };
        let (ext_from, ext_to) = (ext.from, ext.to);
        self.extending = None;
        match outcome {
            // Counted only if it continues the room known to be zeros: a cut since then
            // (a failed write, a trim) left a hole before it.
            Ok(()) if ext_from <= self.reserved.next_multiple_of(BLOCK) => {
                self.reserved = self.reserved.max(ext_to)
            }
            Ok(()) => {}
            Err(e) => {
                self.no_room = true;
                tracing::warn!(path = %path.display(), error = %e,
                    "could not write zeros ahead of the active segment's end; its rounds grow the file instead");
            }
        }
    }

    /// Starts writing more zeros ahead of `len` if the room left is short.
    fn extend(&mut self, path: &Path, len: u64) {
        if self.no_room || self.extending.is_some() {
            return;
        }
        let Some((from, to)) = super::prealloc::next_extension(len, self.reserved, self.limit)
        else {
            return;
        };
        let done = Rc::new(Cell::new(None));
        let (file, out) = (self.file.clone(), done.clone());
        let p = path.to_path_buf();
        let task = glommio::spawn_local(async move {
            let r = blocking(move || super::prealloc::fill(&file, from, to))
                .await
                .map_err(with_path("writing zeros ahead in", &p));
            out.set(Some(r));
        })
        .detach();
        self.extending = Some(Extension {
            from,
            to,
            done,
            task,
        });
    }
}

struct Handle {
    file: File,
    path: PathBuf,
}

/// Runs `f` on the current executor's blocking thread pool.
async fn blocking<R: Send + 'static>(f: impl FnOnce() -> R + Send + 'static) -> R {
    glommio::executor().spawn_blocking(f).await
}

/// Adds what was done to which file to an error. Formats only when there is one: it wraps
/// every write and fdatasync, and its two strings per round were 8 % of the allocations that
/// contended on malloc's lock (perf/results/allocs-ad39327).
fn with_path<'a>(what: &'a str, path: &'a Path) -> impl FnOnce(io::Error) -> io::Error + 'a {
    move |e| io::Error::new(e.kind(), format!("{what} {}: {e}", path.display()))
}

impl Appender {
    /// Creates (or truncates) `path` for appending from offset 0.
    pub async fn create(path: &Path) -> io::Result<Appender> {
        let p = path.to_path_buf();
        let file = blocking(move || {
            io_create(&p, || {
                OpenOptions::new()
                    .read(true)
                    .write(true)
                    .create(true)
                    .truncate(true)
                    .open(&p)
            })
        })
        .await
        .map_err(with_path("creating", path))?;
        Ok(Self::with_file(file, path, 0))
    }

    /// Like [`Appender::create`], appending with O_DIRECT where the file system allows it.
    pub async fn create_direct(path: &Path) -> io::Result<Appender> {
        let mut a = Self::create(path).await?;
        a.go_direct().await?;
        Ok(a)
    }

    /// Like [`Appender::open`], appending with O_DIRECT where the file system allows it.
    pub async fn open_direct(path: &Path, len: u64) -> io::Result<Appender> {
        let mut a = Self::open(path, len).await?;
        a.go_direct().await?;
        Ok(a)
    }

    /// Opens the O_DIRECT descriptor and reads the partial block at the logical end.
    async fn go_direct(&mut self) -> io::Result<()> {
        let (h, len) = (self.file.0.clone(), self.len);
        let direct = blocking(move || {
            let Some(file) = super::direct::open(&h.path)? else {
                tracing::info!(path = %h.path.display(),
                    "the file system refuses O_DIRECT; appending through the page cache");
                return Ok(None);
            };
            let tail = super::direct::read_tail(&h.file, len)?;
            Ok::<_, io::Error>(Some((file, tail)))
        })
        .await
        .map_err(with_path("opening for O_DIRECT", &self.file.0.path))?;
        let path = &self.file.0.path;
        self.direct = direct.map(|(file, tail)| Direct::new(file, tail, path, len));
        Ok(())
    }

    /// Opens an existing file to append after its first `len` bytes; whatever lies past them
    /// (a torn tail, an older version's O_DIRECT block padding) is cut off first.
    pub async fn open(path: &Path, len: u64) -> io::Result<Appender> {
        let p = path.to_path_buf();
        let file = blocking(move || {
            let f = OpenOptions::new().read(true).write(true).open(&p)?;
            io_set_len(&f, &p, len)?;
            Ok::<_, io::Error>(f)
        })
        .await
        .map_err(with_path("opening", path))?;
        Ok(Self::with_file(file, path, len))
    }

    fn with_file(file: File, path: &Path, len: u64) -> Appender {
        Appender {
            file: SyncHandle(Arc::new(Handle {
                file,
                path: path.to_path_buf(),
            })),
            len,
            direct: None,
            dirty_tail: false,
        }
    }

    /// The file is full at `limit` bytes (the segment rolls there): zeros written ahead of
    /// the end never go past it.
    pub fn set_room_limit(&mut self, limit: u64) {
        if let Some(d) = &mut self.direct {
            d.limit = limit;
        }
    }

    /// The handle for syncing the file while the appender is busy elsewhere.
    pub fn sync_handle(&self) -> SyncHandle {
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

    /// Writes `parts` after the logical end, with O_DIRECT when the appender was opened for
    /// it, else through the page cache. On error the logical
    /// length is unchanged and whatever part of them reached the file is cut off again: left
    /// there, it would outlive a shorter later append, and a crash would let recovery take
    /// complete batches among it (never acknowledged, at offsets since given to other
    /// batches) for data.
    pub async fn append(&mut self, parts: &[Bytes]) -> io::Result<()> {
        self.append_by(parts, false).await.map(|_| ())
    }

    /// Like [`Appender::append`], then fdatasync in the same trip to the pool (one hand-off
    /// instead of two). `Ok` holds the fdatasync's outcome and duration: the write
    /// itself succeeded.
    pub async fn append_and_sync(
        &mut self,
        parts: &[Bytes],
    ) -> io::Result<(io::Result<()>, Duration)> {
        let synced = self.append_by(parts, true).await?;
        Ok(synced.unwrap_or((Ok(()), Duration::ZERO)))
    }

    async fn append_by(
        &mut self,
        parts: &[Bytes],
        to_sync: bool,
    ) -> io::Result<Option<(io::Result<()>, Duration)>> {
        let added: u64 = parts.iter().map(|p| p.len() as u64).sum();
        if added == 0 {
            return Ok(None);
        }
        let (h, at, cut_first) = (self.file.0.clone(), self.len, self.dirty_tail);
        if let Some(d) = &mut self.direct {
            // The round writes from the start of `at`'s block.
            let from = at - at % BLOCK;
            d.settle(&self.file.0.path, from, at + added, false).await;
            if cut_first {
                d.reserved = d.reserved.min(at);
            }
        }
        // Every round bypasses the page cache when the appender was opened for it, synced or
        // not: acks=1 rounds through it cost 0.98-3.15 CPU-s/GB (the bad runs copying into
        // cache pages the VM host had taken back), with O_DIRECT 0.98-1.42
        // (perf/results/in-flight-256/notes.md).
        let direct = self
            .direct
            .as_ref()
            .map(|d| (d.file.clone(), d.tail.clone()));
        let owned = parts.to_vec();
        let (res, clean, refused, synced) = blocking(move || {
            let parts = owned;
            if cut_first {
                if let Err(e) = io_set_len(&h.file, &h.path, at) {
                    return (Err(e), false, false, None);
                }
            }
            // O_DIRECT refused an alignment: nothing was written, the page cache takes it.
            let mut refused = false;
            let res = io_write_by(&h.path, at, &parts, |p| match &direct {
                Some((file, tail)) => match super::direct::write(file, at, tail, p) {
                    Err(e) if super::direct::refused(&e) => {
                        refused = true;
                        pwritev_all(&h.file, at, p)
                    }
                    other => other,
                },
                None => pwritev_all(&h.file, at, p),
            });
            match res {
                Ok(()) => {
                    let synced = to_sync.then(|| {
                        let started = Instant::now();
                        let r =
                            io_sync(&h.file, &h.path).map_err(with_path("fdatasync of", &h.path));
                        (r, started.elapsed())
                    });
                    (Ok(()), true, refused, synced)
                }
                Err(e) => match io_set_len(&h.file, &h.path, at) {
                    Ok(()) => (Err(e), true, refused, None),
                    Err(cut) => {
                        let why = format!("{e}; cutting it off failed too: {cut}");
                        (Err(io::Error::new(e.kind(), why)), false, refused, None)
                    }
                },
            }
        })
        .await;
        self.dirty_tail = !clean;
        if refused {
            tracing::warn!(path = %self.file.0.path.display(),
                "an O_DIRECT write was refused; appending through the page cache");
            self.direct = None;
        }
        if res.is_ok() {
            if let Some(d) = &mut self.direct {
                // The next round starts from the new partial last block.
                d.tail = super::direct::next_tail(self.len, &d.tail, parts);
            }
        }
        let path = &self.file.0.path;
        if res.is_err() || !clean {
            if let Some(d) = &mut self.direct {
                // The failed write was cut off with whatever room there was past it.
                d.reserved = d.reserved.min(at);
            }
        }
        res.map_err(with_path("writing", path))?;
        self.len += added;
        if let Some(d) = &mut self.direct {
            d.logical.set(self.len);
            // Still direct, so this round was (a refused one dropped `direct` above): its
            // last block went out whole and the file reaches its end.
            d.reserved = d.reserved.max(self.len.next_multiple_of(BLOCK));
            d.extend(path, self.len);
        }
        Ok(synced)
    }

    /// fdatasync: everything appended so far is on stable storage.
    pub async fn sync(&self) -> io::Result<()> {
        self.file.fdatasync().await
    }

    /// Cuts anything past the logical length (bytes of a failed write) so the file size is
    /// the logical length, for files that are complete: sealed segments, index files.
    pub async fn trim(&mut self) -> io::Result<()> {
        let (h, len) = (self.file.0.clone(), self.len);
        if let Some(d) = &mut self.direct {
            // Zeros still being written would land past the cut.
            d.settle(&h.path, 0, u64::MAX, true).await;
        }
        blocking(move || match h.file.metadata()?.len() == len {
            true => Ok(()),
            false => io_set_len(&h.file, &h.path, len),
        })
        .await
        .map_err(with_path("truncating", &self.file.0.path))?;
        self.dirty_tail = false;
        if let Some(d) = &mut self.direct {
            d.reserved = len;
        }
        Ok(())
    }
}

impl SyncHandle {
    /// fdatasync of the file, on the blocking pool.
    pub async fn fdatasync(&self) -> io::Result<()> {
        let h = self.0.clone();
        blocking(move || io_sync(&h.file, &h.path))
            .await
            .map_err(with_path("fdatasync of", &self.0.path))
    }

    /// Writes `data` again at `at`, inside what was appended: after a failed fdatasync, the
    /// kernel may have stopped counting those pages as dirty, so a later fdatasync would not
    /// write them unless they are written again.
    pub async fn rewrite(&self, at: u64, data: Bytes) -> io::Result<()> {
        let h = self.0.clone();
        blocking(move || io_write(&h.file, &h.path, at, &[data]))
            .await
            .map_err(with_path("rewriting", &self.0.path))
    }
}

/// fsync of a directory (entries created or renamed in it survive a crash), on the pool.
pub async fn sync_dir(dir: &Path) -> io::Result<()> {
    let d = dir.to_path_buf();
    blocking(move || File::open(&d)?.sync_all())
        .await
        .map_err(with_path("syncing directory", dir))
}

// The file calls the log makes, each a plain call in release builds and a call through
// [`super::faults`] in test builds.

#[cfg(not(test))]
fn io_create(_path: &Path, create: impl FnOnce() -> io::Result<File>) -> io::Result<File> {
    create()
}

#[cfg(test)]
fn io_create(path: &Path, create: impl FnOnce() -> io::Result<File>) -> io::Result<File> {
    super::faults::create(path, create)
}

fn io_write(file: &File, path: &Path, at: u64, parts: &[Bytes]) -> io::Result<()> {
    io_write_by(path, at, parts, |p| pwritev_all(file, at, p))
}

/// A write of `parts` at `at` of `path`, done by `write`.
#[cfg(not(test))]
fn io_write_by(
    _path: &Path,
    _at: u64,
    parts: &[Bytes],
    write: impl FnOnce(&[Bytes]) -> io::Result<()>,
) -> io::Result<()> {
    write(parts)
}

#[cfg(test)]
fn io_write_by(
    path: &Path,
    at: u64,
    parts: &[Bytes],
    write: impl FnOnce(&[Bytes]) -> io::Result<()>,
) -> io::Result<()> {
    super::faults::write(path, at, parts, write)
}

#[cfg(not(test))]
fn io_sync(file: &File, _path: &Path) -> io::Result<()> {
    file.sync_data()
}

#[cfg(test)]
fn io_sync(file: &File, path: &Path) -> io::Result<()> {
    super::faults::sync(path, || file.sync_data())
}

#[cfg(not(test))]
fn io_set_len(file: &File, _path: &Path, len: u64) -> io::Result<()> {
    file.set_len(len)
}

#[cfg(test)]
fn io_set_len(file: &File, path: &Path, len: u64) -> io::Result<()> {
    super::faults::set_len(path, len, || file.set_len(len))
}

/// Most iovecs one `pwritev` takes (Linux's IOV_MAX).
const IOV_MAX: usize = 1024;

/// Writes every byte of `parts` at `at`, in as few `pwritev` calls as the kernel allows.
fn pwritev_all(file: &File, mut at: u64, parts: &[Bytes]) -> io::Result<()> {
    let mut idx = 0;
    let mut skip = 0usize; // bytes of parts[idx] already written
    while idx < parts.len() {
        let iov: Vec<libc::iovec> = parts[idx..]
            .iter()
            .take(IOV_MAX)
            .enumerate()
            .map(|(i, p)| {
                let s = if i == 0 { &p[skip..] } else { &p[..] };
                libc::iovec {
                    iov_base: s.as_ptr() as *mut libc::c_void,
                    iov_len: s.len(),
                }
            })
            .collect();
        // SAFETY: every iovec points into a live `Bytes` of `parts` for the whole call.
        let mut n = unsafe { pwritev_at(file, &iov, at)? };
        if n == 0 {
            return Err(io::Error::new(
                io::ErrorKind::WriteZero,
                "pwritev wrote 0 bytes",
            ));
        }
        at += n as u64;
        while n > 0 && idx < parts.len() {
            let left = parts[idx].len() - skip;
            if n >= left {
                n -= left;
                idx += 1;
                skip = 0;
            } else {
                skip += n;
                n = 0;
            }
        }
        // Skip empty parts so the next call never starts with a zero-length iovec only.
        while idx < parts.len() && parts[idx].len() == skip {
            idx += 1;
            skip = 0;
        }
    }
    Ok(())
}

/// One `pwritev` of `iov` at `at` of `file`, again if a signal interrupted it; the bytes
/// written.
///
/// # Safety
///
/// Every iovec must point to at least its length of readable memory for the whole call.
pub(super) unsafe fn pwritev_at(file: &File, iov: &[libc::iovec], at: u64) -> io::Result<usize> {
    let off = libc::off_t::try_from(at)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "file offset too large"))?;
    loop {
        // SAFETY: the caller's promise; `iov` is at most IOV_MAX long.
        let n = unsafe {
            libc::pwritev(
                file.as_raw_fd(),
                iov.as_ptr(),
                iov.len() as libc::c_int,
                off,
            )
        };
        if n >= 0 {
            return Ok(n as usize);
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    async fn durable(a: &mut Appender, part: &Bytes) {
        let (synced, _) = a.append_and_sync(std::slice::from_ref(part)).await.unwrap();
        synced.unwrap();
    }

    /// A new O_DIRECT appender in a directory of its own (directory, file, appender); None
    /// on a file system without O_DIRECT, where there is nothing to test.
    async fn direct_appender(name: &str) -> Option<(PathBuf, PathBuf, Appender)> {
        let dir = std::env::temp_dir().join(format!("kelp-{name}-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("f");
        let a = Appender::create_direct(&path).await.unwrap();
        if a.direct.is_none() {
            std::fs::remove_dir_all(&dir).unwrap();
            return None;
        }
        Some((dir, path, a))
    }

    #[test]
    fn rounds_nobody_syncs_go_direct_too() {
        // acks=1 rounds alone: written with O_DIRECT, so zeros are written ahead of them as
        // well (through the page cache they would grow the file by exactly what they add).
        glommio::LocalExecutor::default().run(async {
            let Some((dir, path, mut a)) = direct_appender("nosync").await else {
                return;
            };
            let mut want = Vec::new();
            for i in 0..10usize {
                let part = Bytes::from(vec![(i as u8) | 1; 30_000 + i * 1_111]);
                a.append(std::slice::from_ref(&part)).await.unwrap();
                want.extend_from_slice(&part);
            }
            let d = a.direct.as_mut().unwrap();
            d.settle(&path, 0, u64::MAX, true).await;
            let size = std::fs::metadata(&path).unwrap().len();
            assert!(
                size >= want.len() as u64 + super::super::prealloc::MIN_STEP / 2,
                "no room ahead: {size} bytes for {}",
                want.len()
            );
            let got = std::fs::read(&path).unwrap();
            assert_eq!(&got[..want.len()], &want[..]);
            assert!(got[want.len()..].iter().all(|&b| b == 0));
            std::fs::remove_dir_all(&dir).unwrap();
        });
    }

    #[test]
    fn durable_rounds_write_zeros_ahead_of_the_end_which_trim_cuts() {
        glommio::LocalExecutor::default().run(async {
            let Some((dir, path, mut a)) = direct_appender("room").await else {
                return;
            };
            let mut want = Vec::new();
            for i in 0..60usize {
                let part = Bytes::from(vec![(i as u8) | 1; 9_000 + i * 777]);
                if i % 7 == 3 {
                    // Rounds nobody syncs at once use the room as well.
                    a.append(std::slice::from_ref(&part)).await.unwrap();
                } else {
                    durable(&mut a, &part).await;
                }
                want.extend_from_slice(&part);
                let d = a.direct.as_mut().unwrap();
                d.settle(&path, 0, u64::MAX, true).await;
                // Room ahead after every round: at least half a step.
                let size = std::fs::metadata(&path).unwrap().len();
                assert_eq!(
                    size,
                    d.reserved.max(want.len().next_multiple_of(4096) as u64)
                );
                let step = (want.len() as u64).clamp(
                    super::super::prealloc::MIN_STEP,
                    super::super::prealloc::MAX_STEP,
                );
                assert!(
                    size >= want.len() as u64 + step / 2 - BLOCK,
                    "round {i}: {size}"
                );
            }
            let got = std::fs::read(&path).unwrap();
            assert_eq!(&got[..want.len()], &want[..]);
            assert!(got[want.len()..].iter().all(|&b| b == 0));
            // More rounds while zeros are still being written: they wait only if they would
            // write where the zeros go.
            for i in 0..20usize {
                let part = Bytes::from(vec![(i as u8) | 0x80; 100_000]);
                durable(&mut a, &part).await;
                want.extend_from_slice(&part);
            }
            a.trim().await.unwrap();
            assert_eq!(std::fs::read(&path).unwrap(), want);
            std::fs::remove_dir_all(&dir).unwrap();
        });
    }

    #[test]
    fn pwritev_all_writes_many_parts_in_order() {
        let dir = std::env::temp_dir().join(format!("kelp-pwritev-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("f");
        let f = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&path)
            .unwrap();
        // More parts than one pwritev takes, with empty ones among them.
        let parts: Vec<Bytes> = (0..2500u32)
            .map(|i| match i % 7 {
                0 => Bytes::new(),
                _ => Bytes::from(vec![(i % 251) as u8; (i % 13) as usize]),
            })
            .collect();
        pwritev_all(&f, 5, &parts).unwrap();
        let mut want = vec![0u8; 5];
        for p in &parts {
            want.extend_from_slice(p);
        }
        assert_eq!(std::fs::read(&path).unwrap(), want);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
