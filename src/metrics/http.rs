//! A minimal HTTP/1.1 server for `GET /metrics` and `GET`/`HEAD /health`, on threads of its
//! own so a scrape or a health probe never runs on, or waits for, a shard core. It starts
//! before the shards, so `/health` answers 503 until they all serve.
//!
//! Each connection is served on a thread of its own, at most [`MAX_CONNECTIONS`] at once
//! (more are closed at once), for at most [`SERVE_FOR`] in all, reading at most [`MAX_HEAD`]
//! bytes: served one after another, three connections that sent nothing held a /health probe
//! 15 s (each waited out its 5 s read timeout), long past a probe's own timeout, and a request
//! line without an end grew its buffer without bound. At most [`MAX_SCRAPES`] `/metrics`
//! answers (a copy of every series each) are held at once.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::{health, render::render, Registry};

/// Connections served at once; a connection past them is closed unanswered.
pub const MAX_CONNECTIONS: usize = 32;
/// `/metrics` answers built at once (each is a copy of every series, held until written);
/// past them a scrape gets 503, so concurrent scrapes cannot multiply that memory.
pub const MAX_SCRAPES: usize = 4;
/// Longest a connection is served, reading its request and writing the answer.
pub const SERVE_FOR: Duration = Duration::from_secs(5);
/// Longest request head (request line and headers) read; a longer one is not answered.
pub const MAX_HEAD: usize = 8 << 10;
/// Stack of a connection's thread: it formats one answer (the /metrics text is on the heap).
const CONNECTION_STACK: usize = 256 << 10;

/// Binds `addr` and serves scrapes until the process exits. Returns the bound address.
pub fn spawn(addr: SocketAddr, registry: Arc<Registry>) -> std::io::Result<SocketAddr> {
    let listener = TcpListener::bind(addr)?;
    let bound = listener.local_addr()?;
    std::thread::Builder::new()
        .name("kelp-metrics".into())
        .spawn(move || {
            let places = Places::default();
            for conn in listener.incoming() {
                match conn {
                    Ok(stream) => start(stream, &registry, &places),
                    Err(e) => {
                        tracing::warn!(error = %e, "metrics accept failed");
                        // Out of descriptors, say: not a hot loop of failed accepts.
                        std::thread::sleep(Duration::from_millis(10));
                    }
                }
            }
        })?;
    Ok(bound)
}

/// A place among at most a fixed number (connections served, scrapes answered), given back
/// when dropped.
struct Slot(Arc<AtomicUsize>);

impl Slot {
    /// A place in `taken` if fewer than `limit` are.
    fn take(taken: &Arc<AtomicUsize>, limit: usize) -> Option<Slot> {
        if taken.fetch_add(1, Ordering::Relaxed) >= limit {
            taken.fetch_sub(1, Ordering::Relaxed);
            return None;
        }
        Some(Slot(taken.clone()))
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Connections and scrapes in progress.
#[derive(Default)]
struct Places {
    connections: Arc<AtomicUsize>,
    scrapes: Arc<AtomicUsize>,
}

/// Serves `stream` on a thread of its own, or closes it when [`MAX_CONNECTIONS`] are served.
fn start(stream: TcpStream, registry: &Arc<Registry>, places: &Places) {
    let Some(slot) = Slot::take(&places.connections, MAX_CONNECTIONS) else {
        tracing::debug!(
            limit = MAX_CONNECTIONS,
            "metrics connections at their limit; closing one"
        );
        return;
    };
    let (registry, scrapes) = (registry.clone(), places.scrapes.clone());
    // If the thread cannot start, the closure (stream and slot with it) is dropped here.
    let started = std::thread::Builder::new()
        .name("kelp-metrics-conn".into())
        .stack_size(CONNECTION_STACK)
        .spawn(move || {
            let _slot = slot;
            if let Err(e) = serve(stream, &registry, &scrapes) {
                tracing::debug!(error = %e, "metrics request failed");
            }
        });
    if let Err(e) = started {
        tracing::warn!(error = %e, "no thread for a metrics connection; closed it");
    }
}

fn serve(
    mut stream: TcpStream,
    registry: &Registry,
    scrapes: &Arc<AtomicUsize>,
) -> std::io::Result<()> {
    let deadline = Instant::now() + SERVE_FOR;
    let head = read_head(&mut stream, deadline)?;
    let head = String::from_utf8_lossy(&head);
    let mut parts = head.lines().next().unwrap_or("").split_whitespace();
    let (method, path) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    let mut stream = Bounded {
        stream: &mut stream,
        deadline,
    };
    respond(&mut stream, registry, scrapes, method, path)
}

/// Writes to a connection until its deadline: each write may wait only for the time left
/// (a client reading a long answer slowly would otherwise get the whole timeout per write).
struct Bounded<'a> {
    stream: &'a mut TcpStream,
    deadline: Instant,
}

impl Write for Bounded<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.stream.set_write_timeout(Some(left(self.deadline)?))?;
        self.stream.write(buf)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.stream.flush()
    }
}

