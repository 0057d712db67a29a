//! The principal of a client that showed a certificate (mutual TLS): `User:` and the
//! certificate subject as an RFC 2253 name, most specific part first ("CN=alice,OU=eng,O=corp"),
//! as Kafka's default principal builder makes it (Java's `X500Principal.getName()`), so ACLs
//! written for Kafka apply unchanged. Pure; called by the connection after the handshake.

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

#[cfg(test)]
mod tests {
    use super::*;

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
