//! Protocol selection among members (Kafka's vote) and reading consumer subscriptions.

use bytes::Bytes;
use kafka_protocol::messages::ConsumerProtocolSubscription;
use kafka_protocol::protocol::Decodable;

use super::member::Member;
use crate::protocol::shape::CONSUMER_PROTOCOL_SUBSCRIPTION;

/// The protocol every member supports that most members prefer: each member votes for the
/// first protocol in its own list that all members support. Ties go to the protocol the
/// earliest-joined member ranks highest, so the choice is deterministic.
pub fn select<'a>(members: impl Iterator<Item = &'a Member> + Clone) -> Option<String> {
    let mut ordered: Vec<&Member> = members.clone().collect();
    ordered.sort_by_key(|m| m.join_order);
    let first = ordered.first()?;
    let candidates: Vec<&str> = first
        .protocols
        .iter()
        .map(|(n, _)| n.as_str())
        .filter(|n| ordered.iter().all(|m| m.supports(n)))
        .collect();
    let mut votes = vec![0usize; candidates.len()];
    for m in &ordered {
        if let Some(i) = m
            .protocols
            .iter()
            .find_map(|(n, _)| candidates.iter().position(|c| c == n))
        {
            votes[i] += 1;
        }
    }
    // max_by_key keeps the last maximum; iterate in reverse so the earliest candidate wins ties.
    (0..candidates.len())
        .rev()
        .max_by_key(|&i| votes[i])
        .map(|i| candidates[i].to_string())
}

/// Topics named in a consumer-protocol subscription, or None if it does not parse.
pub fn subscribed_topics(metadata: &Bytes) -> Option<Vec<String>> {
    if metadata.len() < 2 {
        return None;
    }
    let version = i16::from_be_bytes([metadata[0], metadata[1]]);
    let mut b = metadata.slice(2..);
    // Versions newer than the codec knows still start with the fields it knows.
    let v = version.clamp(0, 3);
    // The metadata comes from a client: its shape is checked before the crate allocates by it.
    CONSUMER_PROTOCOL_SUBSCRIPTION.check(v, &b).ok()?;
    let sub = ConsumerProtocolSubscription::decode(&mut b, v).ok()?;
    Some(sub.topics.into_iter().map(|t| t.to_string()).collect())
}
