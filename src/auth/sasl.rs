//! The server side of SASL exchanges (SaslAuthenticate's bytes): PLAIN, SCRAM-SHA-256 and
//! SCRAM-SHA-512, run by rsasl against the users' SCRAM credentials ([`Credentials`]); PLAIN
//! checks the password against the user's SCRAM credential, so no password is ever stored.
//!
//! rsasl 2.3.1's SCRAM parser slices attributes without checking their length (a message
//! like `n,,n` panics it), and a panic aborts Kelp: every SCRAM message passes
//! [`scram_input_ok`] first. The `sasl_exchange` fuzz target runs this module with
//! arbitrary messages.

use std::sync::Arc;

use rsasl::callback::{Context, Request, SessionCallback, SessionData};
use rsasl::mechanisms::plain::PLAIN;
use rsasl::mechanisms::scram::properties::ScramStoredPassword;
use rsasl::mechanisms::scram::{SCRAM_SHA256, SCRAM_SHA512};
use rsasl::prelude::{Mechname, SASLConfig, SASLServer, Session, SessionError, State, Validation};
use rsasl::property::{AuthId, AuthzId, Password};
use rsasl::validate::{Validate, ValidationError};

use super::credentials::Credentials;
use super::scram::Mechanism;

/// Longest SASL message accepted: real ones are a few hundred bytes.
pub const MAX_MESSAGE: usize = 8 * 1024;

/// A SASL mechanism Kelp serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SaslMechanism {
    /// PLAIN (RFC 4616): user and password in one message; use it over TLS only.
    Plain,
    /// SCRAM-SHA-256 or SCRAM-SHA-512 (RFC 5802).
    Scram(Mechanism),
}

impl SaslMechanism {
    /// Its SASL name.
    pub fn name(self) -> &'static str {
        match self {
            SaslMechanism::Plain => "PLAIN",
            SaslMechanism::Scram(m) => m.name(),
        }
    }

    /// From its SASL name (case as Kafka: exact).
    pub fn from_name(name: &str) -> Option<Self> {
        match name {
            "PLAIN" => Some(SaslMechanism::Plain),
            other => Mechanism::from_name(other).map(SaslMechanism::Scram),
        }
    }
}

/// What an exchange ends with: the user's name, or why it failed (for the log; the client
/// is told only that authentication failed).
struct Outcome;

impl Validation for Outcome {
    type Value = Result<String, String>;
}

/// rsasl's view of the credentials.
struct Lookup {
    credentials: Arc<Credentials>,
}

/// A user unknown to SCRAM: refused at the first message, as Kafka does.
#[derive(Debug, thiserror::Error)]
#[error("unknown user")]
struct UnknownUser;

/// SCRAM user names escape ',' and '=' as "=2C" and "=3D" (RFC 5802); rsasl hands them on
/// escaped. None for a bad escape.
fn unescape(name: &str) -> Option<String> {
    let mut parts = name.split('=');
    let mut out = parts.next()?.to_string();
    for p in parts {
        let (c, rest) = if let Some(r) = p.strip_prefix("2C") {
            (',', r)
        } else {
            ('=', p.strip_prefix("3D")?)
        };
        out.push(c);
        out.push_str(rest);
    }
    Some(out)
}

impl SessionCallback for Lookup {
    fn callback(
        &self,
        session: &SessionData,
        context: &Context,
        request: &mut Request,
    ) -> Result<(), SessionError> {
        if request.is::<ScramStoredPassword>() {
            let mechanism = Mechanism::from_name(session.mechanism().mechanism.as_str());
            let user = context.get_ref::<AuthId>().and_then(unescape);
            let cred = match (user, mechanism) {
                (Some(u), Some(m)) => self.credentials.get(&u, m),
                _ => None,
            };
            let Some(c) = cred else {
                return Err(ValidationError::Boxed(Box::new(UnknownUser)).into());
            };
            let iterations = u32::try_from(c.iterations).unwrap_or(0);
            request.satisfy::<ScramStoredPassword>(&ScramStoredPassword::new(
                iterations,
                &c.salt,
                &c.stored_key,
                &c.server_key,
            ))?;
        }
        Ok(())
    }