/// Time left before `deadline`; a timeout error once it has passed.
fn left(deadline: Instant) -> std::io::Result<Duration> {
    let left = deadline.saturating_duration_since(Instant::now());
    if left.is_zero() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::TimedOut,
            "metrics connection served too long",
        ));
    }
    Ok(left)
}

/// The request head, up to the blank line after the headers (or the end of the stream), read
/// before `deadline`; an error past it or past [`MAX_HEAD`] bytes.
fn read_head(stream: &mut TcpStream, deadline: Instant) -> std::io::Result<Vec<u8>> {
    let mut head = vec![0u8; MAX_HEAD];
    let mut len = 0;
    loop {
        stream.set_read_timeout(Some(left(deadline)?))?;
        let n = stream.read(&mut head[len..])?;
        if n == 0 {
            break;
        }
        // The blank line may straddle two reads: look again from a few bytes back.
        let from = len.saturating_sub(3);
        len += n;
        if ends_head(&head[from..len]) {
            break;
        }
        if len == MAX_HEAD {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                "metrics request head too long",
            ));
        }
    }
    head.truncate(len);
    Ok(head)
}

/// Whether `bytes` hold the blank line that ends a request head.
fn ends_head(bytes: &[u8]) -> bool {
    bytes.windows(4).any(|w| w == b"\r\n\r\n") || bytes.windows(2).any(|w| w == b"\n\n")
}

/// Writes the whole answer to `method path` with one `write`. `write!` on the stream would
/// send each formatted piece on its own, so a process exiting between two of them (the
/// shutdown this very answer may report) left a probe a cut response that parsed as a 503
/// without Content-Length and an empty body.
fn respond(
    out: &mut impl Write,
    registry: &Registry,
    scrapes: &Arc<AtomicUsize>,
    method: &str,
    path: &str,
) -> std::io::Result<()> {
    // A scrape's place is held until its answer is written: the rendered text lives that long.
    let (answer, _scrape) = answer(registry, scrapes, method, path);
    send(out, method, answer)
}

/// Writes one answer, (status line, content type, body), with one `write` (see [`respond`]).
fn send(
    out: &mut impl Write,
    method: &str,
    (status, ctype, body): (&str, &str, String),
) -> std::io::Result<()> {
    let len = body.len();
    // HEAD: the headers GET would send, without the body.
    let body = if method == "HEAD" { "" } else { body.as_str() };
    let response = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {len}\r\nConnection: close\r\n\r\n{body}"
    );
    out.write_all(response.as_bytes())?;
    out.flush()
}

