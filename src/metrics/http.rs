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
    let (status, ctype, body) = answer(registry, method, path);
    let len = body.len();
    // HEAD: the headers GET would send, without the body.
    let body = if method == "HEAD" { "" } else { body.as_str() };
    write!(
        stream,
        "HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {len}\r\nConnection: close\r\n\r\n{body}"
    )?;
    stream.flush()
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
}
