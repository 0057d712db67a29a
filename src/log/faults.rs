//! Fault injection for the log's file I/O, compiled into test builds only: release builds
//! have neither this module nor any call into it.
//!
//! [`super::appender`] routes every file creation, write, truncation and fdatasync through
//! here. Rules are process-wide and keyed by directory: unit tests run on parallel threads and
//! the writes run on glommio's blocking-pool threads, so a thread-local would miss them, while
//! each test's own temporary directory keeps its rules away from every other test's files.
//!
//! Besides failing calls, this models what stable storage holds, so a test can cut the power
//! ([`power_cut`]) and check what recovery finds. A file's bytes are durable once an fdatasync
//! after their write succeeded. A failed fdatasync behaves as on Linux ("fsyncgate"): the bytes
//! it should have written stay readable, but the kernel forgets they were dirty, so a later
//! fdatasync reports success without writing them; only writing them again makes them
//! durable. Directory fsyncs are neither failed nor modelled.
//!
//! A test elsewhere in the crate points a rule at a partition's directory (or any parent of
//! it, such as the data directory):
//!
//! ```ignore
//! crate::log::faults::fill_disk(&data_dir, 0); // every write under it now fails with ENOSPC
//! // ... produce, expect KAFKA_STORAGE_ERROR ...
//! crate::log::faults::clear(&data_dir);
//! ```

use std::collections::HashMap;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard, PoisonError};

use bytes::Bytes;

/// What a failing write does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteFault {
    /// Nothing reaches the file; the write reports EIO.
    Eio,
    /// The first `n` bytes reach the file, then the write reports ENOSPC.
    Torn(u64),
}

/// What a failing fdatasync does besides reporting EIO.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SyncFault {
    /// The unsynced bytes stay readable (the page cache keeps them, as ext4 does) but are
    /// lost at a power cut unless written again.
    Eio,
    /// The kernel also dropped the pages: the unsynced bytes read back as zeros.
    EioDroppingPages,
}

#[derive(Debug, Clone, Copy)]
enum Op {
    Write(WriteFault),
    Sync(SyncFault),
    Create,
}

#[derive(Debug)]
struct Rule {
    op: Op,
    /// Matching calls still to let through before failing.
    skip: usize,
    /// Matching calls still to fail.
    times: usize,
}

/// Half-open byte ranges of one file.
#[derive(Debug, Default, Clone)]
struct Ranges(Vec<(u64, u64)>);

impl Ranges {
    fn add(&mut self, from: u64, to: u64) {
        if from >= to {
            return;
        }
        self.0.push((from, to));
        self.0.sort_unstable();
        let mut merged: Vec<(u64, u64)> = Vec::with_capacity(self.0.len());
        for &(a, b) in &self.0 {
            match merged.last_mut() {
                Some(last) if a <= last.1 => last.1 = last.1.max(b),
                _ => merged.push((a, b)),
            }
        }
        self.0 = merged;
    }

    fn remove(&mut self, from: u64, to: u64) {
        let mut out = Vec::with_capacity(self.0.len() + 1);
        for &(a, b) in &self.0 {
            if b <= from || a >= to {
                out.push((a, b));
                continue;
            }
            if a < from {
                out.push((a, from));
            }
            if b > to {
                out.push((to, b));
            }
        }
        self.0 = out;
    }

    fn take(&mut self) -> Vec<(u64, u64)> {
        std::mem::take(&mut self.0)
    }
}

/// What stable storage lacks of one file.
#[derive(Debug, Default)]
struct FileState {
    /// Written since the last fdatasync that succeeded.
    dirty: Ranges,
    /// Forgotten by a failed fdatasync: no later one writes them.
    lost: Ranges,
}

/// Rules and file models under one directory.
#[derive(Debug)]
struct Dir {
    path: PathBuf,
    rules: Vec<Rule>,
    /// Bytes writes may still add (a disk filling up), if limited.
    free: Option<u64>,
    injected: usize,
    files: HashMap<PathBuf, FileState>,
}

static DIRS: Mutex<Vec<Dir>> = Mutex::new(Vec::new());

fn dirs() -> MutexGuard<'static, Vec<Dir>> {
    // A test that panicked while holding the lock must not fail every other test.
    DIRS.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The entry for `dir`, created if needed.
fn entry<'a>(all: &'a mut Vec<Dir>, dir: &Path) -> &'a mut Dir {
    let i = match all.iter().position(|d| d.path == dir) {
        Some(i) => i,
        None => {
            all.push(Dir {
                path: dir.to_path_buf(),
                rules: Vec::new(),
                free: None,
                injected: 0,
                files: HashMap::new(),
            });
            all.len() - 1
        }
    };
    &mut all[i]
}

/// The entry whose directory holds `path` (the deepest, if several do).
fn owner<'a>(all: &'a mut [Dir], path: &Path) -> Option<&'a mut Dir> {
    all.iter_mut()
        .filter(|d| path.starts_with(&d.path))
        .max_by_key(|d| d.path.as_os_str().len())
}

fn add_rule(dir: &Path, op: Op, after: usize, times: usize) {
    let mut all = dirs();
    entry(&mut all, dir).rules.push(Rule {
        op,
        skip: after,
        times,
    });
}

