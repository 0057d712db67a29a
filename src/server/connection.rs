//! One client connection: read length-prefixed frames, dispatch each request in order, write
//! each response as a gather write. Bad framing or malformed requests close the connection
//! with a log line; nothing a client sends can take the shard down.

use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::time::Instant;

use bytes::BytesMut;
use futures_lite::AsyncReadExt;
use glommio::net::{TcpListener, TcpStream};

use super::writev;
use crate::api;
use crate::error::ConnectionError;
use crate::metrics::Kind;
use crate::protocol::versions::key;
use crate::protocol::{frame, RequestHeader};
use crate::shard::Shard;

/// Produce requests slower than this are logged (fetches and group joins wait by design).
const SLOW_REQUEST: std::time::Duration = std::time::Duration::from_secs(2);

/// Smallest read issued: enough for many small pipelined requests per syscall.
const READ_CHUNK: usize = 64 * 1024;

thread_local! {
    /// Client sockets open on this shard's thread, so shutdown can close them.
    static OPEN: std::cell::RefCell<std::collections::HashSet<std::os::unix::io::RawFd>> =
        Default::default();
}

/// Shuts down every client socket of this shard (both directions), ending their tasks.
pub fn close_all() {
    OPEN.with(|open| {
        for fd in open.borrow().iter() {
            // SAFETY: the fd is owned by a live connection task on this thread; shutdown(2)
            // neither closes nor invalidates it.
            unsafe { libc::shutdown(*fd, libc::SHUT_RDWR) };
        }
    });
}

/// Accepts connections on this shard's listener until the future is dropped.
pub async fn accept_loop(shard: Rc<Shard>, listener: TcpListener) {
    loop {
        let stream = match listener.accept().await {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!(error = %e, "accept failed");
                glommio::timer::sleep(std::time::Duration::from_millis(10)).await;
                continue;
            }
        };
        let peer = stream
            .peer_addr()
            .map(|a| a.to_string())
            .unwrap_or_default();
        if shard.connections.get() >= shard.config.max_connections_per_core {
            tracing::warn!(%peer, limit = shard.config.max_connections_per_core, "connection limit reached; closing");
            drop(stream);
            continue;
        }
        let _ = stream.set_nodelay(true);
        let fd = std::os::unix::io::AsRawFd::as_raw_fd(&stream);
        OPEN.with(|o| o.borrow_mut().insert(fd));
        let shard = shard.clone();
        glommio::spawn_local(async move {
            shard.connections.set(shard.connections.get() + 1);
            shard.stats.connections.fetch_add(1, Ordering::Relaxed);
            let peer_rc: Rc<str> = Rc::from(peer.as_str());
            match serve(&shard, stream, peer_rc).await {
                Ok(()) => tracing::debug!(%peer, "connection closed by client"),
                Err(ConnectionError::Io(e)) => {
                    tracing::debug!(%peer, error = %e, "connection i/o error")
                }
                Err(e) => tracing::warn!(%peer, shard = shard.id, error = %e, "closing connection"),
            }
            OPEN.with(|o| o.borrow_mut().remove(&fd));
            shard.connections.set(shard.connections.get() - 1);
            shard.stats.connections.fetch_sub(1, Ordering::Relaxed);
        })
        .detach();
    }
}

/// Serves one connection until the client closes it or sends something unservable.
async fn serve(
    shard: &Rc<Shard>,
    mut stream: TcpStream,
    peer: Rc<str>,
) -> Result<(), ConnectionError> {
    let max = shard.config.max_request_bytes;
    let mut buf = BytesMut::with_capacity(READ_CHUNK);
    loop {
        let need = match frame::next_frame(&mut buf, max)? {
            Ok(frame) => {
                handle_frame(shard, &mut stream, &peer, frame).await?;
                continue;
            }
            Err(need) => need,
        };
        // Read at least what completes the frame, in big chunks.
        let have = buf.len();
        let want = (need - have).max(READ_CHUNK);
        buf.resize(have + want, 0);
        let n = stream.read(&mut buf[have..]).await;
        match n {
            Ok(0) => {
                buf.truncate(have);
                if have > 0 {
                    return Err(ConnectionError::Malformed(format!(
                        "client closed mid-frame ({have} of {need} bytes)"
                    )));
                }
                return Ok(());
            }
            Ok(n) => buf.truncate(have + n),
            Err(e) => return Err(e.into()),
        }
    }
}

async fn handle_frame(
    shard: &Rc<Shard>,
    stream: &mut TcpStream,
    peer: &Rc<str>,
    frame: BytesMut,
) -> Result<(), ConnectionError> {
    let started = Instant::now();
    let header = RequestHeader::parse(&frame)?;
    let (api_key, correlation_id) = (header.api_key, header.correlation_id);
    let kind = match header.api_key {
        key::PRODUCE => Kind::Produce,
        key::FETCH => Kind::Fetch,
        _ => Kind::Other,
    };
    if kind == Kind::Produce {
        shard
            .stats
            .produce_bytes
            .fetch_add(frame.len() as u64, Ordering::Relaxed);
    }
    tracing::trace!(
        api = header.api_key,
        version = header.api_version,
        corr = header.correlation_id,
        "request"
    );
    if let Some(resp) = api::dispatch(shard.clone(), header, peer.clone(), frame).await? {
        writev::write_all(stream, &resp.chunks).await?;
        if kind == Kind::Fetch {
            shard
                .stats
                .fetch_bytes
                .fetch_add(resp.len() as u64, Ordering::Relaxed);
        }
    }
    let elapsed = started.elapsed();
    if elapsed > SLOW_REQUEST && kind == Kind::Produce {
        tracing::warn!(
            api = api_key,
            corr = correlation_id,
            ?elapsed,
            shard = shard.id,
            "slow request"
        );
    }
    shard.stats.record(kind, elapsed);
    Ok(())
}
