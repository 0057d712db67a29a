//! The OAUTHBEARER flags (KIP-255, KIP-768): where the keys that sign tokens come from and
//! which claims a token must carry. Named after Kafka's `sasl.oauthbearer.*` broker settings;
//! Kelp reads the JSON Web Key Set from a file (re-read on SIGHUP) instead of polling an
//! HTTPS endpoint.

use std::path::PathBuf;

use clap::Args;

/// How OAUTHBEARER tokens are checked (used only when `--sasl-enabled-mechanisms` names
/// OAUTHBEARER).
#[derive(Debug, Clone, Args)]
pub struct OAuthArgs {
    /// JSON Web Key Set (RFC 7517) holding the public keys that sign tokens, as Kafka's
    /// `sasl.oauthbearer.jwks.endpoint.url` with a `file:` URL. Tokens must be signed with
    /// one of them (RS*, PS*, ES256/384, EdDSA; the `kid` picks the key). Re-read on SIGHUP.
    #[arg(long)]
    pub sasl_oauthbearer_jwks_file: Option<PathBuf>,

    /// Accept unsecured tokens (`"alg":"none"`, no signature), as Kafka's default
    /// OAUTHBEARER validator does when no JWKS is configured. Anyone can forge such a token:
    /// for development only. Excludes `--sasl-oauthbearer-jwks-file`.
    #[arg(long)]
    pub sasl_oauthbearer_allow_unsecured: bool,

    /// The `iss` claim tokens must carry (Kafka's `sasl.oauthbearer.expected.issuer`).
    #[arg(long)]
    pub sasl_oauthbearer_expected_issuer: Option<String>,

    /// Audiences, comma-separated: a token's `aud` must name one of them (Kafka's
    /// `sasl.oauthbearer.expected.audience`). Empty: not checked.
    #[arg(long, value_delimiter = ',')]
    pub sasl_oauthbearer_expected_audience: Vec<String>,

    /// The claim naming the principal (`User:<claim>`), as Kafka's
    /// `sasl.oauthbearer.sub.claim.name`.
    #[arg(long, default_value = "sub")]
    pub sasl_oauthbearer_sub_claim_name: String,

    /// The claim holding the token's scopes, as Kafka's `sasl.oauthbearer.scope.claim.name`.
    #[arg(long, default_value = "scope")]
    pub sasl_oauthbearer_scope_claim_name: String,

    /// Clock difference allowed when checking `exp`, `nbf` and `iat`, as Kafka's
    /// `sasl.oauthbearer.clock.skew.seconds`.
    #[arg(long, default_value_t = 30)]
    pub sasl_oauthbearer_clock_skew_seconds: u64,
}

impl OAuthArgs {
    /// The flags' defaults with `--sasl-oauthbearer-allow-unsecured` (tests and fuzzing).
    pub fn unsecured() -> Self {
        OAuthArgs {
            sasl_oauthbearer_jwks_file: None,
            sasl_oauthbearer_allow_unsecured: true,
            sasl_oauthbearer_expected_issuer: None,
            sasl_oauthbearer_expected_audience: Vec::new(),
            sasl_oauthbearer_sub_claim_name: "sub".into(),
            sasl_oauthbearer_scope_claim_name: "scope".into(),
            sasl_oauthbearer_clock_skew_seconds: 30,
        }
    }

    /// Checks the flags against each other; `enabled` says whether OAUTHBEARER is among the
    /// SASL mechanisms.
    pub fn check(&self, enabled: bool) -> Result<(), String> {
        let keyed = self.sasl_oauthbearer_jwks_file.is_some();
        match (enabled, keyed, self.sasl_oauthbearer_allow_unsecured) {
            (true, false, false) => Err("OAUTHBEARER needs --sasl-oauthbearer-jwks-file (or \
                 --sasl-oauthbearer-allow-unsecured, for development)"
                .into()),
            (_, true, true) => Err("--sasl-oauthbearer-jwks-file and \
                 --sasl-oauthbearer-allow-unsecured exclude each other"
                .into()),
            _ if self.sasl_oauthbearer_sub_claim_name.is_empty() => {
                Err("--sasl-oauthbearer-sub-claim-name is empty".into())
            }
            _ => Ok(()),
        }
    }
}