    fn validate(
        &self,
        session: &SessionData,
        context: &Context,
        validate: &mut Validate<'_>,
    ) -> Result<(), ValidationError> {
        let plain = session.mechanism().mechanism.as_str() == "PLAIN";
        let raw = context.get_ref::<AuthId>().unwrap_or_default();
        let user = if plain {
            Some(raw.to_string())
        } else {
            unescape(raw)
        };
        let outcome = match user {
            None => Err("bad user name escape".to_string()),
            Some(user) => {
                let authzid = context.get_ref::<AuthzId>().filter(|z| !z.is_empty());
                if authzid.is_some_and(|z| z != user) {
                    Err(format!("{user} may not act as another user"))
                } else if plain {
                    let password = context.get_ref::<Password>().unwrap_or_default();
                    let password = std::str::from_utf8(password).unwrap_or("");
                    let ok = Mechanism::ALL.into_iter().any(|m| {
                        self.credentials
                            .get(&user, m)
                            .is_some_and(|c| c.matches(m, password))
                    });
                    if ok {
                        Ok(user)
                    } else {
                        Err(format!("wrong password or unknown user {user}"))
                    }
                } else {
                    // SCRAM calls this only once the client's proof has checked out.
                    Ok(user)
                }
            }
        };
        validate.finalize::<Outcome>(outcome);
        Ok(())
    }
}

/// SASL for the whole broker: the enabled mechanisms and rsasl's configuration.
pub struct Sasl {
    config: Arc<SASLConfig>,
    enabled: Vec<SaslMechanism>,
}

impl Sasl {
    /// SASL over `credentials` with the `enabled` mechanisms (`--sasl-enabled-mechanisms`).
    pub fn new(credentials: Arc<Credentials>, enabled: &[String]) -> anyhow::Result<Self> {
        static ALL: &[rsasl::prelude::Mechanism] = &[SCRAM_SHA512, SCRAM_SHA256, PLAIN];
        let config = SASLConfig::builder()
            .with_registry(rsasl::prelude::Registry::with_mechanisms(ALL))
            .with_callback(Lookup { credentials })
            .map_err(|e| anyhow::anyhow!("SASL configuration: {e}"))?;
        let enabled = enabled
            .iter()
            .map(|n| {
                SaslMechanism::from_name(n)
                    .ok_or_else(|| anyhow::anyhow!("unsupported SASL mechanism {n}"))
            })
            .collect::<anyhow::Result<Vec<_>>>()?;
        Ok(Sasl { config, enabled })
    }

    /// The enabled mechanisms' names (SaslHandshake's answer).
    pub fn enabled_names(&self) -> Vec<&'static str> {
        self.enabled.iter().map(|m| m.name()).collect()
    }

    /// The enabled mechanism called `name`.
    pub fn enabled(&self, name: &str) -> Option<SaslMechanism> {
        SaslMechanism::from_name(name).filter(|m| self.enabled.contains(m))
    }

    /// A new server-side exchange of `mechanism`.
    pub fn start(&self, mechanism: SaslMechanism) -> Result<Exchange, String> {
        let name = Mechname::parse(mechanism.name().as_bytes()).map_err(|e| e.to_string())?;
        let session = SASLServer::<Outcome>::new(self.config.clone())
            .start_suggested(name)
            .map_err(|e| e.to_string())?;
        Ok(Exchange {
            session,
            mechanism,
            steps: 0,
            done: false,
        })
    }
}

impl std::fmt::Debug for Sasl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sasl")
            .field("enabled", &self.enabled)
            .finish()
    }
}

/// One authentication in progress on a connection.
pub struct Exchange {
    session: Session<Outcome>,
    mechanism: SaslMechanism,
    steps: u32,
    done: bool,
}

impl std::fmt::Debug for Exchange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Exchange")
            .field("mechanism", &self.mechanism)
            .field("steps", &self.steps)
            .finish()
    }
}

/// What one client message leads to.
#[derive(Debug, PartialEq, Eq)]
pub enum Step {
    /// Send this and wait for the client's next message.
    Continue(Vec<u8>),
    /// Authenticated as `user`; send `reply` (SCRAM's server-final, PLAIN's empty one).
    Authenticated {
        /// The user name.
        user: String,
        /// The last server message.
        reply: Vec<u8>,
    },
    /// Failed; the reason is for the log.
    Failed(String),
}

