//! Kafka's named listeners: `--listeners`, `--advertised-listeners` and
//! `--listener-security-protocol-map`, resolved into the [`Listener`]s the server binds.
//!
//! Without `--listeners`, the older single-listener flags (`--listen`, `--security-protocol`,
//! `--advertised-host`, `--advertised-port`) describe one listener named after its protocol,
//! so both spellings end in the same list and nothing after this module tells them apart.

use std::net::{SocketAddr, ToSocketAddrs};

use clap::ValueEnum;

/// What clients speak on a listener (Kafka's security protocols).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
#[value(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum SecurityProtocol {
    /// Kafka's protocol straight over TCP.
    Plaintext,
    /// Kafka's protocol over TLS.
    Ssl,
    /// SASL authentication first, then Kafka's protocol, over TCP.
    SaslPlaintext,
    /// SASL authentication first, then Kafka's protocol, over TLS.
    SaslSsl,
}

impl SecurityProtocol {
    /// Kafka's name for it.
    pub fn name(self) -> &'static str {
        match self {
            SecurityProtocol::Plaintext => "PLAINTEXT",
            SecurityProtocol::Ssl => "SSL",
            SecurityProtocol::SaslPlaintext => "SASL_PLAINTEXT",
            SecurityProtocol::SaslSsl => "SASL_SSL",
        }
    }

    /// Whether connections start with a TLS handshake.
    pub fn tls(self) -> bool {
        matches!(self, SecurityProtocol::Ssl | SecurityProtocol::SaslSsl)
    }

    /// Whether clients must authenticate with SASL before anything else is served.
    pub fn sasl(self) -> bool {
        matches!(
            self,
            SecurityProtocol::SaslPlaintext | SecurityProtocol::SaslSsl
        )
    }
}

/// One `NAME://HOST:PORT` entry of `--listeners` or `--advertised-listeners`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    /// Listener name, upper case.
    pub name: String,
    /// Host or IP; empty for every interface.
    pub host: String,
    /// Port (0 in `--listeners`: any free port).
    pub port: u16,
}

/// A parsed comma-separated endpoint list. A newtype, because clap reads a bare `Vec` field
/// as a repeated flag rather than one value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EndpointList(pub Vec<Endpoint>);

/// A parsed `--listener-security-protocol-map`: listener name → protocol.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProtocolMap(pub Vec<(String, SecurityProtocol)>);

/// Listener names as Kafka allows them: letters, digits, '_' and '-'; kept upper case.
fn listener_name(s: &str) -> Result<String, String> {
    let ok = !s.is_empty()
        && s.bytes()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'_' | b'-'));
    if ok {
        Ok(s.to_ascii_uppercase())
    } else {
        Err(format!(
            "bad listener name '{s}': use letters, digits, '_' and '-'"
        ))
    }
}

/// Parses `NAME://HOST:PORT,NAME2://[::1]:PORT` (HOST may be empty).
pub fn parse_endpoints(s: &str) -> Result<EndpointList, String> {
    let mut out = Vec::new();
    for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (name, addr) = part
            .split_once("://")
            .ok_or_else(|| format!("bad listener '{part}': use NAME://HOST:PORT"))?;
        let (host, port) = addr
            .rsplit_once(':')
            .ok_or_else(|| format!("bad listener '{part}': no port"))?;
        let port = port
            .parse::<u16>()
            .map_err(|_| format!("bad listener '{part}': bad port '{port}'"))?;
        let host = host.trim_start_matches('[').trim_end_matches(']');
        let name = listener_name(name)?;
        if out.iter().any(|e: &Endpoint| e.name == name) {
            return Err(format!("listener {name} named twice"));
        }
        out.push(Endpoint {
            name,
            host: host.to_string(),
            port,
        });
    }
    if out.is_empty() {
        return Err("no listener given".into());
    }
    Ok(EndpointList(out))
}

