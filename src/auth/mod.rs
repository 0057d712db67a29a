//! Who is on a connection: the listener it came in on, the client's address, and on SASL
//! listeners where its authentication stands (KIP-368 re-authentication included). Owns the
//! SCRAM credentials ([`credentials`]), their derivation ([`scram`]), OAUTHBEARER tokens
//! ([`oauth`]), the SASL exchanges ([`sasl`]) and the ACLs with their authorizer ([`acl`]).
//! The connection builds a [`Session`] per accepted socket and asks it which requests it may
//! serve; the SaslHandshake and SaslAuthenticate handlers move it on.

pub mod acl;
pub mod credentials;
pub mod oauth;
pub mod principal;
pub mod refreshed;
pub mod sasl;
pub mod scram;

use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use crate::config::Listener;
use crate::protocol::versions::key;
use sasl::{Exchange, Sasl, SaslMechanism};

/// The principal of a client that showed nothing.
const ANONYMOUS: &str = "User:ANONYMOUS";

/// Where a SASL connection's exchange stands.
#[derive(Debug)]
enum Phase {
    /// No exchange under way: a SaslHandshake may start one.
    Idle,
    /// Handshake done: the next SaslAuthenticate starts this mechanism.
    Chosen(SaslMechanism),
    /// Messages going back and forth (boxed: rsasl's session is large, and every
    /// connection's session carries a phase).
    Exchanging(Box<Exchange>),
}

/// A finished authentication.
#[derive(Debug, Clone)]
struct Authenticated {
    user: String,
    mechanism: SaslMechanism,
    /// When it runs out (KIP-368): `--connections-max-reauth-ms` after it, or the token's
    /// expiry if sooner.
    until: Option<Instant>,
}

/// One client connection as the handlers see it.
#[derive(Debug)]
pub struct Session {
    /// The client's address ("ip:port"), as the connection saw it.
    pub peer: Rc<str>,
    /// The listener the connection came in on.
    pub listener: Arc<Listener>,
    /// SASL, on SASL_PLAINTEXT and SASL_SSL listeners.
    sasl: Option<Arc<Sasl>>,
    phase: RefCell<Phase>,
    authenticated: RefCell<Option<Authenticated>>,
    /// The subject of the client's certificate (mutual TLS), as an RFC 2253 name.
    certificate: RefCell<Option<String>>,
    /// Who requests run as, kept as it changes: every authorized request asks.
    principal: RefCell<Rc<str>>,
    /// Set when the connection must close once the responses so far are written (a failed
    /// authentication).
    closing: Cell<bool>,
    /// This connection's id, unique in the process: share sessions belong to it.
    pub id: u64,
    /// Share groups this connection opened share sessions of: told when it closes, so
    /// their members' records are released at once (KIP-932), not when locks expire.
    pub share_groups: RefCell<std::collections::BTreeSet<String>>,
}

/// Connection ids handed out so far.
static CONNECTION_IDS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

/// What a SaslAuthenticate step ends with, for its response.
#[derive(Debug, PartialEq, Eq)]
pub enum AuthStep {
    /// More to come: send these bytes.
    Continue(Vec<u8>),
    /// Authenticated: send these bytes, valid this long (0: the connection's life).
    Done(Vec<u8>, Duration),
    /// Failed: the error response (with this message, when the mechanism words one), then
    /// the connection closes.
    Failed(Option<String>),
}

/// How long an authentication holds, as Kafka's SaslServerAuthenticator computes it: the
/// shorter of `--connections-max-reauth-ms` (0: no limit) and the credential's remaining life
/// (an OAUTHBEARER token's expiry); None when neither limits it. At least a millisecond, since
/// a zero lifetime tells the client "for ever".
fn lifetime(reauth: Duration, expires: Option<SystemTime>, wall: SystemTime) -> Option<Duration> {
    let left = expires.map(|e| e.duration_since(wall).unwrap_or_default());
    let limit = match (left, reauth.is_zero()) {
        (None, true) => return None,
        (None, false) => reauth,
        (Some(l), true) => l,
        (Some(l), false) => l.min(reauth),
    };
    Some(limit.max(Duration::from_millis(1)))
}

impl Session {
    /// A session for a connection from `peer` on `listener`; `sasl` is used when the
    /// listener's protocol asks for SASL.
    pub fn new(peer: &str, listener: Arc<Listener>, sasl: Option<Arc<Sasl>>) -> Self {
        let sasl = sasl.filter(|_| listener.protocol.sasl());
        Session {
            peer: Rc::from(peer),
            listener,
            sasl,
            phase: RefCell::new(Phase::Idle),
            authenticated: RefCell::new(None),
            certificate: RefCell::new(None),
            principal: RefCell::new(Rc::from(ANONYMOUS)),
            closing: Cell::new(false),
            id: CONNECTION_IDS.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
            share_groups: RefCell::new(std::collections::BTreeSet::new()),
        }
    }

    /// The principal requests run as, as Kafka names it: `User:<name>` once authenticated
    /// with SASL, else `User:<certificate subject>` for a client that showed a certificate
    /// (mutual TLS), else `User:ANONYMOUS`.
    pub fn principal(&self) -> Rc<str> {
        self.principal.borrow().clone()
    }

    fn refresh_principal(&self) {
        let p = if let Some(a) = &*self.authenticated.borrow() {
            format!("User:{}", a.user)
        } else {
            match &*self.certificate.borrow() {
                Some(subject) => format!("User:{subject}"),
                None => ANONYMOUS.into(),
            }
        };
        *self.principal.borrow_mut() = Rc::from(p);
    }