/// Whether a SCRAM message has only attributes rsasl can parse without panicking: every
/// comma-separated field at least "x=" long, but for a client-first message's channel
/// binding flag and its authzid, which may be empty.
pub fn scram_input_ok(msg: &[u8], first: bool) -> bool {
    msg.split(|b| *b == b',')
        .enumerate()
        .all(|(i, f)| match (first, i) {
            (true, 0) => true,
            (true, 1) => f.is_empty() || f.len() >= 2,
            _ => f.len() >= 2,
        })
}

impl Exchange {
    /// The mechanism being run.
    pub fn mechanism(&self) -> SaslMechanism {
        self.mechanism
    }

    /// Takes the client's next message.
    pub fn step(&mut self, msg: &[u8]) -> Step {
        self.steps += 1;
        if self.done {
            return Step::Failed("the exchange is over".into());
        }
        if msg.len() > MAX_MESSAGE {
            self.done = true;
            return Step::Failed(format!("a SASL message of {} bytes", msg.len()));
        }
        if matches!(self.mechanism, SaslMechanism::Scram(_))
            && !scram_input_ok(msg, self.steps == 1)
        {
            self.done = true;
            return Step::Failed("malformed SCRAM message".into());
        }
        let mut out = Vec::new();
        match self.session.step(Some(msg), &mut out) {
            Ok(State::Running) => Step::Continue(out),
            Ok(State::Finished(_)) => {
                self.done = true;
                match self.session.validation() {
                    Some(Ok(user)) => Step::Authenticated { user, reply: out },
                    Some(Err(why)) => Step::Failed(why),
                    // SCRAM with a wrong proof ends with "e=invalid-proof" and no outcome.
                    None => Step::Failed(String::from_utf8_lossy(&out).into_owned()),
                }
            }
            Err(e) => {
                self.done = true;
                Step::Failed(e.to_string())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::credentials::Change;
    use crate::auth::scram::{salt_password, Credential};
    use hmac::{Mac, SimpleHmac};
    use sha2::{Digest, Sha256, Sha512};

    fn b64(bytes: &[u8]) -> String {
        const A: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
        let mut s = String::new();
        for c in bytes.chunks(3) {
            let n = (u32::from(c[0]) << 16)
                | (u32::from(*c.get(1).unwrap_or(&0)) << 8)
                | u32::from(*c.get(2).unwrap_or(&0));
            for i in 0..4 {
                if i <= c.len() {
                    s.push(A[(n >> (18 - 6 * i) & 63) as usize] as char);
                } else {
                    s.push('=');
                }
            }
        }
        s
    }

    fn unb64(s: &str) -> Vec<u8> {
        const A: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
        let mut bits = 0u32;
        let mut n = 0;
        let mut out = Vec::new();
        for ch in s.bytes().filter(|&b| b != b'=') {
            bits = (bits << 6) | A.iter().position(|&a| a == ch).unwrap() as u32;
            n += 6;
            if n >= 8 {
                n -= 8;
                out.push((bits >> n) as u8);
            }
        }
        out
    }

    fn hmac<D: Digest + hmac::digest::core_api::BlockSizeUser>(k: &[u8], m: &[u8]) -> Vec<u8> {
        let mut h = <SimpleHmac<D> as Mac>::new_from_slice(k).unwrap();
        h.update(m);
        h.finalize().into_bytes().to_vec()
    }

    fn sasl() -> Sasl {
        let creds = Arc::new(Credentials::default());
        let changes: Vec<Change> = Mechanism::ALL
            .into_iter()
            .map(|m| Change {
                user: "al,ice".into(),
                mechanism: m,
                credential: Some(Credential::from_password(m, "secret", 4096)),
            })
            .collect();
        let (c, _) = creds.changed("al,ice", &changes).unwrap();
        creds.put("al,ice", c);
        let all = ["SCRAM-SHA-256", "SCRAM-SHA-512", "PLAIN"].map(String::from);
        Sasl::new(creds, &all).unwrap()
    }

    /// A hand-written RFC 5802 client against the exchange.
    fn scram<D: Digest + hmac::digest::core_api::BlockSizeUser + Clone + Sync>(
        s: &Sasl,
        m: Mechanism,
        user: &str,
        password: &str,
    ) -> Step {
        let mut x = s.start(SaslMechanism::Scram(m)).unwrap();
        let bare = format!(
            "n={},r=clientnonce",
            user.replace('=', "=3D").replace(',', "=2C")
        );
        let first = match x.step(format!("n,,{bare}").as_bytes()) {
            Step::Continue(f) => String::from_utf8(f).unwrap(),
            other => return other,
        };
        let attr = |k: &str| {
            first
                .split(',')
                .find_map(|p| p.strip_prefix(k))
                .unwrap()
                .to_string()
        };
        let (nonce, salt, i) = (attr("r="), unb64(&attr("s=")), attr("i=").parse().unwrap());
        let salted = salt_password(m, password, &salt, i);
        let client_key = hmac::<D>(&salted, b"Client Key");
        let no_proof = format!("c=biws,r={nonce}");
        let auth = format!("{bare},{first},{no_proof}");
        let sig = hmac::<D>(&D::digest(&client_key), auth.as_bytes());
        let proof: Vec<u8> = client_key.iter().zip(&sig).map(|(a, b)| a ^ b).collect();
        let step = x.step(format!("{no_proof},p={}", b64(&proof)).as_bytes());
        if let Step::Authenticated { reply, .. } = &step {
            let server_key = hmac::<D>(&salted, b"Server Key");
            let v = String::from_utf8(reply.clone()).unwrap();
            assert_eq!(
                v,
                format!("v={}", b64(&hmac::<D>(&server_key, auth.as_bytes())))
            );
        }
        step
    }

    #[test]
    fn scram_both_hashes_and_plain() {
        let s = sasl();
        let ok = |st: Step| matches!(st, Step::Authenticated { user, .. } if user == "al,ice");
        assert!(ok(scram::<Sha256>(
            &s,
            Mechanism::Sha256,
            "al,ice",
            "secret"
        )));
        assert!(ok(scram::<Sha512>(
            &s,
            Mechanism::Sha512,
            "al,ice",
            "secret"
        )));
        assert!(matches!(
            scram::<Sha512>(&s, Mechanism::Sha512, "al,ice", "wrong"),
            Step::Failed(_)
        ));
        assert!(matches!(
            scram::<Sha256>(&s, Mechanism::Sha256, "bob", "secret"),
            Step::Failed(_)
        ));
        let mut p = s.start(SaslMechanism::Plain).unwrap();
        assert!(ok(p.step(b"\0al,ice\0secret")));
        let mut p = s.start(SaslMechanism::Plain).unwrap();
        assert!(matches!(p.step(b"\0al,ice\0nope"), Step::Failed(_)));
        let mut p = s.start(SaslMechanism::Plain).unwrap();
        assert!(matches!(p.step(b"bob\0al,ice\0secret"), Step::Failed(_)));
    }

    #[test]
    fn malformed_messages_fail_without_panicking() {
        let s = sasl();
        for (first, msg) in [
            (true, &b"n,,n"[..]),
            (true, b"n,a,n=x,r=y"),
            (true, b"n,,n=x,r"),
            (true, b"n,,n=x,r=y,"),
            (true, b""),
            (true, b"garbage"),
        ] {
            let mut x = s.start(SaslMechanism::Scram(Mechanism::Sha256)).unwrap();
            assert!(matches!(x.step(msg), Step::Failed(_)), "{first} {msg:?}");
        }
        let mut x = s.start(SaslMechanism::Scram(Mechanism::Sha256)).unwrap();
        assert!(matches!(x.step(b"n,,n=al=2Cice,r=abc"), Step::Continue(_)));
        assert!(matches!(x.step(b"c=biws,r,p"), Step::Failed(_)));
        assert!(matches!(x.step(b"c=biws"), Step::Failed(_)));
        assert!(matches!(
            s.start(SaslMechanism::Plain)
                .unwrap()
                .step(&[0u8; MAX_MESSAGE + 1]),
            Step::Failed(_)
        ));
        assert_eq!(unescape("a=2Cb=3Dc").as_deref(), Some("a,b=c"));
        assert_eq!(unescape("a=zz"), None);
        assert!(Sasl::new(Arc::default(), &["GSSAPI".to_string()]).is_err());
        assert_eq!(
            s.enabled("SCRAM-SHA-512"),
            Some(SaslMechanism::Scram(Mechanism::Sha512))
        );
    }
}
