//! OAUTHBEARER tokens (RFC 7628 carrying a JWT, as Kafka's KIP-255 and KIP-768): checks a
//! token's signature against the configured JSON Web Key Set, or, only when asked for, accepts
//! unsecured ones as Kafka's default validator does, then the claims Kafka's broker checks
//! (`exp`, `iat`, `nbf`, issuer, audience, the principal claim, scopes). Owns the key set and
//! its reload (SIGHUP); the SASL exchange ([`super::sasl`]) calls [`TokenValidator::validate`].
//!
//! jsonwebtoken turns JWKs into keys and checks JWS signatures; the claims are read here so
//! both modes share one set of rules and the principal claim's name can be configured.

use std::path::PathBuf;
use std::str::FromStr;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::Context as _;
use arc_swap::ArcSwap;
use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};
use base64::Engine as _;
use jsonwebtoken::jwk::{JwkSet, PublicKeyUse};
use jsonwebtoken::{Algorithm, DecodingKey};
use serde_json::{Map, Value};

use crate::config::oauth::OAuthArgs;

/// base64url read with or without padding, as JWT parts come from different issuers.
const B64URL: GeneralPurpose = GeneralPurpose::new(
    &base64::alphabet::URL_SAFE,
    GeneralPurposeConfig::new()
        .with_encode_padding(false)
        .with_decode_padding_mode(DecodePaddingMode::Indifferent),
);

/// One usable key of the set.
struct Key {
    id: Option<String>,
    /// The algorithm the set pins the key to, if any.
    alg: Option<Algorithm>,
    key: DecodingKey,
}

/// Where signing keys come from.
enum Keys {
    /// `--sasl-oauthbearer-allow-unsecured`: tokens carry no signature.
    Unsecured,
    /// The JWKS file's keys, swapped whole on reload.
    Signed {
        file: PathBuf,
        keys: ArcSwap<Vec<Key>>,
    },
}

/// A token that passed every check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ValidToken {
    /// The principal's name (the configured claim, `sub` by default).
    pub principal: String,
    /// When the token runs out (`exp`): the connection's authentication ends then.
    pub expires: SystemTime,
    /// The token's scopes.
    pub scopes: Vec<String>,
}

/// Why a token was refused: `status` goes to the client (RFC 7628's error JSON), `reason`
/// to the log only.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invalid {
    /// RFC 6750's error code: `invalid_token`.
    pub status: &'static str,
    /// What was wrong, for the broker's log.
    pub reason: String,
}

fn invalid(reason: impl Into<String>) -> Invalid {
    Invalid {
        status: "invalid_token",
        reason: reason.into(),
    }
}

/// Checks OAUTHBEARER tokens; shared by every shard.
pub struct TokenValidator {
    keys: Keys,
    issuer: Option<String>,
    audience: Vec<String>,
    principal_claim: String,
    scope_claim: String,
    skew: Duration,
}

impl std::fmt::Debug for TokenValidator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let keys = match &self.keys {
            Keys::Unsecured => "unsecured".to_string(),
            Keys::Signed { file, keys } => {
                format!("{} keys from {}", keys.load().len(), file.display())
            }
        };
        f.debug_struct("TokenValidator")
            .field("keys", &keys)
            .field("issuer", &self.issuer)
            .finish()
    }
}

/// Reads the usable keys of a JWKS document: signing keys (no `use`, or `use: sig`) that
/// jsonwebtoken can turn into a public key. HMAC secrets are not signing keys a broker should
/// hold, so `oct` keys are skipped.
fn parse_keys(json: &str) -> anyhow::Result<Vec<Key>> {
    let set: JwkSet = serde_json::from_str(json).context("not a JSON Web Key Set")?;
    let mut keys = Vec::new();
    for jwk in &set.keys {
        if matches!(
            jwk.common.public_key_use,
            Some(PublicKeyUse::Encryption) | Some(PublicKeyUse::Other(_))
        ) || matches!(
            jwk.algorithm,
            jsonwebtoken::jwk::AlgorithmParameters::OctetKey(_)
        ) {
            continue;
        }
        let alg = jwk
            .common
            .key_algorithm
            .and_then(|a| Algorithm::from_str(&a.to_string()).ok());
        match DecodingKey::from_jwk(jwk) {
            Ok(key) => keys.push(Key {
                id: jwk.common.key_id.clone(),
                alg,
                key,
            }),
            Err(e) => tracing::warn!(kid = ?jwk.common.key_id, error = %e, "JWKS: key skipped"),
        }
    }
    anyhow::ensure!(!keys.is_empty(), "no usable signing key in the set");
    Ok(keys)
}