/// (status line, content type, body) of a request, and for a `/metrics` answer its place
/// among the `scrapes` built at once (none left: 503).
fn answer(
    registry: &Registry,
    scrapes: &Arc<AtomicUsize>,
    method: &str,
    path: &str,
) -> ((&'static str, &'static str, String), Option<Slot>) {
    let route = path.split('?').next().unwrap_or("");
    let answer = match (method, route) {
        ("GET", "/metrics") => match Slot::take(scrapes, MAX_SCRAPES) {
            Some(slot) => {
                let text = render(registry);
                let ctype = "text/plain; version=0.0.4; charset=utf-8";
                return (("200 OK", ctype, text), Some(slot));
            }
            None => (
                "503 Service Unavailable",
                "text/plain",
                "too many scrapes at once; try again\n".to_string(),
            ),
        },
        ("GET" | "HEAD", "/health") => {
            let (ready, body) = health::check(registry, health::mono_ms());
            let status = if ready {
                "200 OK"
            } else {
                "503 Service Unavailable"
            };
            (status, "text/plain; charset=utf-8", body)
        }
        _ => (
            "404 Not Found",
            "text/plain",
            "not found: try /metrics or /health\n".to_string(),
        ),
    };
    (answer, None)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The answer to `method path` with no scrape in progress.
    fn route(reg: &Registry, method: &str, path: &str) -> (&'static str, &'static str, String) {
        answer(reg, &Arc::default(), method, path).0
    }

    #[test]
    fn health_metrics_and_everything_else() {
        let reg = Registry::default();
        let (status, _, body) = route(&reg, "GET", "/health");
        assert_eq!(status, "503 Service Unavailable");
        assert!(body.starts_with("starting"), "{body}");
        assert_eq!(route(&reg, "HEAD", "/health").0, "503 Service Unavailable");
        assert_eq!(route(&reg, "GET", "/metrics?x=1").0, "200 OK");
        assert_eq!(route(&reg, "POST", "/health").0, "404 Not Found");
        assert_eq!(route(&reg, "GET", "/healthz").0, "404 Not Found");
    }

    /// Counts `write` calls: a socket sends each one as it comes.
    #[derive(Default)]
    struct Writes(Vec<Vec<u8>>);

    impl Write for Writes {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.push(buf.to_vec());
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn an_answer_leaves_in_one_write() {
        let reg = Registry::default();
        reg.shutting_down
            .store(true, std::sync::atomic::Ordering::Relaxed);
        for (method, path) in [("GET", "/health"), ("HEAD", "/health"), ("GET", "/metrics")] {
            let mut w = Writes::default();
            respond(&mut w, &reg, &Arc::default(), method, path).unwrap();
            assert_eq!(w.0.len(), 1, "{method} {path}: {} writes", w.0.len());
        }
        let mut w = Writes::default();
        respond(&mut w, &reg, &Arc::default(), "GET", "/health").unwrap();
        let text = String::from_utf8(w.0.concat()).unwrap();
        assert!(
            text.starts_with("HTTP/1.1 503 Service Unavailable\r\n"),
            "{text}"
        );
        assert!(
            text.ends_with("Content-Length: 14\r\nConnection: close\r\n\r\nshutting down\n"),
            "{text}"
        );
    }

    /// A server on an ephemeral port of 127.0.0.1.
    fn server() -> SocketAddr {
        spawn(
            "127.0.0.1:0".parse().unwrap(),
            Arc::new(Registry::default()),
        )
        .unwrap()
    }

    /// The answer to `GET /health` on a new connection, read until the server closes it;
    /// `None` when the connection ends without an answer.
    fn probe(addr: SocketAddr) -> Option<String> {
        let mut c = TcpStream::connect(addr).unwrap();
        c.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        c.write_all(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
            .unwrap();
        let mut got = Vec::new();
        match c.read_to_end(&mut got) {
            Ok(_) if !got.is_empty() => Some(String::from_utf8_lossy(&got).into_owned()),
            _ => None,
        }
    }

    #[test]
    fn connections_that_send_nothing_do_not_hold_up_a_probe() {
        let addr = server();
        let idle: Vec<_> = (0..MAX_CONNECTIONS - 1)
            .map(|_| TcpStream::connect(addr).unwrap())
            .collect();
        let asked = Instant::now();
        let answer = probe(addr).expect("an answer");
        // Served in turn, the probe would wait out every idle connection's 5 s.
        assert!(
            asked.elapsed() < SERVE_FOR,
            "answered after {:?}",
            asked.elapsed()
        );
        assert!(answer.starts_with("HTTP/1.1 503 "), "{answer}");
        drop(idle);
    }

    #[test]
    fn past_the_limit_a_connection_is_closed_and_its_place_comes_back() {
        let addr = server();
        let idle: Vec<_> = (0..MAX_CONNECTIONS)
            .map(|_| TcpStream::connect(addr).unwrap())
            .collect();
        let asked = Instant::now();
        assert_eq!(
            probe(addr),
            None,
            "a connection past the limit is closed unanswered"
        );
        assert!(
            asked.elapsed() < SERVE_FOR,
            "closed after {:?}",
            asked.elapsed()
        );
        drop(idle);
        // The idle connections' threads see them end and give their places back.
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Some(answer) = probe(addr) {
                assert!(answer.starts_with("HTTP/1.1 503 "), "{answer}");
                break;
            }
            assert!(Instant::now() < deadline, "no place came back");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    #[test]
    fn a_head_without_an_end_is_cut_at_its_limit() {
        let addr = server();
        let mut c = TcpStream::connect(addr).unwrap();
        c.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        // Past the limit the server stops reading: the rest may not fit its socket.
        let _ = c.write_all(&vec![b'G'; MAX_HEAD + 4096]);
        let mut got = Vec::new();
        let _ = c.read_to_end(&mut got);
        assert!(
            got.is_empty(),
            "answered: {}",
            String::from_utf8_lossy(&got)
        );
        // A head split anywhere is still found.
        let req = b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n";
        for cut in 1..req.len() {
            let mut c = TcpStream::connect(addr).unwrap();
            c.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
            c.set_nodelay(true).unwrap();
            c.write_all(&req[..cut]).unwrap();
            std::thread::sleep(Duration::from_millis(2));
            c.write_all(&req[cut..]).unwrap();
            let mut got = Vec::new();
            c.read_to_end(&mut got).unwrap();
            assert!(got.starts_with(b"HTTP/1.1 503 "), "cut at {cut}");
        }
    }

    /// `serve`'s answer to `request` with `scrapes` scrapes already in progress.
    fn served_with(request: &[u8], scrapes: usize) -> String {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let mut client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (conn, _) = listener.accept().unwrap();
        client.write_all(request).unwrap();
        let taken = Arc::new(AtomicUsize::new(scrapes));
        serve(conn, &Registry::default(), &taken).unwrap();
        assert_eq!(
            taken.load(Ordering::Relaxed),
            scrapes,
            "the scrape's place came back"
        );
        let mut got = Vec::new();
        client.read_to_end(&mut got).unwrap();
        String::from_utf8(got).unwrap()
    }

    #[test]
    fn scrapes_past_the_limit_are_told_to_come_back_and_probes_still_answer() {
        let scrape = b"GET /metrics HTTP/1.1\r\n\r\n";
        let ok = served_with(scrape, MAX_SCRAPES - 1);
        assert!(
            ok.starts_with("HTTP/1.1 200 OK\r\n") && ok.contains("kelp_ready"),
            "{ok}"
        );
        let busy = served_with(scrape, MAX_SCRAPES);
        assert!(
            busy.starts_with("HTTP/1.1 503 ") && busy.ends_with("try again\n"),
            "{busy}"
        );
        // Only a scrape takes a scrape's place: anything else at /metrics is still a 404.
        let other = served_with(b"POST /metrics HTTP/1.1\r\n\r\n", MAX_SCRAPES);
        assert!(other.starts_with("HTTP/1.1 404 "), "{other}");
        let probe = served_with(b"GET /health HTTP/1.1\r\n\r\n", MAX_SCRAPES);
        assert!(
            probe.ends_with("starting: shards not launched yet\n"),
            "{probe}"
        );
    }

    #[test]
    fn a_client_reading_slowly_gets_the_time_left_not_a_timeout_per_write() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let mut client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (mut conn, _) = listener.accept().unwrap();
        // Reads 64 KiB every 20 ms: each write makes progress well within any timeout.
        let reader = std::thread::spawn(move || {
            let mut chunk = vec![0u8; 64 << 10];
            while matches!(client.read(&mut chunk), Ok(n) if n > 0) {
                std::thread::sleep(Duration::from_millis(20));
            }
        });
        let started = Instant::now();
        let mut out = Bounded {
            stream: &mut conn,
            deadline: started + Duration::from_millis(300),
        };
        // 64 MiB at that pace would take ~20 s.
        let err = out
            .write_all(&vec![b'x'; 64 << 20])
            .expect_err("stopped at the deadline");
        assert!(
            matches!(
                err.kind(),
                std::io::ErrorKind::TimedOut | std::io::ErrorKind::WouldBlock
            ),
            "{err}"
        );
        assert!(
            started.elapsed() < Duration::from_secs(3),
            "{:?}",
            started.elapsed()
        );
        drop(conn);
        reader.join().unwrap();
    }
}
