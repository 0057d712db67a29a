//! Size and free space of a file system (statvfs): read by the log's DescribeLogDirs answer
//! and by `/metrics`, which must not depend on each other. Calls only libc.

use std::path::Path;

/// (size, space available to an unprivileged writer) of the file system holding `dir`, in
/// bytes; None when statvfs fails (no such directory).
pub fn file_system(dir: &Path) -> Option<(i64, i64)> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(dir.as_os_str().as_bytes()).ok()?;
    // SAFETY: statvfs is plain integers, for which all zeroes is a valid value.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: `c` is a NUL-terminated path and `st` a writable statvfs.
    if unsafe { libc::statvfs(c.as_ptr(), &mut st) } != 0 {
        return None;
    }
    let block = st.f_frsize as u64;
    let total = i64::try_from(st.f_blocks as u64 * block).ok()?;
    let usable = i64::try_from(st.f_bavail as u64 * block).ok()?;
    Some((total, usable))
}
