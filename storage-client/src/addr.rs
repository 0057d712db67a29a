//! SeaweedFS address forms.
//!
//! SeaweedFS names masters and filers by their HTTP address `host:port`; their gRPC port is
//! then `port + 10000`, unless the address is written `host:port.grpcPort`, which names the
//! gRPC port explicitly. Broker addresses (as listed by the master and in partition
//! assignments) are already gRPC addresses. The functions here turn both forms into tonic
//! endpoint URIs (`http://host:port`).

/// Offset between a SeaweedFS server's HTTP port and its default gRPC port.
pub const GRPC_PORT_OFFSET: u32 = 10000;

/// A SeaweedFS address that cannot be turned into a gRPC endpoint.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AddrError {
    /// The address has no `:port` part.
    #[error("address {0:?} has no port")]
    MissingPort(String),
    /// The host part is empty.
    #[error("address {0:?} has no host")]
    MissingHost(String),
    /// A port is not a number in `1..=65535` (or the derived gRPC port would overflow).
    #[error("address {0:?} has an invalid port")]
    BadPort(String),
}

fn parse_port(s: &str, addr: &str) -> Result<u32, AddrError> {
    match s.parse::<u32>() {
        Ok(p) if (1..=65535).contains(&p) => Ok(p),
        _ => Err(AddrError::BadPort(addr.to_owned())),
    }
}

fn strip_scheme(addr: &str) -> &str {
    let addr = addr.trim();
    addr.strip_prefix("http://").unwrap_or(addr)
}

/// The gRPC endpoint URI of a master or filer given by its HTTP address.
///
/// `"host:port"` becomes `"http://host:<port+10000>"`, `"host:port.grpcport"` becomes
/// `"http://host:grpcport"`. A leading `http://` is accepted and ignored.
pub fn grpc_endpoint_of_http(addr: &str) -> Result<String, AddrError> {
    let bare = strip_scheme(addr);
    let (host, ports) = bare
        .rsplit_once(':')
        .ok_or_else(|| AddrError::MissingPort(addr.to_owned()))?;
    if host.is_empty() {
        return Err(AddrError::MissingHost(addr.to_owned()));
    }
    let grpc = match ports.split_once('.') {
        Some((http, grpc)) => {
            parse_port(http, addr)?;
            parse_port(grpc, addr)?
        }
        None => {
            let p = parse_port(ports, addr)? + GRPC_PORT_OFFSET;
            if p > 65535 {
                return Err(AddrError::BadPort(addr.to_owned()));
            }
            p
        }
    };
    Ok(format!("http://{host}:{grpc}"))
}

/// The HTTP `"host:port"` of an address written `"host:port"` or `"host:port.grpcport"` (a
/// filer's HTTP port serves file contents). A leading `http://` is ignored.
pub fn http_host_port(addr: &str) -> String {
    let bare = strip_scheme(addr);
    match bare.rsplit_once(':') {
        Some((host, ports)) => {
            format!("{host}:{}", ports.split('.').next().unwrap_or(ports))
        }
        None => bare.to_owned(),
    }
}

/// The gRPC endpoint URI of an address that already names a gRPC port (brokers).
///
/// `"host:port"` becomes `"http://host:port"`; an address that already has a scheme is
/// returned unchanged.
pub fn grpc_endpoint(addr: &str) -> String {
    let addr = addr.trim();
    if addr.starts_with("http://") || addr.starts_with("https://") {
        addr.to_owned()
    } else {
        format!("http://{addr}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn http_port_plus_ten_thousand() {
        assert_eq!(
            grpc_endpoint_of_http("127.0.0.1:9333").as_deref(),
            Ok("http://127.0.0.1:19333")
        );
        assert_eq!(
            grpc_endpoint_of_http("localhost:8888").as_deref(),
            Ok("http://localhost:18888")
        );
        assert_eq!(
            grpc_endpoint_of_http("http://10.0.0.1:29333").as_deref(),
            Ok("http://10.0.0.1:39333")
        );
    }

    #[test]
    fn explicit_grpc_port() {
        assert_eq!(
            grpc_endpoint_of_http("127.0.0.1:29335.39335").as_deref(),
            Ok("http://127.0.0.1:39335")
        );
        assert_eq!(
            grpc_endpoint_of_http("h:9333.4000").as_deref(),
            Ok("http://h:4000")
        );
    }

    #[test]
    fn ipv6_host() {
        assert_eq!(
            grpc_endpoint_of_http("[::1]:9333").as_deref(),
            Ok("http://[::1]:19333")
        );
    }

    #[test]
    fn bad_addresses() {
        assert!(matches!(
            grpc_endpoint_of_http("localhost"),
            Err(AddrError::MissingPort(_))
        ));
        assert!(matches!(
            grpc_endpoint_of_http(":9333"),
            Err(AddrError::MissingHost(_))
        ));
        for bad in [
            "h:", "h:x", "h:0", "h:60000", "h:70000", "h:1.", "h:1.x", "h:.5",
        ] {
            assert!(
                matches!(grpc_endpoint_of_http(bad), Err(AddrError::BadPort(_))),
                "{bad}"
            );
        }
    }

    #[test]
    fn http_host_port_drops_the_grpc_port() {
        assert_eq!(http_host_port("127.0.0.1:8888.18888"), "127.0.0.1:8888");
        assert_eq!(http_host_port("127.0.0.1:8888"), "127.0.0.1:8888");
        assert_eq!(http_host_port("http://filer:8888"), "filer:8888");
    }

    #[test]
    fn broker_addresses_are_used_as_is() {
        assert_eq!(grpc_endpoint("127.0.0.1:17777"), "http://127.0.0.1:17777");
        assert_eq!(grpc_endpoint(" b:1 "), "http://b:1");
        assert_eq!(grpc_endpoint("http://b:1"), "http://b:1");
    }
}