/// Parses "NAME:PROTOCOL,NAME2:PROTOCOL".
pub fn parse_protocol_map(s: &str) -> Result<ProtocolMap, String> {
    let mut out = Vec::new();
    for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (name, proto) = part
            .split_once(':')
            .ok_or_else(|| format!("bad map entry '{part}': use NAME:PROTOCOL"))?;
        let proto = SecurityProtocol::from_str(proto, true)
            .map_err(|_| format!("bad map entry '{part}': unknown security protocol"))?;
        out.push((listener_name(name)?, proto));
    }
    Ok(ProtocolMap(out))
}

/// A listener the server binds: on every shard core, and with `--advertise-shards` also on
/// one port per shard.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listener {
    /// Its name; Metadata answers a connection with the addresses of the listener it came
    /// in on.
    pub name: String,
    /// What its clients speak.
    pub protocol: SecurityProtocol,
    /// Address it binds.
    pub bind: SocketAddr,
    /// Host clients are told to connect to.
    pub advertised_host: String,
    /// Port clients are told to connect to.
    pub advertised_port: u16,
    /// First per-shard port with `--advertise-shards` (may pass 65535: see
    /// [`super::Config::check_ports`]).
    pub shard_base: u32,
}

impl Listener {
    /// The own port of shard `shard` with `--advertise-shards` (bound and advertised).
    pub fn shard_port(&self, shard: usize) -> u16 {
        u16::try_from(self.shard_base + shard as u32).unwrap_or(u16::MAX)
    }

    /// The address shard `shard` binds with `--advertise-shards`.
    pub fn shard_bind(&self, shard: usize) -> SocketAddr {
        SocketAddr::new(self.bind.ip(), self.shard_port(shard))
    }
}

/// The host to advertise for a bind host: itself, or 127.0.0.1 for every interface.
fn default_advertised(host: &str) -> String {
    match host.parse::<std::net::IpAddr>() {
        Ok(ip) if ip.is_unspecified() => "127.0.0.1".into(),
        Ok(ip) => ip.to_string(),
        Err(_) if host.is_empty() => "127.0.0.1".into(),
        Err(_) => host.to_string(),
    }
}

/// `host:port` as a socket address (a name resolves to its first address).
fn bind_addr(name: &str, host: &str, port: u16) -> Result<SocketAddr, String> {
    let host = if host.is_empty() { "0.0.0.0" } else { host };
    let addr = match host.parse::<std::net::IpAddr>() {
        Ok(ip) => Some(SocketAddr::new(ip, port)),
        Err(_) => (host, port)
            .to_socket_addrs()
            .map_err(|e| format!("listener {name}: cannot resolve '{host}': {e}"))?
            .next(),
    };
    addr.ok_or_else(|| format!("listener {name}: '{host}' has no address"))
}