fn read_keys(file: &PathBuf) -> anyhow::Result<Vec<Key>> {
    let json =
        std::fs::read_to_string(file).with_context(|| format!("reading {}", file.display()))?;
    parse_keys(&json).with_context(|| format!("{}", file.display()))
}

/// Seconds since the epoch in a NumericDate claim (RFC 7519: a JSON number).
fn numeric_date(claims: &Map<String, Value>, name: &str) -> Result<Option<f64>, Invalid> {
    match claims.get(name) {
        None => Ok(None),
        Some(v) => v
            .as_f64()
            .filter(|s| s.is_finite())
            .map(Some)
            .ok_or_else(|| invalid(format!("claim {name} is not a number"))),
    }
}

fn decode_part(part: &str, what: &str) -> Result<Map<String, Value>, Invalid> {
    let bytes = B64URL
        .decode(part)
        .map_err(|_| invalid(format!("the {what} is not base64url")))?;
    match serde_json::from_slice(&bytes) {
        Ok(Value::Object(m)) => Ok(m),
        _ => Err(invalid(format!("the {what} is not a JSON object"))),
    }
}

impl TokenValidator {
    /// A validator as the flags ask; reads the key set (an unreadable or empty one stops the
    /// start). `enabled` says whether OAUTHBEARER is among the SASL mechanisms; None if not.
    pub fn from_args(args: &OAuthArgs, enabled: bool) -> anyhow::Result<Option<Self>> {
        args.check(enabled).map_err(anyhow::Error::msg)?;
        if !enabled {
            return Ok(None);
        }
        let keys = match &args.sasl_oauthbearer_jwks_file {
            Some(file) => Keys::Signed {
                keys: ArcSwap::from_pointee(
                    read_keys(file).context("--sasl-oauthbearer-jwks-file")?,
                ),
                file: file.clone(),
            },
            None => Keys::Unsecured,
        };
        Ok(Some(TokenValidator {
            keys,
            issuer: args.sasl_oauthbearer_expected_issuer.clone(),
            audience: args
                .sasl_oauthbearer_expected_audience
                .iter()
                .filter(|a| !a.is_empty())
                .cloned()
                .collect(),
            principal_claim: args.sasl_oauthbearer_sub_claim_name.clone(),
            scope_claim: args.sasl_oauthbearer_scope_claim_name.clone(),
            skew: Duration::from_secs(args.sasl_oauthbearer_clock_skew_seconds),
        }))
    }

    /// Re-reads the key set (SIGHUP). A bad file keeps the keys in use; the error says why.
    pub fn reload(&self) -> anyhow::Result<usize> {
        match &self.keys {
            Keys::Unsecured => Ok(0),
            Keys::Signed { file, keys } => {
                let fresh = read_keys(file)?;
                let n = fresh.len();
                keys.store(Arc::new(fresh));
                Ok(n)
            }
        }
    }

