//! One client connection: read length-prefixed frames, start each request in order, write
//! each response in order as a gather write. Bad framing or malformed requests close the connection
//! with a log line; nothing a client sends can take the shard down.
//!
//! Memory: read buffers grow as bytes arrive (never to a frame's announced length up front);
//! request frames are paid for from the broker-wide [`RequestMemory`]; each frame gets an
//! allocation of its own, so the batches it leaves in the cache pin nothing else; an idle
//! connection keeps a 1 KiB buffer; a client that stops reading is closed after the write
//! timeout, one that sends nothing after the idle timeout.

use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use std::collections::VecDeque;

use bytes::{Bytes, BytesMut};
use futures::channel::oneshot;
use futures::future::Either;
use glommio::net::TcpListener;

use super::budget::{Lease, RequestMemory};
use super::read_buffer::ReadBuffer;
use super::tls::SharedAcceptor;
use super::wire::Wire;
use crate::api;
use crate::auth::principal::PrincipalRules;
use crate::auth::sasl::Sasl;
use crate::auth::Session;
use crate::config::Listener;
use crate::error::ConnectionError;
use crate::metrics::Kind;
use crate::protocol::versions::key;
use crate::protocol::{RequestHeader, Response};
use crate::shard::Shard;
use futures_rustls::TlsAcceptor;

/// Requests slower than this are logged, except those that wait by design: fetches (their
/// reads log themselves), group joins and syncs.
const SLOW_REQUEST: std::time::Duration = std::time::Duration::from_secs(2);

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

