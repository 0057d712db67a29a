//! systemd's readiness protocol (`sd_notify`, Type=notify units): when `$NOTIFY_SOCKET` names a
//! unix datagram socket, Kelp sends `READY=1` once every shard serves and `STOPPING=1` when
//! shutdown begins, so `systemctl start` returns when clients can connect and dependent units
//! start after that.
//!
//! Owns the datagram only (std's `UnixDatagram`, path or abstract socket); called by
//! [`super::run`] and [`super::shutdown`]. Failing to notify is logged as a warning and never
//! stops the broker: the service manager then times out on its own terms.

use std::io;
use std::os::unix::net::{SocketAddr, UnixDatagram};

/// The environment variable systemd sets to the socket it listens on.
const NOTIFY_SOCKET: &str = "NOTIFY_SOCKET";

/// Why a notification was not sent.
#[derive(Debug, thiserror::Error)]
pub enum NotifyError {
    /// `$NOTIFY_SOCKET` is neither a path nor an abstract name ('@...').
    #[error("${NOTIFY_SOCKET} '{0}' is not a unix socket path or '@' abstract name")]
    BadAddress(String),
    /// The socket could not be made or the datagram not sent.
    #[error("notifying {0}: {1}")]
    Io(String, #[source] io::Error),
}

/// Sends `state` (newline-separated `KEY=value` assignments) to the socket named by
/// `$NOTIFY_SOCKET`; `Ok(false)` when it is not set (not run by systemd as Type=notify).
pub fn notify(state: &str) -> Result<bool, NotifyError> {
    match std::env::var_os(NOTIFY_SOCKET) {
        Some(socket) if !socket.is_empty() => {
            send_to(&socket.to_string_lossy(), state)?;
            Ok(true)
        }
        _ => Ok(false),
    }
}

/// Sends `state` as one datagram to `socket`: an absolute path, or '@' and an abstract
/// socket name.
pub fn send_to(socket: &str, state: &str) -> Result<(), NotifyError> {
    let addr = address(socket)?;
    let io = |e| NotifyError::Io(socket.to_string(), e);
    let sock = UnixDatagram::unbound().map_err(io)?;
    let sent = sock.send_to_addr(state.as_bytes(), &addr).map_err(io)?;
    if sent != state.len() {
        return Err(io(io::Error::new(
            io::ErrorKind::WriteZero,
            format!("sent {sent} of {} bytes", state.len()),
        )));
    }
    Ok(())
}

fn address(socket: &str) -> Result<SocketAddr, NotifyError> {
    let bad = || NotifyError::BadAddress(socket.to_string());
    if let Some(name) = socket.strip_prefix('@') {
        use std::os::linux::net::SocketAddrExt;
        SocketAddr::from_abstract_name(name.as_bytes()).map_err(|_| bad())
    } else if socket.starts_with('/') {
        SocketAddr::from_pathname(socket).map_err(|_| bad())
    } else {
        Err(bad())
    }
}

/// Tells the service manager Kelp serves; `status` is a one-line human summary (shown by
/// `systemctl status`).
pub fn ready(status: &str) {
    let status = status.replace('\n', " ");
    report("READY=1", notify(&format!("READY=1\nSTATUS={status}\n")));
}

/// Tells the service manager Kelp is shutting down.
pub fn stopping() {
    report("STOPPING=1", notify("STOPPING=1\nSTATUS=shutting down\n"));
}

fn report(what: &str, result: Result<bool, NotifyError>) {
    match result {
        Ok(true) => tracing::debug!("sent {what} to ${NOTIFY_SOCKET}"),
        Ok(false) => {}
        Err(e) => tracing::warn!(error = %e, "could not send {what} to the service manager"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn receive(sock: &UnixDatagram) -> String {
        sock.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let mut buf = [0u8; 512];
        let n = sock.recv(&mut buf).unwrap();
        String::from_utf8_lossy(&buf[..n]).into_owned()
    }

    #[test]
    fn sends_to_a_path_socket() {
        let path = std::env::temp_dir().join(format!("kelp-notify-test-{}", std::process::id()));
        let _ = std::fs::remove_file(&path);
        let sock = UnixDatagram::bind(&path).unwrap();
        send_to(path.to_str().unwrap(), "READY=1\nSTATUS=x\n").unwrap();
        assert_eq!(receive(&sock), "READY=1\nSTATUS=x\n");
        std::fs::remove_file(&path).unwrap();
    }

    #[test]
    fn sends_to_an_abstract_socket() {
        use std::os::linux::net::SocketAddrExt;
        let name = format!("kelp-notify-test-{}", std::process::id());
        let sock =
            UnixDatagram::bind_addr(&SocketAddr::from_abstract_name(name.as_bytes()).unwrap())
                .unwrap();
        send_to(&format!("@{name}"), "STOPPING=1\n").unwrap();
        assert_eq!(receive(&sock), "STOPPING=1\n");
    }

    #[test]
    fn bad_addresses_are_errors() {
        assert!(matches!(
            send_to("relative/path", "READY=1"),
            Err(NotifyError::BadAddress(_))
        ));
        assert!(matches!(
            send_to("/nonexistent/kelp/notify", "READY=1"),
            Err(NotifyError::Io(..))
        ));
    }
}