    /// Records the principal name the client's certificate maps to (mutual TLS).
    pub fn set_certificate(&self, name: String) {
        *self.certificate.borrow_mut() = Some(name);
        self.refresh_principal();
    }

    /// Whether the connection must close once its responses so far are written.
    pub fn closing(&self) -> bool {
        self.closing.get()
    }

    /// Whether a request of `api_key` may be served now; Err says why not (the connection
    /// is then closed, as Kafka does).
    pub fn admit(&self, api_key: i16, now: Instant) -> Result<(), String> {
        if self.sasl.is_none() || api_key == key::API_VERSIONS {
            return Ok(());
        }
        let phase_idle = matches!(*self.phase.borrow(), Phase::Idle);
        match api_key {
            key::SASL_HANDSHAKE if phase_idle => Ok(()),
            key::SASL_HANDSHAKE => Err("SaslHandshake in the middle of an exchange".into()),
            key::SASL_AUTHENTICATE if !phase_idle => Ok(()),
            key::SASL_AUTHENTICATE => Err("SaslAuthenticate before SaslHandshake".into()),
            _ => match &*self.authenticated.borrow() {
                None => Err("a request before SASL authentication".into()),
                Some(a) if a.until.is_some_and(|u| now >= u) => Err(format!(
                    "the authentication of {} ran out (--connections-max-reauth-ms or the \
                     token's expiry) without re-authentication",
                    a.user
                )),
                Some(_) => Ok(()),
            },
        }
    }

    /// SaslHandshake: the enabled mechanisms, and whether `mechanism` is one of them (then
    /// the next SaslAuthenticate runs it; otherwise the connection closes after the answer).
    pub fn handshake(&self, mechanism: &str) -> (Vec<&'static str>, bool) {
        let Some(sasl) = &self.sasl else {
            // Not a SASL listener: Kafka answers ILLEGAL_SASL_STATE; no mechanism is usable.
            self.closing.set(true);
            return (Vec::new(), false);
        };
        let names = sasl.enabled_names();
        match sasl.enabled(mechanism) {
            Some(m) => {
                *self.phase.borrow_mut() = Phase::Chosen(m);
                (names, true)
            }
            None => {
                self.closing.set(true);
                (names, false)
            }
        }
    }

    /// Whether this connection speaks SASL (its listener asks for it).
    pub fn uses_sasl(&self) -> bool {
        self.sasl.is_some()
    }

    /// SaslAuthenticate: the client's next message. A re-authentication (KIP-368) must be
    /// the same user with the same mechanism.
    pub fn authenticate(&self, msg: &[u8], reauth: Duration, now: Instant) -> AuthStep {
        let Some(sasl) = &self.sasl else {
            self.closing.set(true);
            return AuthStep::Failed(None);
        };
        let mut phase = self.phase.borrow_mut();
        if let Phase::Chosen(m) = *phase {
            match sasl.start(m) {
                Ok(x) => *phase = Phase::Exchanging(Box::new(x)),
                Err(e) => {
                    tracing::warn!(peer = %self.peer, mechanism = m.name(), error = %e, "cannot start a SASL exchange");
                    self.closing.set(true);
                    return AuthStep::Failed(None);
                }
            }
        }
        let Phase::Exchanging(x) = &mut *phase else {
            self.closing.set(true);
            return AuthStep::Failed(None);
        };
        let mechanism = x.mechanism();
        match x.step(msg) {
            sasl::Step::Continue(out) => AuthStep::Continue(out),
            sasl::Step::Authenticated {
                user,
                reply,
                expires,
            } => {
                *phase = Phase::Idle;
                let mut current = self.authenticated.borrow_mut();
                if let Some(before) = &*current {
                    if before.user != user || before.mechanism != mechanism {
                        tracing::info!(peer = %self.peer, was = %before.user, now = %user,
                            "SASL re-authentication as another user or mechanism refused");
                        self.closing.set(true);
                        return AuthStep::Failed(None);
                    }
                }
                if current.is_some() {
                    tracing::debug!(peer = %self.peer, %user, "SASL re-authenticated (KIP-368)");
                } else {
                    tracing::debug!(peer = %self.peer, %user, mechanism = mechanism.name(), "SASL authenticated");
                }
                let life = lifetime(reauth, expires, SystemTime::now());
                *current = Some(Authenticated {
                    user,
                    mechanism,
                    until: life.map(|l| now + l),
                });
                drop(current);
                self.refresh_principal();
                AuthStep::Done(reply, life.unwrap_or_default())
            }
            sasl::Step::Failed(failure) => {
                tracing::info!(peer = %self.peer, listener = %self.listener.name,
                    mechanism = mechanism.name(), reason = %failure.reason, "SASL authentication failed; closing");
                *phase = Phase::Idle;
                self.closing.set(true);
                AuthStep::Failed(failure.message)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lifetime_is_the_shorter_of_reauth_and_the_token() {
        let wall = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000);
        let secs = Duration::from_secs;
        assert_eq!(lifetime(Duration::ZERO, None, wall), None);
        assert_eq!(lifetime(secs(60), None, wall), Some(secs(60)));
        assert_eq!(
            lifetime(Duration::ZERO, Some(wall + secs(90)), wall),
            Some(secs(90))
        );
        assert_eq!(
            lifetime(secs(60), Some(wall + secs(90)), wall),
            Some(secs(60))
        );
        assert_eq!(
            lifetime(secs(600), Some(wall + secs(90)), wall),
            Some(secs(90))
        );
        // Accepted within the clock skew though past its expiry: over at the next request.
        assert_eq!(
            lifetime(Duration::ZERO, Some(wall - secs(5)), wall),
            Some(Duration::from_millis(1))
        );
    }
}
