//! Fuzzes the server side of SASL exchanges (what SaslAuthenticate hands over before anyone
//! is authenticated): the first byte picks PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 or
//! OAUTHBEARER (unsecured tokens, so the claims are read whatever the signature), the rest
//! is up to four client messages separated by newlines. Any bytes must end in a step result,
//! never a panic (rsasl's SCRAM parser panics on short attributes unless Kelp's input check
//! stops them first).
#![no_main]

use std::sync::{Arc, OnceLock};

use kelp::auth::credentials::{Change, Credentials};
use kelp::auth::oauth::TokenValidator;
use kelp::auth::sasl::{Sasl, SaslMechanism, Step};
use kelp::auth::scram::{Credential, Mechanism};
use kelp::config::oauth::OAuthArgs;
use libfuzzer_sys::fuzz_target;

fn sasl() -> &'static Sasl {
    static SASL: OnceLock<Sasl> = OnceLock::new();
    SASL.get_or_init(|| {
        let creds = Arc::new(Credentials::default());
        let changes: Vec<Change> = Mechanism::ALL
            .into_iter()
            .map(|m| Change {
                user: "u".into(),
                mechanism: m,
                credential: Some(Credential::from_password(m, "p", 4096)),
            })
            .collect();
        let (c, _) = creds.changed("u", &changes).expect("credentials");
        creds.put("u", c);
        let all = ["SCRAM-SHA-256", "SCRAM-SHA-512", "PLAIN", "OAUTHBEARER"].map(String::from);
        let args = OAuthArgs {
            sasl_oauthbearer_expected_issuer: Some("i".into()),
            sasl_oauthbearer_expected_audience: vec!["a".into()],
            ..OAuthArgs::unsecured()
        };
        let oauth = TokenValidator::from_args(&args, true)
            .expect("validator")
            .map(Arc::new);
        Sasl::new(creds, oauth, &all).expect("SASL")
    })
}

fuzz_target!(|data: &[u8]| {
    let Some((&pick, rest)) = data.split_first() else {
        return;
    };
    let mechanism = match pick % 4 {
        0 => SaslMechanism::Plain,
        1 => SaslMechanism::Scram(Mechanism::Sha256),
        2 => SaslMechanism::Scram(Mechanism::Sha512),
        _ => SaslMechanism::OAuthBearer,
    };
    let Ok(mut exchange) = sasl().start(mechanism) else {
        return;
    };
    for msg in rest.split(|&b| b == b'\n').take(4) {
        match exchange.step(msg) {
            Step::Continue(_) => continue,
            Step::Authenticated { .. } | Step::Failed(_) => break,
        }
    }
});