/// Starts modelling the files under `dir` for [`power_cut`] (every rule does too). Files
/// written before are taken as durable.
pub fn track(dir: &Path) {
    let mut all = dirs();
    entry(&mut all, dir);
}

/// Lets the next `after` writes under `dir` through, then fails `times` of them.
pub fn fail_writes(dir: &Path, after: usize, times: usize, fault: WriteFault) {
    add_rule(dir, Op::Write(fault), after, times);
}

/// Lets the next `after` fdatasyncs under `dir` through, then fails `times` of them.
pub fn fail_syncs(dir: &Path, after: usize, times: usize, fault: SyncFault) {
    add_rule(dir, Op::Sync(fault), after, times);
}

/// Lets the next `after` file creations under `dir` through, then fails `times` of them.
pub fn fail_creates(dir: &Path, after: usize, times: usize) {
    add_rule(dir, Op::Create, after, times);
}

/// A disk with `free` bytes left for writes under `dir`: the write that would pass it writes
/// what fits and reports ENOSPC (a torn write), and every later one fails, until [`clear`].
pub fn fill_disk(dir: &Path, free: u64) {
    let mut all = dirs();
    entry(&mut all, dir).free = Some(free);
}

/// Drops the rules and the disk limit of `dir`; its files stay modelled.
pub fn clear(dir: &Path) {
    let mut all = dirs();
    if let Some(d) = all.iter_mut().find(|d| d.path == dir) {
        d.rules.clear();
        d.free = None;
    }
}

/// Forgets `dir` entirely (end of a test).
pub fn forget(dir: &Path) {
    dirs().retain(|d| d.path != dir);
}

/// How many faults were injected under `dir` so far: a test checks its fault really fired.
pub fn injected(dir: &Path) -> usize {
    dirs()
        .iter()
        .find(|d| d.path == dir)
        .map_or(0, |d| d.injected)
}

/// Leaves the files under `dir` as a power cut would: every byte that is not on stable
/// storage (written since its file's last good fdatasync, or forgotten by a failed one) reads
/// back as zeros. Lengths stay; directory entries are not modelled.
pub fn power_cut(dir: &Path) -> io::Result<()> {
    use std::os::unix::fs::FileExt;
    let mut all = dirs();
    let Some(d) = all.iter_mut().find(|d| d.path == dir) else {
        return Ok(());
    };
    for (path, f) in d.files.iter_mut() {
        let mut gone = f.dirty.take();
        gone.extend(f.lost.take());
        if gone.is_empty() {
            continue;
        }
        let file = match std::fs::OpenOptions::new().write(true).open(path) {
            Ok(file) => file,
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => return Err(e),
        };
        let len = file.metadata()?.len();
        for (a, b) in gone {
            let b = b.min(len);
            if a < b {
                file.write_all_at(&vec![0u8; (b - a) as usize], a)?;
            }
        }
    }
    Ok(())
}

/// The rule deciding the next `op`-like call on `path`, after counting it.
fn fire(d: &mut Dir, matches: impl Fn(&Op) -> bool) -> Option<Op> {
    for r in d.rules.iter_mut().filter(|r| matches(&r.op)) {
        if r.skip > 0 {
            r.skip -= 1;
            return None;
        }
        if r.times > 0 {
            r.times -= 1;
            d.injected += 1;
            return Some(r.op);
        }
    }
    None
}

fn eio(what: &str) -> io::Error {
    io::Error::other(format!("injected EIO ({what})"))
}

fn enospc() -> io::Error {
    io::Error::from_raw_os_error(libc::ENOSPC)
}

/// The first `n` bytes of `parts`.
fn prefix(parts: &[Bytes], mut n: u64) -> Vec<Bytes> {
    let mut out = Vec::new();
    for p in parts {
        if n == 0 {
            break;
        }
        let take = (p.len() as u64).min(n) as usize;
        out.push(p.slice(..take));
        n -= take as u64;
    }
    out
}