    /// Checks the value of an OAUTHBEARER `auth=` field (`Bearer <JWT>`) at `now`.
    pub fn validate(&self, auth: &str, now: SystemTime) -> Result<ValidToken, Invalid> {
        // RFC 7628: the scheme is case-insensitive, separated by one or more spaces.
        let (scheme, token) = auth
            .split_once(' ')
            .ok_or_else(|| invalid("no Bearer scheme"))?;
        if !scheme.eq_ignore_ascii_case("bearer") {
            return Err(invalid(format!("scheme {scheme} is not Bearer")));
        }
        let token = token.trim_start_matches(' ');
        let mut parts = token.split('.');
        let (Some(h), Some(p), Some(sig), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(invalid("not a JWS in compact form (three parts)"));
        };
        let header = decode_part(h, "header")?;
        let claims = decode_part(p, "payload")?;
        let alg = header.get("alg").and_then(Value::as_str).unwrap_or("");
        match &self.keys {
            Keys::Unsecured => {
                if alg != "none" || !sig.is_empty() {
                    return Err(invalid("only unsecured tokens (alg none) are accepted"));
                }
            }
            Keys::Signed { keys, .. } => {
                let alg = Algorithm::from_str(alg)
                    .ok()
                    .filter(|a| {
                        !matches!(a, Algorithm::HS256 | Algorithm::HS384 | Algorithm::HS512)
                    })
                    .ok_or_else(|| invalid(format!("algorithm '{alg}' is not accepted")))?;
                let kid = header.get("kid").and_then(Value::as_str);
                let message = &token[..h.len() + 1 + p.len()];
                let keys = keys.load();
                let verified = keys
                    .iter()
                    .filter(|k| kid.is_none() || k.id.as_deref() == kid)
                    .filter(|k| k.alg.is_none_or(|a| a == alg))
                    .any(|k| {
                        jsonwebtoken::crypto::verify(sig, message.as_bytes(), &k.key, alg)
                            .unwrap_or(false)
                    });
                if !verified {
                    return Err(invalid(format!(
                        "no key of the set (kid {kid:?}) verifies the {alg:?} signature"
                    )));
                }
            }
        }
        self.check_claims(&claims, now)
    }

    fn check_claims(
        &self,
        claims: &Map<String, Value>,
        now: SystemTime,
    ) -> Result<ValidToken, Invalid> {
        let now_s = now
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default()
            .as_secs_f64();
        let skew = self.skew.as_secs_f64();
        let exp = numeric_date(claims, "exp")?.ok_or_else(|| invalid("no exp claim"))?;
        if exp + skew <= now_s {
            return Err(invalid(format!("expired {:.0} s ago", now_s - exp)));
        }
        match numeric_date(claims, "iat")? {
            // Kafka's broker-side validator (jose4j) requires iat on signed tokens.
            None if matches!(self.keys, Keys::Signed { .. }) => {
                return Err(invalid("no iat claim"))
            }
            Some(iat) if iat > now_s + skew => return Err(invalid("issued in the future")),
            _ => {}
        }
        if numeric_date(claims, "nbf")?.is_some_and(|nbf| nbf > now_s + skew) {
            return Err(invalid("not valid yet (nbf)"));
        }
        if let Some(want) = &self.issuer {
            if claims.get("iss").and_then(Value::as_str) != Some(want) {
                return Err(invalid(format!("issuer is not {want}")));
            }
        }
        if !self.audience.is_empty() {
            let aud: Vec<&str> = match claims.get("aud") {
                Some(Value::String(s)) => vec![s.as_str()],
                Some(Value::Array(a)) => a.iter().filter_map(Value::as_str).collect(),
                _ => Vec::new(),
            };
            if !aud.iter().any(|a| self.audience.iter().any(|w| w == a)) {
                return Err(invalid("no expected audience in aud"));
            }
        }
        let principal = claims
            .get(&self.principal_claim)
            .and_then(Value::as_str)
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .ok_or_else(|| invalid(format!("no {} claim", self.principal_claim)))?
            .to_string();
        let scopes = match claims.get(&self.scope_claim) {
            Some(Value::String(s)) => s.split_whitespace().map(String::from).collect(),
            Some(Value::Array(a)) => a
                .iter()
                .filter_map(Value::as_str)
                .map(String::from)
                .collect(),
            _ => Vec::new(),
        };
        // exp is finite; clamped so the conversion cannot panic on a far-future claim.
        let expires = UNIX_EPOCH + Duration::from_secs_f64(exp.max(0.0).min(u32::MAX as f64 * 4.0));
        Ok(ValidToken {
            principal,
            expires,
            scopes,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ring::rand::SystemRandom;
    use ring::signature::{EcdsaKeyPair, KeyPair, ECDSA_P256_SHA256_FIXED_SIGNING};

    fn enc(v: &str) -> String {
        B64URL.encode(v)
    }

    fn args() -> OAuthArgs {
        OAuthArgs::unsecured()
    }

    /// A directory of the test's own, removed when dropped (each run left two behind).
    struct Scratch(PathBuf);

    impl std::ops::Deref for Scratch {
        type Target = std::path::Path;
        fn deref(&self) -> &std::path::Path {
            &self.0
        }
    }

    impl Drop for Scratch {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn scratch() -> Scratch {
        let dir = std::env::temp_dir().join(format!("kelp-jwks-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir).unwrap();
        Scratch(dir)
    }

    fn now() -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(1_800_000_000)
    }

    /// A P-256 key, its JWKS (kid "k1") and a signer of ES256 tokens.
    struct Signer {
        pair: EcdsaKeyPair,
        jwks: String,
    }

    impl Signer {
        fn new() -> Self {
            let rng = SystemRandom::new();
            let pkcs8 =
                EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng).unwrap();
            let pair =
                EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, pkcs8.as_ref(), &rng)
                    .unwrap();
            let public = pair.public_key().as_ref();
            let (x, y) = (
                B64URL.encode(&public[1..33]),
                B64URL.encode(&public[33..65]),
            );
            let jwks = format!(
                r#"{{"keys":[{{"kty":"EC","crv":"P-256","kid":"k1","use":"sig","alg":"ES256","x":"{x}","y":"{y}"}},
                {{"kty":"oct","k":"c2VjcmV0","kid":"hmac"}}]}}"#
            );
            Signer { pair, jwks }
        }

        fn token(&self, header: &str, claims: &str) -> String {
            let message = format!("{}.{}", enc(header), enc(claims));
            let sig = self
                .pair
                .sign(&SystemRandom::new(), message.as_bytes())
                .unwrap();
            format!("Bearer {message}.{}", B64URL.encode(sig.as_ref()))
        }
    }

