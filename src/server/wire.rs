//! The byte stream a client connection runs over: plain TCP, where responses go out as
//! gather writes straight from the cache ([`super::writev`]), or TLS over TCP, where rustls
//! encrypts them (no anchor keeps zero-copy with TLS: the bytes are copied into records).
//! Called by [`super::connection`]; calls only the socket and rustls.

use std::future::Future;
use std::io;
use std::mem::MaybeUninit;
use std::os::unix::io::{AsRawFd, RawFd};

use bytes::Bytes;
use futures_lite::{AsyncRead, AsyncWrite, AsyncWriteExt};
use glommio::net::TcpStream;

use super::read_buffer::RecvUninit;

/// Largest TLS record's payload: small response pieces are gathered up to this before they
/// go to rustls, so a Fetch of many small batches does not become many small records.
const RECORD: usize = 16 * 1024;

/// A connection's transport.
pub trait Wire: AsyncRead + AsyncWrite + RecvUninit + Unpin {
    /// Writes every byte of `chunks`, in order, and pushes them out.
    fn write_chunks<'a>(
        &'a mut self,
        chunks: &'a [Bytes],
    ) -> impl Future<Output = io::Result<()>> + 'a;

    /// The socket underneath (socket options, shutdown).
    fn fd(&self) -> RawFd;
}

impl Wire for TcpStream {
    fn write_chunks<'a>(
        &'a mut self,
        chunks: &'a [Bytes],
    ) -> impl Future<Output = io::Result<()>> + 'a {
        super::writev::write_all(self, chunks)
    }

    fn fd(&self) -> RawFd {
        self.as_raw_fd()
    }
}

impl RecvUninit for TcpStream {
    fn recv_uninit(&mut self, dst: &mut [MaybeUninit<u8>]) -> Option<io::Result<usize>> {
        // glommio reads the socket with the same non-blocking recv (and only arms a readiness
        // poll when it finds nothing), so bytes taken here are never expected by it.
        recv_nowait(self.as_raw_fd(), dst)
    }

    fn can_recv_uninit(&self) -> bool {
        true
    }
}

/// rustls decrypts into the caller's buffer through `AsyncRead` only.
impl RecvUninit for futures_rustls::server::TlsStream<TcpStream> {}

impl Wire for futures_rustls::server::TlsStream<TcpStream> {
    async fn write_chunks(&mut self, chunks: &[Bytes]) -> io::Result<()> {
        let mut small = Vec::with_capacity(RECORD);
        for c in chunks {
            if small.len() + c.len() > RECORD && !small.is_empty() {
                self.write_all(&small).await?;
                small.clear();
            }
            if c.len() >= RECORD {
                self.write_all(c).await?;
            } else {
                small.extend_from_slice(c);
            }
        }
        if !small.is_empty() {
            self.write_all(&small).await?;
        }
        self.flush().await
    }

    fn fd(&self) -> RawFd {
        self.get_ref().0.as_raw_fd()
    }
}

/// `recv(2)` of what socket `fd` holds into `dst`, without waiting: `None` if it holds nothing.
fn recv_nowait(fd: RawFd, dst: &mut [MaybeUninit<u8>]) -> Option<io::Result<usize>> {
    loop {
        // SAFETY: `dst` is writable memory of `dst.len()` bytes; the kernel writes at most
        // that many and reports how many.
        let n = unsafe {
            libc::recv(
                fd,
                dst.as_mut_ptr().cast::<libc::c_void>(),
                dst.len(),
                libc::MSG_DONTWAIT,
            )
        };
        if n >= 0 {
            return Some(Ok(n as usize));
        }
        let e = io::Error::last_os_error();
        match e.kind() {
            io::ErrorKind::Interrupted => continue,
            io::ErrorKind::WouldBlock => return None,
            _ => return Some(Err(e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recv_nowait_takes_what_is_there_and_never_waits() {
        use std::io::Write;
        use std::os::fd::AsRawFd;
        let (mut tx, rx) = std::os::unix::net::UnixStream::pair().expect("socket pair");
        let mut room = vec![MaybeUninit::<u8>::uninit(); 16];
        assert!(
            recv_nowait(rx.as_raw_fd(), &mut room).is_none(),
            "nothing there yet"
        );
        tx.write_all(b"hello").expect("write");
        let n = recv_nowait(rx.as_raw_fd(), &mut room)
            .expect("bytes there")
            .expect("recv");
        assert_eq!(n, 5);
        // SAFETY: recv wrote the first 5 bytes.
        let got: Vec<u8> = room[..n]
            .iter()
            .map(|b| unsafe { b.assume_init() })
            .collect();
        assert_eq!(got, b"hello");
        drop(tx);
        assert_eq!(
            recv_nowait(rx.as_raw_fd(), &mut room).map(|r| r.ok()),
            Some(Some(0))
        );
    }
}