/// A write of `parts` at `at` to `path`, done by `write` unless a rule fails it.
pub(super) fn write(
    path: &Path,
    at: u64,
    parts: &[Bytes],
    write: impl FnOnce(&[Bytes]) -> io::Result<()>,
) -> io::Result<()> {
    let len: u64 = parts.iter().map(|p| p.len() as u64).sum();
    // Decided under the lock, done outside it: other tests' writes must not wait on this one.
    let (keep, err) = {
        let mut all = dirs();
        let Some(d) = owner(&mut all, path) else {
            drop(all);
            return write(parts);
        };
        match fire(d, |op| matches!(op, Op::Write(_))) {
            Some(Op::Write(WriteFault::Eio)) => (0, Some(eio("write"))),
            Some(Op::Write(WriteFault::Torn(n))) => (n.min(len), Some(enospc())),
            _ => match d.free {
                Some(free) if free < len => {
                    d.injected += 1;
                    d.free = Some(0);
                    (free, Some(enospc()))
                }
                Some(free) => {
                    d.free = Some(free - len);
                    (len, None)
                }
                None => (len, None),
            },
        }
    };
    if keep > 0 {
        write(&prefix(parts, keep))?;
        let mut all = dirs();
        if let Some(d) = owner(&mut all, path) {
            let f = d.files.entry(path.to_path_buf()).or_default();
            f.dirty.add(at, at + keep);
            // Written again: the next good fdatasync writes these bytes.
            f.lost.remove(at, at + keep);
        }
    }
    match err {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

/// An fdatasync of `path`, done by `sync` unless a rule fails it.
pub(super) fn sync(path: &Path, sync: impl FnOnce() -> io::Result<()>) -> io::Result<()> {
    let fault = {
        let mut all = dirs();
        match owner(&mut all, path) {
            None => None,
            Some(d) => fire(d, |op| matches!(op, Op::Sync(_))).map(|op| match op {
                Op::Sync(f) => f,
                _ => SyncFault::Eio,
            }),
        }
    };
    let Some(fault) = fault else {
        sync()?;
        let mut all = dirs();
        if let Some(d) = owner(&mut all, path) {
            if let Some(f) = d.files.get_mut(path) {
                f.dirty.take();
            }
        }
        return Ok(());
    };
    let forgotten = {
        let mut all = dirs();
        match owner(&mut all, path).and_then(|d| d.files.get_mut(path)) {
            None => Vec::new(),
            Some(f) => {
                let dirty = f.dirty.take();
                for &(a, b) in &dirty {
                    f.lost.add(a, b);
                }
                dirty
            }
        }
    };
    if fault == SyncFault::EioDroppingPages {
        use std::os::unix::fs::FileExt;
        let file = std::fs::OpenOptions::new().write(true).open(path)?;
        for (a, b) in forgotten {
            file.write_all_at(&vec![0u8; (b - a) as usize], a)?;
        }
    }
    Err(eio("fdatasync"))
}

/// A creation (or truncation to empty) of `path`, done by `create` unless a rule fails it.
pub(super) fn create<T>(path: &Path, create: impl FnOnce() -> io::Result<T>) -> io::Result<T> {
    {
        let mut all = dirs();
        if let Some(d) = owner(&mut all, path) {
            if fire(d, |op| matches!(op, Op::Create)).is_some() {
                return Err(eio("create"));
            }
        }
    }
    let out = create()?;
    let mut all = dirs();
    if let Some(d) = owner(&mut all, path) {
        d.files.remove(path);
    }
    Ok(out)
}

/// A truncation of `path` to `len` bytes, done by `set_len`.
pub(super) fn set_len(
    path: &Path,
    len: u64,
    set_len: impl FnOnce() -> io::Result<()>,
) -> io::Result<()> {
    set_len()?;
    let mut all = dirs();
    if let Some(f) = owner(&mut all, path).and_then(|d| d.files.get_mut(path)) {
        f.dirty.remove(len, u64::MAX);
        f.lost.remove(len, u64::MAX);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_merge_and_split() {
        let mut r = Ranges::default();
        r.add(10, 20);
        r.add(0, 5);
        r.add(18, 30);
        r.add(5, 5);
        assert_eq!(r.0, vec![(0, 5), (10, 30)]);
        r.remove(12, 14);
        assert_eq!(r.0, vec![(0, 5), (10, 12), (14, 30)]);
        r.remove(0, 11);
        assert_eq!(r.0, vec![(11, 12), (14, 30)]);
    }

    #[test]
    fn rules_skip_then_fail_then_stop() {
        let dir = std::env::temp_dir().join(format!("kelp-faults-{}", uuid::Uuid::new_v4()));
        let f = dir.join("f");
        fail_writes(&dir, 1, 2, WriteFault::Eio);
        let mut ran = 0;
        let mut call = || {
            write(&f, 0, &[Bytes::from_static(b"x")], |_| {
                ran += 1;
                Ok(())
            })
        };
        assert!(call().is_ok());
        assert!(call().is_err());
        assert!(call().is_err());
        assert!(call().is_ok());
        assert_eq!(ran, 2);
        assert_eq!(injected(&dir), 2);
        // Other directories are not touched.
        let other = std::env::temp_dir().join("kelp-faults-elsewhere");
        assert!(write(&other.join("f"), 0, &[], |_| Ok(())).is_ok());
        forget(&dir);
    }

    #[test]
    fn a_full_disk_tears_the_write_that_crosses_it() {
        let dir = std::env::temp_dir().join(format!("kelp-faults-{}", uuid::Uuid::new_v4()));
        let f = dir.join("f");
        fill_disk(&dir, 5);
        let parts = [Bytes::from_static(b"abc"), Bytes::from_static(b"defg")];
        let mut got = Vec::new();
        let e = write(&f, 0, &parts, |p| {
            got = p.to_vec();
            Ok(())
        })
        .unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::ENOSPC));
        assert_eq!(
            got,
            vec![Bytes::from_static(b"abc"), Bytes::from_static(b"de")]
        );
        assert!(write(&f, 5, &parts, |_| panic!("nothing fits")).is_err());
        clear(&dir);
        assert!(write(&f, 5, &parts, |_| Ok(())).is_ok());
        forget(&dir);
    }
}