    fn signed(
        signer: &Signer,
        dir: &std::path::Path,
        tweak: impl Fn(&mut OAuthArgs),
    ) -> TokenValidator {
        let file = dir.join("jwks.json");
        std::fs::write(&file, &signer.jwks).unwrap();
        let mut a = args();
        a.sasl_oauthbearer_allow_unsecured = false;
        a.sasl_oauthbearer_jwks_file = Some(file);
        tweak(&mut a);
        TokenValidator::from_args(&a, true).unwrap().unwrap()
    }

    #[test]
    fn unsecured_tokens_as_kafkas_default_validator() {
        let v = TokenValidator::from_args(&args(), true).unwrap().unwrap();
        let t = |claims: &str| format!("Bearer {}.{}.", enc(r#"{"alg":"none"}"#), enc(claims));
        let ok = v
            .validate(
                &t(r#"{"sub":"admin","exp":1800003600,"scope":"a b"}"#),
                now(),
            )
            .unwrap();
        assert_eq!(ok.principal, "admin");
        assert_eq!(ok.scopes, ["a", "b"]);
        assert_eq!(ok.expires, UNIX_EPOCH + Duration::from_secs(1_800_003_600));
        // Within the clock skew, then past it.
        assert!(v
            .validate(&t(r#"{"sub":"a","exp":1799999980}"#), now())
            .is_ok());
        let e = v
            .validate(&t(r#"{"sub":"a","exp":1799999940}"#), now())
            .unwrap_err();
        assert_eq!(e.status, "invalid_token");
        for bad in [
            t(r#"{"exp":1800003600}"#),
            t(r#"{"sub":"a"}"#),
            t(r#"{"sub":"a","exp":"soon"}"#),
            t(r#"{"sub":"","exp":1800003600}"#),
            t(r#"{"sub":"a","exp":1800003600,"nbf":1800001000}"#),
            t("[1]"),
            format!(
                "Bearer {}.{}.sig",
                enc(r#"{"alg":"none"}"#),
                enc(r#"{"sub":"a","exp":1800003600}"#)
            ),
            format!(
                "Basic {}.{}.",
                enc(r#"{"alg":"none"}"#),
                enc(r#"{"sub":"a","exp":1800003600}"#)
            ),
            "Bearer".into(),
            "Bearer a.b".into(),
            "Bearer !!.??.".into(),
            "bearer x.y.z.w".into(),
        ] {
            assert!(v.validate(&bad, now()).is_err(), "{bad}");
        }
        // Scheme case and extra spaces are RFC 7628's.
        assert!(v
            .validate(
                &format!(
                    "bearer  {}.{}.",
                    enc(r#"{"alg":"none"}"#),
                    enc(r#"{"sub":"a","exp":1800003600}"#)
                ),
                now()
            )
            .is_ok());
    }

    #[test]
    fn signed_tokens_against_the_key_set() {
        let dir = scratch();
        let s = Signer::new();
        let v = signed(&s, &dir, |a| {
            a.sasl_oauthbearer_expected_issuer = Some("https://idp".into());
            a.sasl_oauthbearer_expected_audience = vec!["kelp".into(), "other".into()];
            a.sasl_oauthbearer_sub_claim_name = "client_id".into();
        });
        let good = r#"{"client_id":"svc","exp":1800003600,"iat":1800000000,"iss":"https://idp","aud":["x","kelp"],"scope":["p"]}"#;
        let ok = v
            .validate(&s.token(r#"{"alg":"ES256","kid":"k1"}"#, good), now())
            .unwrap();
        assert_eq!(
            (ok.principal.as_str(), ok.scopes.as_slice()),
            ("svc", &["p".to_string()][..])
        );
        // No kid: any key of the set may verify.
        assert!(v
            .validate(&s.token(r#"{"alg":"ES256"}"#, good), now())
            .is_ok());
        for (header, claims) in [
            (r#"{"alg":"ES256","kid":"k2"}"#, good),
            (r#"{"alg":"none"}"#, good),
            (r#"{"alg":"HS256","kid":"hmac"}"#, good),
            (
                r#"{"alg":"ES256","kid":"k1"}"#,
                r#"{"client_id":"svc","exp":1800003600,"iss":"https://idp","aud":"kelp"}"#,
            ),
            (
                r#"{"alg":"ES256","kid":"k1"}"#,
                r#"{"client_id":"svc","exp":1800003600,"iat":1800000000,"iss":"https://evil","aud":"kelp"}"#,
            ),
            (
                r#"{"alg":"ES256","kid":"k1"}"#,
                r#"{"client_id":"svc","exp":1800003600,"iat":1800000000,"iss":"https://idp","aud":"nope"}"#,
            ),
            (
                r#"{"alg":"ES256","kid":"k1"}"#,
                r#"{"sub":"svc","exp":1800003600,"iat":1800000000,"iss":"https://idp","aud":"kelp"}"#,
            ),
        ] {
            assert!(
                v.validate(&s.token(header, claims), now()).is_err(),
                "{header} {claims}"
            );
        }
        // A payload swapped under a good signature.
        let t = s.token(r#"{"alg":"ES256","kid":"k1"}"#, good);
        let mut parts: Vec<&str> = t.split('.').collect();
        let forged = enc(&good.replace("svc", "admin"));
        parts[1] = &forged;
        assert!(v.validate(&parts.join("."), now()).is_err());
        // Another key signs: refused until the set holding it is reloaded.
        let other = Signer::new();
        let t2 = other.token(r#"{"alg":"ES256","kid":"k1"}"#, good);
        assert!(v.validate(&t2, now()).is_err());
        std::fs::write(dir.join("jwks.json"), &other.jwks).unwrap();
        assert_eq!(v.reload().unwrap(), 1);
        assert!(v.validate(&t2, now()).is_ok());
        assert!(v.validate(&t, now()).is_err());
        // A broken file keeps the keys in use.
        std::fs::write(dir.join("jwks.json"), "{").unwrap();
        assert!(v.reload().is_err());
        assert!(v.validate(&t2, now()).is_ok());
    }

    #[test]
    fn flags_are_checked() {
        let mut a = args();
        a.sasl_oauthbearer_allow_unsecured = false;
        assert!(TokenValidator::from_args(&a, true).is_err());
        assert!(TokenValidator::from_args(&a, false).unwrap().is_none());
        a.sasl_oauthbearer_jwks_file = Some("/nonexistent/jwks.json".into());
        assert!(TokenValidator::from_args(&a, true).is_err());
        a.sasl_oauthbearer_allow_unsecured = true;
        assert!(TokenValidator::from_args(&a, false).is_err());
        let dir = scratch();
        let file = dir.join("jwks.json");
        std::fs::write(&file, r#"{"keys":[{"kty":"oct","k":"c2VjcmV0"}]}"#).unwrap();
        let mut a = args();
        a.sasl_oauthbearer_allow_unsecured = false;
        a.sasl_oauthbearer_jwks_file = Some(file);
        assert!(TokenValidator::from_args(&a, true).is_err());
    }
}
