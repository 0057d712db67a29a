//! The server side of SASL exchanges (SaslAuthenticate's bytes): PLAIN, SCRAM-SHA-256,
//! SCRAM-SHA-512 and OAUTHBEARER, run by rsasl against the users' SCRAM credentials
//! ([`Credentials`]) and the token validator ([`TokenValidator`]); PLAIN checks the password
//! against the user's SCRAM credential, so no password is ever stored.
//!
//! rsasl 2.3.1's SCRAM parser slices attributes without checking their length (a message
//! like `n,,n` panics it), and a panic aborts Kelp: every SCRAM message passes
//! [`scram_input_ok`] first. The `sasl_exchange` fuzz target runs this module with
//! arbitrary messages.

use std::sync::Arc;
use std::time::SystemTime;

use rsasl::callback::{Context, Request, SessionCallback, SessionData};
use rsasl::mechanisms::oauthbearer::properties::{OAuthBearerError, OAuthBearerValidate};
use rsasl::mechanisms::oauthbearer::OAUTHBEARER;
use rsasl::mechanisms::plain::PLAIN;
use rsasl::mechanisms::scram::properties::ScramStoredPassword;
use rsasl::mechanisms::scram::{SCRAM_SHA256, SCRAM_SHA512};
use rsasl::prelude::{Mechname, SASLConfig, SASLServer, Session, SessionError, State, Validation};
use rsasl::property::{AuthId, AuthzId, OAuthBearerToken, Password};
use rsasl::validate::{Validate, ValidationError};

use super::credentials::Credentials;
use super::oauth::TokenValidator;
use super::scram::Mechanism;

/// Longest SASL message accepted for PLAIN and SCRAM: real ones are a few hundred bytes.
pub const MAX_MESSAGE: usize = 8 * 1024;

/// Longest OAUTHBEARER message: JWTs with many claims run to several KiB.
pub const MAX_TOKEN_MESSAGE: usize = 64 * 1024;

/// A SASL mechanism Kelp serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SaslMechanism {
    /// PLAIN (RFC 4616): user and password in one message; use it over TLS only.
    Plain,
    /// SCRAM-SHA-256 or SCRAM-SHA-512 (RFC 5802).
    Scram(Mechanism),
    /// OAUTHBEARER (RFC 7628): a JWT, checked by the [`TokenValidator`].
    OAuthBearer,
}

impl SaslMechanism {
    /// Its SASL name.
    pub fn name(self) -> &'static str {
        match self {
            SaslMechanism::Plain => "PLAIN",
            SaslMechanism::Scram(m) => m.name(),
            SaslMechanism::OAuthBearer => "OAUTHBEARER",
        }
    }

    /// From its SASL name (case as Kafka: exact).
    pub fn from_name(name: &str) -> Option<Self> {
        match name {
            "PLAIN" => Some(SaslMechanism::Plain),
            "OAUTHBEARER" => Some(SaslMechanism::OAuthBearer),
            other => Mechanism::from_name(other).map(SaslMechanism::Scram),
        }
    }
}

/// Who an exchange authenticated, and until when (an OAUTHBEARER token's `exp`).
#[derive(Debug)]
struct Authn {
    user: String,
    expires: Option<SystemTime>,
}

/// What an exchange ends with: who, or why it failed (for the log; the client is told only
/// that authentication failed).
struct Outcome;

impl Validation for Outcome {
    type Value = Result<Authn, String>;
}

/// rsasl's view of the credentials and tokens.
struct Lookup {
    credentials: Arc<Credentials>,
    oauth: Option<Arc<TokenValidator>>,
}