/// The listeners `config` describes, in flag order (the first is the default one: its
/// address identifies the node among Kelp nodes).
pub(super) fn resolve(config: &super::Config) -> Result<Vec<Listener>, String> {
    let advertised = |name: &str| {
        config
            .advertised_listeners
            .as_ref()
            .and_then(|l| l.0.iter().find(|e| e.name == name))
    };
    let list = match &config.listeners {
        None => {
            let name = config.security_protocol.name().to_string();
            let (host, port) = match advertised(&name) {
                Some(e) => (e.host.clone(), e.port),
                None => (
                    config.advertised_host(),
                    u16::try_from(config.advertised_port()).unwrap_or(config.listen.port()),
                ),
            };
            vec![Listener {
                name,
                protocol: config.security_protocol,
                bind: config.listen,
                advertised_host: host,
                advertised_port: port,
                shard_base: config
                    .shard_base_port
                    .map_or(u32::from(config.listen.port()) + 1, u32::from),
            }]
        }
        Some(endpoints) => {
            let mut out = Vec::with_capacity(endpoints.0.len());
            for (i, e) in endpoints.0.iter().enumerate() {
                let mapped = config
                    .listener_security_protocol_map
                    .as_ref()
                    .and_then(|m| m.0.iter().find(|(n, _)| *n == e.name).map(|(_, p)| *p));
                let protocol = match mapped {
                    Some(p) => p,
                    None => SecurityProtocol::from_str(&e.name, true).map_err(|_| {
                        format!(
                            "listener {} has no security protocol: name it in --listener-security-protocol-map",
                            e.name
                        )
                    })?,
                };
                let bind = bind_addr(&e.name, &e.host, e.port)?;
                let (host, port) = match advertised(&e.name) {
                    Some(a) => (a.host.clone(), a.port),
                    None => (default_advertised(&e.host), bind.port()),
                };
                let shard_base = match config.shard_base_port {
                    Some(p) if i == 0 => u32::from(p),
                    _ => u32::from(bind.port()) + 1,
                };
                out.push(Listener {
                    name: e.name.clone(),
                    protocol,
                    bind,
                    advertised_host: host,
                    advertised_port: port,
                    shard_base,
                });
            }
            out
        }
    };
    if let Some(adv) = &config.advertised_listeners {
        if let Some(stray) = adv
            .0
            .iter()
            .find(|a| !list.iter().any(|l| l.name == a.name))
        {
            return Err(format!(
                "--advertised-listeners names {}, which is not a listener",
                stray.name
            ));
        }
        if let Some(zero) = adv.0.iter().find(|a| a.port == 0 || a.host.is_empty()) {
            return Err(format!(
                "--advertised-listeners: {} needs a host and a port",
                zero.name
            ));
        }
    }
    Ok(list)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;
    use clap::Parser;

    fn config(args: &[&str]) -> Config {
        let mut all = vec!["kelp"];
        all.extend_from_slice(args);
        Config::try_parse_from(all).unwrap()
    }

    #[test]
    fn the_single_listener_flags_make_one_listener() {
        let c = config(&["--listen", "0.0.0.0:9092", "--advertised-port", "19092"]);
        let l = c.listeners().unwrap();
        assert_eq!(l.len(), 1);
        assert_eq!(l[0].name, "PLAINTEXT");
        assert_eq!(l[0].protocol, SecurityProtocol::Plaintext);
        assert_eq!(
            (l[0].advertised_host.as_str(), l[0].advertised_port),
            ("127.0.0.1", 19092)
        );
        assert_eq!(l[0].shard_port(1), 9094);
    }

    #[test]
    fn named_listeners_with_a_protocol_map_and_advertised_addresses() {
        let c = config(&[
            "--listeners",
            "INTERNAL://127.0.0.1:9092,ssl://0.0.0.0:9093,EXT://[::1]:9094",
            "--listener-security-protocol-map",
            "INTERNAL:PLAINTEXT,EXT:ssl",
            "--advertised-listeners",
            "EXT://kafka.example.com:443",
        ]);
        let l = c.listeners().unwrap();
        let names: Vec<_> = l.iter().map(|l| (l.name.as_str(), l.protocol)).collect();
        assert_eq!(
            names,
            [
                ("INTERNAL", SecurityProtocol::Plaintext),
                ("SSL", SecurityProtocol::Ssl),
                ("EXT", SecurityProtocol::Ssl)
            ]
        );
        assert_eq!(l[1].advertised_host, "127.0.0.1");
        assert_eq!(l[2].bind, "[::1]:9094".parse().unwrap());
        assert_eq!(
            (l[2].advertised_host.as_str(), l[2].advertised_port),
            ("kafka.example.com", 443)
        );
        assert_eq!(l[1].shard_port(0), 9094);
    }

    #[test]
    fn bad_listener_configurations_are_refused() {
        assert!(parse_endpoints("PLAINTEXT//x:1").is_err());
        assert!(parse_endpoints("PLAINTEXT://x").is_err());
        assert!(parse_endpoints("A://x:1,a://y:2").is_err());
        assert!(parse_endpoints("A B://x:1").is_err());
        assert!(parse_protocol_map("A:TLS").is_err());
        // A name that is no protocol needs the map.
        assert!(config(&["--listeners", "INTERNAL://:9092"])
            .listeners()
            .is_err());
        // Advertising a listener that does not exist.
        assert!(config(&[
            "--listeners",
            "PLAINTEXT://:9092",
            "--advertised-listeners",
            "SSL://h:1"
        ])
        .listeners()
        .is_err());
        // --listeners replaces the single-listener flags.
        assert!(Config::try_parse_from([
            "kelp",
            "--listeners",
            "PLAINTEXT://:9092",
            "--listen",
            "0.0.0.0:9093"
        ])
        .is_err());
    }
}
