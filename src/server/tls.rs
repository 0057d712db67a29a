//! TLS for client connections on SSL listeners: the rustls server configuration,
//! read once at start-up from PEM files (certificate chain, private key, and with
//! `--ssl-client-ca-file` the CAs whose client certificates are required: mTLS), and the
//! handshake, bounded in time so a client that connects and says nothing holds no task.
//! Called by [`super::connection`]'s accept loop.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use futures_rustls::TlsAcceptor;
use glommio::net::TcpStream;
use rustls::server::WebPkiClientVerifier;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

use crate::config::Config;

/// How long a client has to complete the TLS handshake.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// The TLS acceptor connections take at accept time: replaced whole by [`reload`] (SIGHUP),
/// so a new connection gets the new certificate and established ones keep theirs.
pub type SharedAcceptor = Arc<arc_swap::ArcSwapOption<TlsAcceptor>>;

/// The shared acceptor for `config`'s TLS listeners, empty when every listener speaks
/// plaintext.
pub fn shared(config: &Config) -> anyhow::Result<SharedAcceptor> {
    Ok(Arc::new(arc_swap::ArcSwapOption::new(
        acceptor(config)?.map(Arc::new),
    )))
}

/// Reads the certificate, key and client CA files again into `shared`; a file that does not
/// read or parse is logged and the certificate in use stays.
pub fn reload(config: &Config, shared: &SharedAcceptor) {
    match acceptor(config) {
        Ok(Some(a)) => {
            shared.store(Some(Arc::new(a)));
            tracing::info!("TLS certificates reloaded");
        }
        Ok(None) => tracing::info!("SIGHUP: no TLS listener, nothing to reload"),
        Err(e) => {
            tracing::error!(error = %format!("{e:#}"), "TLS reload failed; keeping the certificates in use")
        }
    }
}

/// The acceptor for `config`'s TLS listeners (one certificate for all of them), None when
/// every listener speaks plaintext.
pub fn acceptor(config: &Config) -> anyhow::Result<Option<TlsAcceptor>> {
    let listeners = config.listeners().map_err(anyhow::Error::msg)?;
    let Some(first) = listeners.iter().find(|l| l.protocol.tls()) else {
        return Ok(None);
    };
    let (Some(cert), Some(key)) = (&config.ssl_certificate_file, &config.ssl_key_file) else {
        anyhow::bail!(
            "listener {} ({}) needs --ssl-certificate-file and --ssl-key-file",
            first.name,
            first.protocol.name()
        );
    };
    let server = server_config(cert, key, config.ssl_client_ca_file.as_deref())?;
    Ok(Some(TlsAcceptor::from(server)))
}

fn server_config(
    cert: &Path,
    key: &Path,
    client_ca: Option<&Path>,
) -> anyhow::Result<Arc<rustls::ServerConfig>> {
    let chain = CertificateDer::pem_file_iter(cert)
        .with_context(|| format!("--ssl-certificate-file {}", cert.display()))?
        .collect::<Result<Vec<_>, _>>()
        .with_context(|| format!("--ssl-certificate-file {}", cert.display()))?;
    if chain.is_empty() {
        anyhow::bail!(
            "--ssl-certificate-file {}: no certificate in it",
            cert.display()
        );
    }
    let key = PrivateKeyDer::from_pem_file(key)
        .with_context(|| format!("--ssl-key-file {}", key.display()))?;
    #[allow(
        deprecated,
        reason = "ring builds with cc alone (aws-lc-rs needs cmake on the host); it lacks only the post-quantum key exchange"
    )]
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .context("TLS protocol versions")?;
    let builder = match client_ca {
        None => builder.with_no_client_auth(),
        Some(path) => {
            let mut roots = rustls::RootCertStore::empty();
            for c in CertificateDer::pem_file_iter(path)
                .with_context(|| format!("--ssl-client-ca-file {}", path.display()))?
            {
                let c = c.with_context(|| format!("--ssl-client-ca-file {}", path.display()))?;
                roots
                    .add(c)
                    .with_context(|| format!("--ssl-client-ca-file {}", path.display()))?;
            }
            let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
                .build()
                .context("client certificate verifier")?;
            builder.with_client_cert_verifier(verifier)
        }
    };
    let mut server = builder
        .with_single_cert(chain, key)
        .context("the certificate and key do not go together")?;
    server.alpn_protocols.clear();
    Ok(Arc::new(server))
}

/// The RFC 2253 subject of the certificate the client showed (mutual TLS), if it showed one.
pub fn client_subject(stream: &futures_rustls::server::TlsStream<TcpStream>) -> Option<String> {
    let (_, conn) = stream.get_ref();
    let leaf = conn.peer_certificates()?.first()?;
    crate::auth::principal::subject_name(leaf.as_ref())
}

/// Runs the server side of the handshake on `stream`, within [`HANDSHAKE_TIMEOUT`].
pub async fn handshake(
    acceptor: &TlsAcceptor,
    stream: TcpStream,
) -> std::io::Result<futures_rustls::server::TlsStream<TcpStream>> {
    match crate::deadline::until(
        acceptor.accept(stream),
        std::time::Instant::now() + HANDSHAKE_TIMEOUT,
    )
    .await
    {
        Some(r) => r,
        None => Err(std::io::Error::new(
            std::io::ErrorKind::TimedOut,
            "TLS handshake not done in time",
        )),
    }
}
