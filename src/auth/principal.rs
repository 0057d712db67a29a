//! The principal of a client that showed a certificate (mutual TLS): `User:` and the
//! certificate subject as an RFC 2253 name, most specific part first ("CN=alice,OU=eng,O=corp"),
//! as Kafka's default principal builder makes it (Java's `X500Principal.getName()`), then
//! mapped by `--ssl-principal-mapping-rules` ([`PrincipalRules`], Kafka's
//! `ssl.principal.mapping.rules`), so ACLs written for Kafka apply unchanged. Pure; called by
//! the connection after the handshake.

use x509_parser::der_parser::asn1_rs::ToDer;
use x509_parser::prelude::{FromDer, X509Certificate};

/// RFC 2253's attribute keywords; any other attribute is written as its OID.
const KEYWORDS: [(&str, &str); 9] = [
    ("2.5.4.3", "CN"),
    ("2.5.4.7", "L"),
    ("2.5.4.8", "ST"),
    ("2.5.4.10", "O"),
    ("2.5.4.11", "OU"),
    ("2.5.4.6", "C"),
    ("2.5.4.9", "STREET"),
    ("0.9.2342.19200300.100.1.25", "DC"),
    ("0.9.2342.19200300.100.1.1", "UID"),
];

/// A value escaped as RFC 2253 asks: `,+"\<>;` always, `#` and space at the start, space at
/// the end.
fn escape(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    let last = value.chars().count().saturating_sub(1);
    for (i, c) in value.chars().enumerate() {
        let special = matches!(c, ',' | '+' | '"' | '\\' | '<' | '>' | ';')
            || (i == 0 && (c == '#' || c == ' '))
            || (i == last && c == ' ');
        if special {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// The RFC 2253 name of the subject of the DER certificate `der`; None when it does not
/// parse (the TLS layer has verified it, so only an odd encoding gets here).
pub fn subject_name(der: &[u8]) -> Option<String> {
    let (_, cert) = X509Certificate::from_der(der).ok()?;
    let rdns: Vec<String> = cert
        .subject()
        .iter_rdn()
        .map(|rdn| {
            rdn.iter()
                .map(|attr| {
                    let oid = attr.attr_type().to_id_string();
                    let keyword = KEYWORDS.iter().find(|(o, _)| *o == oid).map(|(_, k)| *k);
                    match (keyword, attr.as_str()) {
                        (Some(k), Ok(v)) => format!("{k}={}", escape(v)),
                        // Not a string RFC 2253 writes as text: the value's DER in hex.
                        (k, _) => {
                            let hex: String = attr
                                .attr_value()
                                .to_der_vec()
                                .unwrap_or_default()
                                .iter()
                                .map(|b| format!("{b:02x}"))
                                .collect();
                            format!("{}=#{hex}", k.unwrap_or(&oid))
                        }
                    }
                })
                .collect::<Vec<_>>()
                .join("+")
        })
        .collect();
    // The certificate lists the name from its root (C=...) down; RFC 2253 writes it the
    // other way round.
    Some(rdns.into_iter().rev().collect::<Vec<_>>().join(","))
}

/// One mapping rule.
#[derive(Debug, Clone)]
enum Rule {
    /// The name as it is.
    Default,
    /// A whole-name match, its replacement, and L or U case folding.
    Map {
        pattern: regex::Regex,
        replacement: String,
        case: Option<char>,
    },
}

/// Kafka's `ssl.principal.mapping.rules`: the first rule whose pattern matches the whole
/// subject names the principal; a subject no rule matches is refused.
#[derive(Debug, Clone)]
pub struct PrincipalRules(Vec<Rule>);

/// The text up to the next unescaped '/', unescaped, and the rest after that '/'.
fn until_slash(s: &str) -> Option<(String, &str)> {
    let mut out = String::new();
    let mut chars = s.char_indices();
    while let Some((i, c)) = chars.next() {
        match c {
            '\\' if s[i + 1..].starts_with('/') => {
                out.push('/');
                chars.next();
            }
            '/' => return Some((out, &s[i + 1..])),
            c => out.push(c),
        }
    }
    None
}

impl PrincipalRules {
    /// Parses `RULE:pattern/replacement/[LU],...,DEFAULT` (`/` escaped as `\/`).
    pub fn parse(spec: &str) -> Result<Self, String> {
        let mut rules = Vec::new();
        let mut rest = spec.trim_start_matches([',', ' ']);
        while !rest.is_empty() {
            if let Some(r) = rest.strip_prefix("DEFAULT") {
                rules.push(Rule::Default);
                rest = r;
            } else if let Some(r) = rest.strip_prefix("RULE:") {
                let bad = || format!("bad rule '{rest}': use RULE:pattern/replacement/[LU]");
                let (pattern, r) = until_slash(r).ok_or_else(bad)?;
                let (replacement, r) = until_slash(r).ok_or_else(bad)?;
                let (case, r) = match r.chars().next() {
                    Some(c @ ('L' | 'U')) => (Some(c), &r[1..]),
                    _ => (None, r),
                };
                let pattern = regex::Regex::new(&format!("^(?:{pattern})$"))
                    .map_err(|e| format!("bad rule pattern '{pattern}': {e}"))?;
                rules.push(Rule::Map {
                    pattern,
                    replacement,
                    case,
                });
                rest = r;
            } else {
                return Err(format!(
                    "bad principal mapping rules at '{rest}': use RULE:... or DEFAULT"
                ));
            }
            rest = rest.trim_start_matches([',', ' ']);
        }
        if rules.is_empty() {
            return Err("no principal mapping rule".into());
        }
        Ok(PrincipalRules(rules))
    }

    /// The principal name for the subject `dn`, or None when no rule applies.
    pub fn apply(&self, dn: &str) -> Option<String> {
        self.0.iter().find_map(|rule| match rule {
            Rule::Default => Some(dn.to_string()),
            Rule::Map {
                pattern,
                replacement,
                case,
            } => {
                let caps = pattern.captures(dn)?;
                let mut out = String::new();
                caps.expand(replacement, &mut out);
                Some(match case {
                    Some('L') => out.to_lowercase(),
                    Some('U') => out.to_uppercase(),
                    _ => out,
                })
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mapping_rules_as_kafka() {
        let r = PrincipalRules::parse(
            "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L, RULE:^CN=([^,]*)\\/x,O=(.*)$/$1@$2/,DEFAULT",
        )
        .unwrap();
        assert_eq!(
            r.apply("CN=Kafka,OU=ServiceUsers,O=Corp").as_deref(),
            Some("kafka")
        );
        assert_eq!(r.apply("CN=a/x,O=b").as_deref(), Some("a@b"));
        assert_eq!(r.apply("CN=other").as_deref(), Some("CN=other"));
        let strict = PrincipalRules::parse("RULE:^CN=(.*)$/$1/U").unwrap();
        assert_eq!(strict.apply("CN=alice").as_deref(), Some("ALICE"));
        assert_eq!(strict.apply("O=x,CN=alice"), None);
        assert!(PrincipalRules::parse("RULE:(/x").is_err());
        assert!(PrincipalRules::parse("SOMETHING").is_err());
        assert!(PrincipalRules::parse("").is_err());
    }

    #[test]
    fn escaping() {
        assert_eq!(escape("a,b+c"), "a\\,b\\+c");
        assert_eq!(escape(" #x "), "\\ #x\\ ");
        assert_eq!(escape("#x"), "\\#x");
        assert_eq!(escape("plain"), "plain");
    }

    #[test]
    fn garbage_is_no_name() {
        assert_eq!(subject_name(b"not a certificate"), None);
    }
}
