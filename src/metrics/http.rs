//! A minimal HTTP/1.1 server for `GET /metrics` and `GET`/`HEAD /health`, on its own thread
//! so a scrape or a health probe never runs on, or waits for, a shard core. It starts before
//! the shards, so `/health` answers 503 until they all serve.

use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::time::Duration;

use super::{health, render::render, Registry};

/// Binds `addr` and serves scrapes until the process exits. Returns the bound address.
pub fn spawn(addr: SocketAddr, registry: Arc<Registry>) -> std::io::Result<SocketAddr> {
    let listener = TcpListener::bind(addr)?;
    let bound = listener.local_addr()?;
    std::thread::Builder::new()
        .name("kelp-metrics".into())
        .spawn(move || {
            for conn in listener.incoming() {
                match conn {
                    Ok(stream) => {
                        if let Err(e) = serve(stream, &registry) {
                            tracing::debug!(error = %e, "metrics request failed");
                        }
                    }
                    Err(e) => tracing::warn!(error = %e, "metrics accept failed"),
                }
            }
        })?;
    Ok(bound)
}

fn serve(mut stream: TcpStream, registry: &Registry) -> std::io::Result<()> {
    stream.set_read_timeout(Some(Duration::from_secs(5)))?;
    stream.set_write_timeout(Some(Duration::from_secs(5)))?;
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut request_line = String::new();
    reader.read_line(&mut request_line)?;
    // Drain headers (bounded) so the client sees a clean response.
    let mut line = String::new();
    for _ in 0..100 {
        line.clear();
        if reader.read_line(&mut line)? == 0 || line == "\r\n" || line == "\n" {
            break;
        }
    }
    let mut parts = request_line.split_whitespace();
    let (method, path) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    respond(&mut stream, registry, method, path)
}

/// Writes the whole answer to `method path` with one `write`. `write!` on the stream would
/// send each formatted piece on its own, so a process exiting between two of them (the
/// shutdown this very answer may report) left a probe a cut response that parsed as a 503
/// without Content-Length and an empty body.
fn respond(
    out: &mut impl Write,
    registry: &Registry,
    method: &str,
    path: &str,
) -> std::io::Result<()> {
    let (status, ctype, body) = answer(registry, method, path);
    let len = body.len();
    // HEAD: the headers GET would send, without the body.
    let body = if method == "HEAD" { "" } else { body.as_str() };
    let response = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {len}\r\nConnection: close\r\n\r\n{body}"
    );
    out.write_all(response.as_bytes())?;
    out.flush()
}

/// (status line, content type, body) of a request.
fn answer(registry: &Registry, method: &str, path: &str) -> (&'static str, &'static str, String) {
    let route = path.split('?').next().unwrap_or("");
    match (method, route) {
        ("GET", "/metrics") => (
            "200 OK",
            "text/plain; version=0.0.4; charset=utf-8",
            render(registry),
        ),
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
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn health_metrics_and_everything_else() {
        let reg = Registry::default();
        let (status, _, body) = answer(&reg, "GET", "/health");
        assert_eq!(status, "503 Service Unavailable");
        assert!(body.starts_with("starting"), "{body}");
        assert_eq!(answer(&reg, "HEAD", "/health").0, "503 Service Unavailable");
        assert_eq!(answer(&reg, "GET", "/metrics?x=1").0, "200 OK");
        assert_eq!(answer(&reg, "POST", "/health").0, "404 Not Found");
        assert_eq!(answer(&reg, "GET", "/healthz").0, "404 Not Found");
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
            respond(&mut w, &reg, method, path).unwrap();
            assert_eq!(w.0.len(), 1, "{method} {path}: {} writes", w.0.len());
        }
        let mut w = Writes::default();
        respond(&mut w, &reg, "GET", "/health").unwrap();
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
}