impl Lookup {
    /// An OAUTHBEARER token's principal, or why it is refused. Run by rsasl's validation
    /// request (which decides whether the client gets RFC 7628's error JSON) and again by the
    /// final validation (which decides the outcome): rsasl asks both with the same token.
    fn token(&self, context: &Context) -> Result<Authn, (&'static str, String)> {
        let Some(v) = &self.oauth else {
            return Err(("invalid_token", "OAUTHBEARER is not configured".into()));
        };
        let auth = context.get_ref::<OAuthBearerToken>().unwrap_or_default();
        let token = v
            .validate(auth, SystemTime::now())
            .map_err(|e| (e.status, e.reason))?;
        // Kafka: an authorization id, if sent, must be the token's principal.
        match context.get_ref::<AuthzId>().filter(|z| !z.is_empty()) {
            Some(z) if z != token.principal => Err((
                "invalid_token",
                format!("{} may not act as {z}", token.principal),
            )),
            _ => Ok(Authn {
                user: token.principal,
                expires: Some(token.expires),
            }),
        }
    }
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
        if request.is::<OAuthBearerValidate>() {
            let verdict = self.token(context).map(|_| ());
            let answer = verdict
                .as_ref()
                .map(|_| ())
                .map_err(|(status, _)| OAuthBearerError::new(status, None, None));
            request.satisfy::<OAuthBearerValidate>(&answer)?;
            return Ok(());
        }
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
        if session.mechanism().mechanism.as_str() == "OAUTHBEARER" {
            validate.finalize::<Outcome>(self.token(context).map_err(|(_, why)| why));
            return Ok(());
        }
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
                        Ok(Authn {
                            user,
                            expires: None,
                        })
                    } else {
                        Err(format!("wrong password or unknown user {user}"))
                    }
                } else {
                    // SCRAM calls this only once the client's proof has checked out.
                    Ok(Authn {
                        user,
                        expires: None,
                    })
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
    /// SASL over `credentials` and OAUTHBEARER tokens checked by `oauth`, with the `enabled`
    /// mechanisms (`--sasl-enabled-mechanisms`).
    pub fn new(
        credentials: Arc<Credentials>,
        oauth: Option<Arc<TokenValidator>>,
        enabled: &[String],
    ) -> anyhow::Result<Self> {
        static ALL: &[rsasl::prelude::Mechanism] =
            &[SCRAM_SHA512, SCRAM_SHA256, PLAIN, OAUTHBEARER];
        let config = SASLConfig::builder()
            .with_registry(rsasl::prelude::Registry::with_mechanisms(ALL))
            .with_callback(Lookup { credentials, oauth })
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
            refusal: None,
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
    /// RFC 7628's error JSON sent to an OAUTHBEARER client: the failure's message once the
    /// client acknowledges it, as Kafka words it.
    refusal: Option<String>,
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
        /// When the credential runs out (an OAUTHBEARER token's `exp`).
        expires: Option<SystemTime>,
    },
    /// Failed.
    Failed(Failure),
}

/// Why an exchange failed.
#[derive(Debug, PartialEq, Eq)]
pub struct Failure {
    /// For the log.
    pub reason: String,
    /// For the client, when the mechanism words it (OAUTHBEARER's error JSON); otherwise the
    /// client learns only that authentication failed.
    pub message: Option<String>,
}

impl From<String> for Failure {
    fn from(reason: String) -> Self {
        Failure {
            reason,
            message: None,
        }
    }
}