/// Accepts connections on one of this shard's sockets of `listener` until the future is
/// dropped; on a TLS listener each connection first completes a handshake with `tls`.
pub async fn accept_loop(
    shard: Rc<Shard>,
    socket: TcpListener,
    memory: Arc<RequestMemory>,
    listener: Arc<Listener>,
    tls: SharedAcceptor,
    sasl: Arc<Sasl>,
    rules: Arc<PrincipalRules>,
) {
    loop {
        let stream = match socket.accept().await {
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
        let _ = stream.set_write_timeout(Some(Duration::from_millis(
            shard.config.write_timeout_ms.max(1),
        )));
        let fd = std::os::unix::io::AsRawFd::as_raw_fd(&stream);
        OPEN.with(|o| o.borrow_mut().insert(fd));
        // The certificate in use now (SIGHUP may have replaced it since the last one).
        let tls = if listener.protocol.tls() {
            tls.load_full()
        } else {
            None
        };
        let (shard, memory, rules) = (shard.clone(), memory.clone(), rules.clone());
        let session = Rc::new(Session::new(&peer, listener.clone(), Some(sasl.clone())));
        glommio::spawn_local(async move {
            let session_of_conn = session.clone();
            shard.connections.set(shard.connections.get() + 1);
            shard.stats.connections.fetch_add(1, Ordering::Relaxed);
            let served = match tls {
                None => serve(&shard, stream, session, memory).await,
                // Boxed: a TLS connection's handshake and stream are several KiB, and a
                // task's future is as big as its biggest state, so inline they would be
                // paid for by every plaintext connection too.
                Some(acceptor) => {
                    Box::pin(serve_tls(&shard, &acceptor, stream, session, memory, &rules)).await
                }
            };
            match served {
                Ok(()) => tracing::debug!(%peer, "connection closed by client"),
                Err(ConnectionError::Io(e)) if e.kind() == std::io::ErrorKind::TimedOut => {
                    tracing::warn!(%peer, shard = shard.id, timeout_ms = shard.config.write_timeout_ms,
                        "client stopped reading its responses; closing")
                }
                Err(ConnectionError::Io(e)) => {
                    tracing::debug!(%peer, error = %e, "connection i/o error")
                }
                Err(e) => tracing::warn!(%peer, shard = shard.id, error = %e, "closing connection"),
            }
            OPEN.with(|o| o.borrow_mut().remove(&fd));
            crate::api::share_fetch::connection_closed(&shard, &session_of_conn).await;
            shard.connections.set(shard.connections.get() - 1);
            shard.stats.connections.fetch_sub(1, Ordering::Relaxed);
        })
        .detach();
    }
}

/// A TLS connection: the handshake, the principal of the client's certificate (if it showed
/// one; refused when no `--ssl-principal-mapping-rules` rule maps it), then [`serve`].
async fn serve_tls(
    shard: &Rc<Shard>,
    acceptor: &TlsAcceptor,
    stream: glommio::net::TcpStream,
    session: Rc<Session>,
    memory: Arc<RequestMemory>,
    rules: &PrincipalRules,
) -> Result<(), ConnectionError> {
    let peer = session.peer.clone();
    let s = match super::tls::handshake(acceptor, stream).await {
        Ok(s) => s,
        Err(e) => {
            tracing::info!(%peer, error = %e, "TLS handshake failed; closing");
            return Ok(());
        }
    };
    if let Some(subject) = super::tls::client_subject(&s) {
        match rules.apply(&subject) {
            Some(name) => {
                tracing::debug!(%peer, %subject, principal = %name, "client certificate");
                session.set_certificate(name);
            }
            None => {
                tracing::info!(%peer, %subject,
                    "no --ssl-principal-mapping-rules rule matches the client certificate; closing");
                return Ok(());
            }
        }
    }
    serve(shard, s, session, memory).await
}

/// Most requests of one connection in progress at once (started, not yet answered). Past it
/// the connection stops reading, and TCP holds the client back. Only produces overlap; their
/// memory is the request budget's (frame and [`super::budget::REQUEST_OVERHEAD`] each), so
/// this bounds one connection's share of it, not memory. It is what group commit merges: a
/// partition's appends that queue while its fdatasync runs share the next one. With 8, one
/// rdkafka producer (4 partitions, 128 KiB batches, acks=all, local log) paid ~6,300
/// fdatasyncs per GB; with 256, ~1,900-2,000 (perf/results/in-flight-256/notes.md).
const MAX_IN_FLIGHT: usize = 256;

/// A request that has run: its response (none for acks=0) and what metrics need of it.
struct Finished {
    resp: Result<Option<Response>, ConnectionError>,
    kind: Kind,
    api_key: i16,
    correlation_id: i32,
    started: Instant,
}

/// Requests in progress, oldest first; their responses go out in this order.
type InFlight = VecDeque<oneshot::Receiver<Finished>>;

/// Serves one connection until the client closes it or sends something unservable.
///
/// Requests are started in order, one at a time: the next one starts when the previous one
/// has finished — except that a Produce following a Produce starts once its predecessor's
/// appends are queued ([`api::RequestContext::started`]), so pipelined produces wait for one
/// fdatasync together. Responses are written in request order as they complete.
async fn serve<W: Wire>(
    shard: &Rc<Shard>,
    mut stream: W,
    session: Rc<Session>,
    memory: Arc<RequestMemory>,
) -> Result<(), ConnectionError> {
    let r = serve_requests(shard, &mut stream, session, memory).await;
    if matches!(&r, Err(ConnectionError::Io(e)) if e.kind() == std::io::ErrorKind::TimedOut) {
        // The client stopped reading: a normal close would leave the unsent responses in the
        // kernel until TCP gives up (its window is shut, so not even the FIN goes out).
        // Linger 0 turns the close into a reset that frees them at once.
        let off = libc::linger {
            l_onoff: 1,
            l_linger: 0,
        };
        // SAFETY: setsockopt on the connection's own open fd with a correctly sized linger.
        unsafe {
            libc::setsockopt(
                stream.fd(),
                libc::SOL_SOCKET,
                libc::SO_LINGER,
                &off as *const libc::linger as *const libc::c_void,
                std::mem::size_of::<libc::linger>() as libc::socklen_t,
            );
        }
    }
    r
}

async fn serve_requests<W: Wire>(
    shard: &Rc<Shard>,
    stream: &mut W,
    session: Rc<Session>,
    memory: Arc<RequestMemory>,
) -> Result<(), ConnectionError> {
    let peer = session.peer.clone();
    let max = shard.config.max_request_bytes;
    let idle_limit = Duration::from_millis(shard.config.connections_max_idle_ms.max(1));
    let mut rb = ReadBuffer::new(memory);
    let mut in_flight = InFlight::new();
    // When the connection last went idle (nothing in progress, nothing read since).
    let mut idle_since: Option<Instant> = None;
    loop {
        if session.closing() {
            // A failed authentication: its answer goes out, then nothing more is served.
            drain(shard, stream, &mut in_flight).await?;
            return Err(ConnectionError::Unauthenticated(
                "SASL authentication failed".into(),
            ));
        }
        let need = if in_flight.len() < MAX_IN_FLIGHT {
            match rb.next_frame(max).await? {
                Ok((frame, lease)) => {
                    let header = RequestHeader::parse(&frame)?;
                    if header.api_key != key::PRODUCE {
                        // Only produces overlap: anything else sees the effects of every
                        // request before it, as with Kafka's one request at a time.
                        drain(shard, stream, &mut in_flight).await?;
                    }
                    let started = start(shard, &session, header, frame, lease, &mut in_flight)?;
                    wait_started(shard, stream, &mut in_flight, started).await?;
                    continue;
                }
                Err(need) => Some(need),
            }
        } else {
            None
        };
        let Some(need) = need else {
            write_oldest(shard, stream, &mut in_flight).await?;
            continue;
        };
        // Read at least what completes the frame, unless a response is done first. An
        // unfinished read (or wait for the budget) is dropped safely: glommio reads only
        // once data is there. With nothing in progress the read is also the idle timer.
        let idle = in_flight.is_empty();
        let idle_deadline = if idle {
            *idle_since.get_or_insert_with(Instant::now) + idle_limit
        } else {
            idle_since = None;
            Instant::now() + idle_limit
        };
        let outcome = {
            let fill = async {
                rb.reserve(need, idle).await;
                rb.read(stream, need).await
            };
            let fill = async {
                if idle {
                    crate::deadline::until(fill, idle_deadline).await
                } else {
                    Some(fill.await)
                }
            };
            let oldest = oldest_done(&mut in_flight);
            futures::pin_mut!(fill);
            futures::pin_mut!(oldest);
            match futures::future::select(fill, oldest).await {
                Either::Left((r, _)) => Either::Left(r),
                Either::Right((done, _)) => Either::Right(done),
            }
        };
        match outcome {
            Either::Left(None) => {
                tracing::info!(%peer, idle_ms = idle_limit.as_millis() as u64,
                    "closing idle connection (--connections-max-idle-ms)");
                return Ok(());
            }
            Either::Left(Some(Ok(0))) => {
                drain(shard, stream, &mut in_flight).await?;
                let have = rb.buffered();
                if have > 0 {
                    return Err(ConnectionError::Malformed(format!(
                        "client closed mid-frame ({have} of {need} bytes)"
                    )));
                }
                return Ok(());
            }
            Either::Left(Some(Ok(_))) => idle_since = None,
            Either::Left(Some(Err(e))) => return Err(e.into()),
            Either::Right(done) => {
                in_flight.pop_front();
                write_finished(shard, stream, &mut in_flight, done).await?;
            }
        }
    }
}

/// Spawns the request's task and queues its response; returns the signal that lets the next
/// request start.
fn start(
    shard: &Rc<Shard>,
    session: &Rc<Session>,
    header: RequestHeader,
    frame: BytesMut,
    lease: Lease,
    in_flight: &mut InFlight,
) -> Result<oneshot::Receiver<()>, ConnectionError> {
    let started = Instant::now();
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
    let (started_tx, started_rx) = oneshot::channel();
    let (done_tx, done_rx) = oneshot::channel();
    let (shard, session) = (shard.clone(), session.clone());
    // Its own task, so it runs to the end even if the connection goes away meanwhile (a
    // half-done append would leave the partition's log writer stuck).
    glommio::spawn_local(async move {
        let resp = api::dispatch(shard, header, session, frame, started_tx).await;
        // The frame's share of the request budget ends with its handling: what it left in
        // the batch cache is the cache budget's from now on.
        drop(lease);
        let _ = done_tx.send(Finished {
            resp,
            kind,
            api_key,
            correlation_id,
            started,
        });
    })
    .detach();
    in_flight.push_back(done_rx);
    Ok(started_rx)
}

/// Waits until the newest request lets the next one start, writing the responses that
/// complete meanwhile. A newest request that failed ends the connection after the responses
/// before it.
async fn wait_started<W: Wire>(
    shard: &Rc<Shard>,
    stream: &mut W,
    in_flight: &mut InFlight,
    mut started: oneshot::Receiver<()>,
) -> Result<(), ConnectionError> {
    loop {
        let outcome = {
            let oldest = oldest_done(in_flight);
            futures::pin_mut!(oldest);
            match futures::future::select(&mut started, oldest).await {
                Either::Left((r, _)) => Either::Left(r),
                Either::Right((done, _)) => Either::Right(done),
            }
        };
        match outcome {
            Either::Left(Ok(())) => return Ok(()),
            // The handler finished without the signal: its result is already queued.
            Either::Left(Err(_)) => break,
            Either::Right(done) => {
                in_flight.pop_front();
                write_finished(shard, stream, in_flight, done).await?;
                if in_flight.is_empty() {
                    // The request being started was answered too.
                    return Ok(());
                }
            }
        }
    }
    let newest_failed = in_flight
        .back_mut()
        .and_then(|rx| rx.try_recv().ok().flatten())
        .map(|f| match f.resp {
            Err(e) => Err(e),
            ok => Ok(Finished { resp: ok, ..f }),
        });
    match newest_failed {
        Some(Err(e)) => {
            in_flight.pop_back();
            drain(shard, stream, in_flight).await?;
            Err(e)
        }
        Some(Ok(f)) => {
            // Put the result back where it was, already received.
            let (tx, rx) = oneshot::channel();
            let _ = tx.send(f);
            if let Some(back) = in_flight.back_mut() {
                *back = rx;
            }
            Ok(())
        }
        None => Ok(()),
    }
}

/// The oldest request's result, once it has one (never, with none in progress).
async fn oldest_done(in_flight: &mut InFlight) -> Finished {
    match in_flight.front_mut() {
        Some(rx) => match rx.await {
            Ok(f) => f,
            // Tasks always send; a lost one counts as a failed request.
            Err(_) => lost_request(),
        },
        None => futures::future::pending().await,
    }
}

/// Waits for the oldest request and writes its response.
async fn write_oldest<W: Wire>(
    shard: &Rc<Shard>,
    stream: &mut W,
    in_flight: &mut InFlight,
) -> Result<(), ConnectionError> {
    let done = oldest_done(in_flight).await;
    in_flight.pop_front();
    write_finished(shard, stream, in_flight, done).await
}

/// Writes every response still to come, in order.
async fn drain<W: Wire>(
    shard: &Rc<Shard>,
    stream: &mut W,
    in_flight: &mut InFlight,
) -> Result<(), ConnectionError> {
    while !in_flight.is_empty() {
        write_oldest(shard, stream, in_flight).await?;
    }
    Ok(())
}

/// Writes the response of `first` (just taken off the front of `in_flight`) and of every
/// request behind it that has finished too, in order, with one gather write.
///
/// Pipelined produces of one write round finish together: written one by one they cost a
/// `sendmsg` each (one per produce request, ~7,700 per GB of 128 KiB requests) and as many
/// wake-ups of the client. A failed request ends the run: the responses before it go out,
/// then its error closes the connection, as when each was written by itself.
async fn write_finished<W: Wire>(
    shard: &Rc<Shard>,
    stream: &mut W,
    in_flight: &mut InFlight,
    first: Finished,
) -> Result<(), ConnectionError> {
    let mut chunks: Vec<Bytes> = Vec::new();
    let mut next = Some(first);
    let mut outcome = Ok(());
    while let Some(f) = next.take() {
        match record_finished(shard, f) {
            Ok(Some(resp)) if chunks.is_empty() => chunks = resp.chunks,
            Ok(Some(mut resp)) => chunks.append(&mut resp.chunks),
            Ok(None) => {}
            Err(e) => {
                outcome = Err(e);
                break;
            }
        }
        next = take_finished(in_flight);
    }
    if !chunks.is_empty() {
        stream.write_chunks(&chunks).await?;
    }
    outcome
}

/// The oldest request's result if it has one already (taking it off `in_flight`).
fn take_finished(in_flight: &mut InFlight) -> Option<Finished> {
    let f = match in_flight.front_mut()?.try_recv() {
        Ok(Some(f)) => f,
        Ok(None) => return None,
        Err(_) => lost_request(),
    };
    in_flight.pop_front();
    Some(f)
}

/// What a request whose task ended without sending its result counts as.
fn lost_request() -> Finished {
    Finished {
        resp: Err(ConnectionError::Malformed("request task lost".into())),
        kind: Kind::Other,
        api_key: -1,
        correlation_id: -1,
        started: Instant::now(),
    }
}

/// Records one request's metrics; returns its response (if it has one) or its error.
///
/// The metrics are recorded before the write: once a client holds an answer, a scrape must
/// already count it (counted after the write, a shard thread preempted right after `sendmsg`
/// left a consumer holding every record while `/metrics` showed no fetch at all). Latency
/// therefore runs until the response is ready, not until the socket took it.
fn record_finished(shard: &Rc<Shard>, f: Finished) -> Result<Option<Response>, ConnectionError> {
    let resp = f.resp?;
    if let (Some(resp), Kind::Fetch) = (&resp, f.kind) {
        shard
            .stats
            .fetch_bytes
            .fetch_add(resp.len() as u64, Ordering::Relaxed);
    }
    let elapsed = f.started.elapsed();
    let waits = f.kind == Kind::Fetch
        || matches!(
            f.api_key,
            key::JOIN_GROUP | key::SYNC_GROUP | key::SHARE_FETCH
        );
    if elapsed > SLOW_REQUEST && !waits {
        tracing::warn!(
            api = f.api_key,
            corr = f.correlation_id,
            ?elapsed,
            shard = shard.id,
            "slow request"
        );
    }
    shard.stats.record(f.kind, elapsed);
    Ok(resp)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn finished(corr: i32) -> Finished {
        Finished {
            resp: Ok(None),
            kind: Kind::Other,
            api_key: key::PRODUCE,
            correlation_id: corr,
            started: Instant::now(),
        }
    }

    #[test]
    fn finished_responses_are_taken_in_order_up_to_the_first_unfinished() {
        let mut in_flight = InFlight::new();
        let mut senders = Vec::new();
        for _ in 0..5 {
            let (tx, rx) = oneshot::channel();
            senders.push(Some(tx));
            in_flight.push_back(rx);
        }
        // Requests 0, 1 and 3 finished; 2 did not; 4's task ended without a result.
        for i in [0, 1, 3] {
            let _ = senders[i].take().map(|tx| tx.send(finished(i as i32)));
        }
        senders[4] = None;
        let taken: Vec<i32> = std::iter::from_fn(|| take_finished(&mut in_flight))
            .map(|f| f.correlation_id)
            .collect();
        assert_eq!(taken, [0, 1], "stops at the first unfinished request");
        assert_eq!(in_flight.len(), 3);
        let _ = senders[2].take().map(|tx| tx.send(finished(2)));
        let next: Vec<_> = std::iter::from_fn(|| take_finished(&mut in_flight)).collect();
        assert_eq!(next.len(), 3);
        assert_eq!(next[0].correlation_id, 2);
        assert_eq!(next[1].correlation_id, 3);
        // The lost one counts as a failed request, not as "not finished yet".
        assert!(next[2].resp.is_err());
        assert!(in_flight.is_empty());
        assert!(take_finished(&mut in_flight).is_none());
    }
}
