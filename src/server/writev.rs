//! Gather writes of response slices to a glommio TCP stream.
//!
//! glommio writes one buffer at a time; a Fetch response is many slices (header pieces and
//! cached batches). Here they go out with one non-blocking `sendmsg` per attempt, and only
//! when the socket is full do we fall back to glommio's write, which waits for room.

use std::io;
use std::os::unix::io::AsRawFd;

use bytes::Bytes;
use futures_lite::AsyncWriteExt;
use glommio::net::TcpStream;

/// Most iovecs passed per call (Linux's IOV_MAX is 1024).
const MAX_IOV: usize = 512;

/// Writes every byte of `chunks`, in order.
pub async fn write_all(stream: &mut TcpStream, chunks: &[Bytes]) -> io::Result<()> {
    let mut idx = 0usize; // first chunk not fully written
    let mut off = 0usize; // bytes of chunks[idx] already written
    while idx < chunks.len() {
        if chunks[idx].len() == off {
            idx += 1;
            off = 0;
            continue;
        }
        let iov: Vec<libc::iovec> = chunks[idx..]
            .iter()
            .take(MAX_IOV)
            .enumerate()
            .filter(|(_, c)| !c.is_empty())
            .map(|(i, c)| {
                let skip = if i == 0 { off } else { 0 };
                libc::iovec {
                    iov_base: c[skip..].as_ptr() as *mut libc::c_void,
                    iov_len: c.len() - skip,
                }
            })
            .collect();
        // SAFETY: the iovecs point into `chunks`, which outlive the call; msghdr is zeroed
        // apart from the iovec fields, as sendmsg on a connected socket requires.
        let n = unsafe {
            let mut msg: libc::msghdr = std::mem::zeroed();
            msg.msg_iov = iov.as_ptr() as *mut libc::iovec;
            msg.msg_iovlen = iov.len() as _;
            libc::sendmsg(
                stream.as_raw_fd(),
                &msg,
                libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL,
            )
        };
        let mut written = if n >= 0 {
            n as usize
        } else {
            let err = io::Error::last_os_error();
            match err.kind() {
                io::ErrorKind::WouldBlock => {
                    // Socket full: let glommio wait for room, writing part of the current chunk.
                    stream.write(&chunks[idx][off..]).await?
                }
                io::ErrorKind::Interrupted => 0,
                _ => return Err(err),
            }
        };
        while written > 0 && idx < chunks.len() {
            let left = chunks[idx].len() - off;
            if written >= left {
                written -= left;
                idx += 1;
                off = 0;
            } else {
                off += written;
                written = 0;
            }
        }
    }
    Ok(())
}