impl From<&str> for Failure {
    fn from(reason: &str) -> Self {
        reason.to_string().into()
    }
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
        let max = match self.mechanism {
            SaslMechanism::OAuthBearer => MAX_TOKEN_MESSAGE,
            _ => MAX_MESSAGE,
        };
        if msg.len() > max {
            self.done = true;
            return Step::Failed(format!("a SASL message of {} bytes", msg.len()).into());
        }
        if matches!(self.mechanism, SaslMechanism::Scram(_))
            && !scram_input_ok(msg, self.steps == 1)
        {
            self.done = true;
            return Step::Failed("malformed SCRAM message".into());
        }
        let mut out = Vec::new();
        match self.session.step(Some(msg), &mut out) {
            Ok(State::Running) => {
                if self.mechanism == SaslMechanism::OAuthBearer {
                    self.refusal = Some(String::from_utf8_lossy(&out).into_owned());
                }
                Step::Continue(out)
            }
            Ok(State::Finished(_)) => {
                self.done = true;
                match self.session.validation() {
                    Some(Ok(Authn { user, expires })) => Step::Authenticated {
                        user,
                        reply: out,
                        expires,
                    },
                    Some(Err(reason)) => Step::Failed(Failure {
                        reason,
                        message: self.refusal.take(),
                    }),
                    // SCRAM with a wrong proof ends with "e=invalid-proof" and no outcome.
                    None => Step::Failed(String::from_utf8_lossy(&out).into_owned().into()),
                }
            }
            Err(e) => {
                self.done = true;
                Step::Failed(e.to_string().into())
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
        let all = ["SCRAM-SHA-256", "SCRAM-SHA-512", "PLAIN", "OAUTHBEARER"].map(String::from);
        let args = crate::config::oauth::OAuthArgs {
            sasl_oauthbearer_clock_skew_seconds: 0,
            ..crate::config::oauth::OAuthArgs::unsecured()
        };
        let oauth = TokenValidator::from_args(&args, true)
            .unwrap()
            .map(Arc::new);
        Sasl::new(creds, oauth, &all).unwrap()
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

    /// An OAUTHBEARER client's first message with an unsecured token for `sub` expiring at
    /// `exp` (seconds since the epoch).
    fn bearer(authzid: &str, sub: &str, exp: u64) -> Vec<u8> {
        use base64::Engine as _;
        let enc = |v: &str| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v);
        let claims = format!(r#"{{"sub":"{sub}","exp":{exp}}}"#);
        format!(
            "n,{authzid},\x01auth=Bearer {}.{}.\x01ext=1\x01\x01",
            enc(r#"{"alg":"none"}"#),
            enc(&claims)
        )
        .into_bytes()
    }

    #[test]
    fn oauthbearer_exchanges() {
        let s = sasl();
        let now = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .unwrap()
            .as_secs();
        let mut x = s.start(SaslMechanism::OAuthBearer).unwrap();
        match x.step(&bearer("", "svc", now + 3600)) {
            Step::Authenticated {
                user,
                reply,
                expires,
            } => {
                assert_eq!(user, "svc");
                assert!(reply.is_empty());
                let exp = expires.unwrap().duration_since(SystemTime::UNIX_EPOCH);
                assert_eq!(exp.unwrap().as_secs(), now + 3600);
            }
            other => panic!("{other:?}"),
        }
        // RFC 7628: an expired token gets the error JSON, the client's %x01, then failure
        // worded with that JSON (franz-go's TestOAuthAuth looks for "invalid_token").
        let mut x = s.start(SaslMechanism::OAuthBearer).unwrap();
        let Step::Continue(json) = x.step(&bearer("", "svc", now - 60)) else {
            panic!("no error challenge");
        };
        assert_eq!(json, br#"{"status":"invalid_token"}"#);
        match x.step(b"\x01") {
            Step::Failed(f) => {
                assert!(f.reason.contains("expired"), "{f:?}");
                assert_eq!(f.message.as_deref(), Some(r#"{"status":"invalid_token"}"#));
            }
            other => panic!("{other:?}"),
        }
        // An authorization id other than the token's principal.
        let mut x = s.start(SaslMechanism::OAuthBearer).unwrap();
        assert!(matches!(
            x.step(&bearer("a=admin", "svc", now + 3600)),
            Step::Continue(_)
        ));
        assert!(matches!(x.step(b"\x01"), Step::Failed(_)));
        let mut x = s.start(SaslMechanism::OAuthBearer).unwrap();
        assert!(matches!(
            x.step(&bearer("a=svc", "svc", now + 3600)),
            Step::Authenticated { .. }
        ));
        for msg in [
            &b""[..],
            b"n,,",
            b"n,,\x01\x01",
            b"y,,\x01auth=Bearer a.b.\x01\x01",
            b"n,,\x01auth=Bearer a.b.\x01bad\x01\x01",
            b"n,,\x01auth=\xff\x01\x01",
        ] {
            let mut x = s.start(SaslMechanism::OAuthBearer).unwrap();
            let first = x.step(msg);
            let end = match first {
                Step::Continue(_) => x.step(b"\x01"),
                other => other,
            };
            assert!(matches!(end, Step::Failed(_)), "{msg:?}: {end:?}");
        }
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
        assert!(Sasl::new(Arc::default(), None, &["GSSAPI".to_string()]).is_err());
        assert_eq!(
            s.enabled("SCRAM-SHA-512"),
            Some(SaslMechanism::Scram(Mechanism::Sha512))
        );
    }
}
