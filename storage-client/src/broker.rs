//! Call sequences against SeaweedMQ brokers (`messaging_pb.SeaweedMessaging`).
//!
//! These are the straightforward forms used by `smqctl` and the live tests: look up the
//! leader of a Kafka partition, publish a batch on one `PublishMessage` stream (init, empty
//! hello, pipelined data, one ack per message in order; spec §6.2), and read the partition's
//! offset range. A gateway's hot path keeps long-lived streams instead, but follows the same
//! protocol.

use std::future::Future;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::transport::Channel;

use crate::pb::messaging_pb::publish_message_request::{InitMessage, Message};
use crate::pb::messaging_pb::seaweed_messaging_client::SeaweedMessagingClient;
use crate::pb::messaging_pb::{
    AssignTopicPartitionsRequest, BrokerPartitionAssignment, DataMessage,
    GetPartitionRangeInfoRequest, LookupTopicBrokersRequest, OffsetRangeInfo,
    PublishMessageRequest, PublishMessageResponse,
};
use crate::pb::schema_pb::{Partition, Topic};
use crate::{ring, Error, Result};

/// The broker client type these helpers take.
pub type BrokerClient = SeaweedMessagingClient<Channel>;

/// Namespace of all Kafka topics in SeaweedMQ.
pub const KAFKA_NAMESPACE: &str = "kafka";

/// Publisher name sent in `InitMessage` by default.
pub const PUBLISHER_NAME: &str = "kelp";

/// `Topic{namespace: "kafka", name}`.
pub fn kafka_topic(name: &str) -> Topic {
    Topic {
        namespace: KAFKA_NAMESPACE.to_owned(),
        name: name.to_owned(),
    }
}

/// Current time in unix nanoseconds (0 if the clock is before 1970).
pub fn now_ns() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

/// Runs `op` until it succeeds, fails with a non-transient error (see
/// [`Error::is_transient`]), or `budget` has elapsed; waits 100 ms doubling up to 2 s between
/// attempts. Use it for control-plane calls right after the cluster starts.
pub async fn retry<T, F, Fut>(budget: Duration, mut op: F) -> Result<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T>>,
{
    let deadline = Instant::now() + budget;
    let mut wait = Duration::from_millis(100);
    loop {
        match op().await {
            Err(e) if e.is_transient() && Instant::now() + wait < deadline => {
                tokio::time::sleep(wait).await;
                wait = (wait * 2).min(Duration::from_secs(2));
            }
            other => return other,
        }
    }
}

/// All partition assignments of `topic` (any broker answers; it proxies to the balancer).
pub async fn lookup(
    client: &mut BrokerClient,
    topic: &Topic,
) -> Result<Vec<BrokerPartitionAssignment>> {
    let resp = client
        .lookup_topic_brokers(LookupTopicBrokersRequest {
            topic: Some(topic.clone()),
        })
        .await?
        .into_inner();
    Ok(resp.broker_partition_assignments)
}

/// The assignment of Kafka partition `k` of `topic`; [`Error::NotFound`] if there is none.
pub async fn lookup_partition(
    client: &mut BrokerClient,
    topic: &Topic,
    k: i32,
) -> Result<BrokerPartitionAssignment> {
    let all = lookup(client, topic).await?;
    ring::find_assignment(&all, k)
        .cloned()
        .ok_or_else(|| Error::NotFound(format!("partition {k} of topic {}", topic.name)))
}

/// Makes the broker behind `client` load `partition` of `topic` if it has not (the request
/// SeaweedMQ's balancer sends a partition's leader when it creates a topic).
///
/// Call it on the partition leader before `PublishMessage` or `FetchMessage`. weed 4.48 (and
/// 4.53, the same code) loads a partition on demand only on the balancer: every other broker
/// checks the topic's assignments against its own list of live brokers, which only the
/// balancer fills, so it finds itself leader of nothing. `FetchMessage` then answers
/// "partition not found", and `PublishMessage` dereferences the missing partition and the
/// whole broker process panics (seen: `nil pointer dereference` in
/// `LocalPartition.MaybeConnectToFollowers`). That is the case for every partition a
/// non-balancer broker leads after that broker restarted, after the partition was unloaded
/// (its last publisher left), and after the balancer moved the partition to it from a dead
/// broker. Loading an already loaded partition does nothing.
pub async fn load_partition(
    client: &mut BrokerClient,
    topic: &Topic,
    partition: &Partition,
) -> Result<()> {
    client
        .assign_topic_partitions(load_request(topic, partition))
        .await?;
    Ok(())
}

/// The `AssignTopicPartitions` request of [`load_partition`]: only the partition, not
/// leader (`is_leader` would make the broker forward it to the followers), not draining.
pub fn load_request(topic: &Topic, partition: &Partition) -> AssignTopicPartitionsRequest {
    AssignTopicPartitionsRequest {
        topic: Some(topic.clone()),
        broker_partition_assignments: vec![BrokerPartitionAssignment {
            partition: Some(*partition),
            leader_broker: String::new(),
            follower_broker: String::new(),
        }],
        is_leader: false,
        is_draining: false,
    }
}

fn check_ack(r: &PublishMessageResponse) -> Result<()> {
    if r.error_code != 0 || !r.error.is_empty() {
        return Err(Error::Broker {
            code: r.error_code,
            message: r.error.clone(),
        });
    }
    Ok(())
}

/// Capacity of the request channel of a [`Publisher`] (messages queued ahead of the wire).
pub const PUBLISH_QUEUE: usize = 1024;

/// One open `PublishMessage` stream to a partition leader.
///
/// [`Publisher::open`] sends init and consumes the broker's empty hello; [`Publisher::publish`]
/// pipelines data messages while reading the acks, which come back one per message in order.
/// While at least one publisher stream is open the broker keeps the partition loaded; when
/// the last one closes, the broker flushes the partition to the filer and unloads it, and for
/// a short while afterwards reads may return nothing and new streams may fail with "log
/// buffer is stopping" (see [`Error::is_partition_stopping`]). Observed with weed 4.48: if
/// a partition's only flushed file is its first one (which lacks `offset_min`/`offset_max`),
/// a partition reloaded by `FetchMessage` reports high-water mark 0 and serves nothing until
/// the next publish, while `GetPartitionRangeInfo` still reports the true high-water mark.
pub struct Publisher {
    tx: Option<mpsc::Sender<PublishMessageRequest>>,
    acks: tonic::Streaming<PublishMessageResponse>,
}

fn stream_gone() -> Error {
    Error::Protocol("publish stream is closed".into())
}

impl Publisher {
    /// Opens a stream for `partition` (exactly as `LookupTopicBrokers` returned it) of `topic`
    /// on `client`, which must be connected to the partition leader. A not-leader answer comes
    /// back as [`Error::Broker`] with code [`crate::errors::NOT_LEADER`].
    pub async fn open(
        client: &mut BrokerClient,
        topic: &Topic,
        partition: &Partition,
        publisher_name: &str,
    ) -> Result<Publisher> {
        let (tx, rx) = mpsc::channel(PUBLISH_QUEUE);
        let init = PublishMessageRequest {
            message: Some(Message::Init(InitMessage {
                topic: Some(topic.clone()),
                partition: Some(*partition),
                ack_interval: 1,
                follower_broker: String::new(),
                publisher_name: publisher_name.to_owned(),
            })),
        };
        // Queue init before the call: the broker sends response headers only with the hello.
        tx.send(init).await.map_err(|_| stream_gone())?;
        let mut acks = client
            .publish_message(ReceiverStream::new(rx))
            .await?
            .into_inner();
        let hello = acks
            .message()
            .await?
            .ok_or_else(|| Error::Protocol("publish stream ended before the hello".into()))?;
        check_ack(&hello)?;
        Ok(Publisher { tx: Some(tx), acks })
    }

    /// Publishes `records` as `(key, value)` with `ts_ns` = now and returns their assigned
    /// offsets in order. After an error the stream is unusable; open a new one.
    pub async fn publish(&mut self, records: Vec<(Vec<u8>, Vec<u8>)>) -> Result<Vec<i64>> {
        let n = records.len();
        let result = {
            let tx = self.tx.as_ref().ok_or_else(stream_gone)?;
            let acks = &mut self.acks;
            let send = async {
                for (key, value) in records {
                    let data = DataMessage {
                        key: key.into(),
                        value: value.into(),
                        ts_ns: now_ns(),
                        ctrl: None,
                    };
                    let req = PublishMessageRequest {
                        message: Some(Message::Data(data)),
                    };
                    tx.send(req).await.map_err(|_| stream_gone())?;
                }
                Ok::<(), Error>(())
            };
            let recv = async {
                let mut offsets = Vec::with_capacity(n);
                while offsets.len() < n {
                    let ack = acks.message().await?.ok_or_else(|| {
                        Error::Protocol(format!(
                            "publish stream ended after {} of {n} acks",
                            offsets.len()
                        ))
                    })?;
                    check_ack(&ack)?;
                    offsets.push(ack.assigned_offset);
                }
                Ok::<Vec<i64>, Error>(offsets)
            };
            tokio::try_join!(send, recv).map(|((), offsets)| offsets)
        };
        if result.is_err() {
            self.tx = None;
        }
        result
    }

    /// Half-closes the stream and waits for the broker to end it.
    pub async fn close(mut self) -> Result<()> {
        self.tx = None;
        while self.acks.message().await?.is_some() {}
        Ok(())
    }
}

/// Publishes `records` on a fresh stream ([`load_partition`], [`Publisher::open`],
/// [`Publisher::publish`], [`Publisher::close`]) and returns their assigned offsets in order.
pub async fn publish(
    client: &mut BrokerClient,
    topic: &Topic,
    partition: &Partition,
    records: Vec<(Vec<u8>, Vec<u8>)>,
) -> Result<Vec<i64>> {
    load_partition(client, topic, partition).await?;
    let mut p = Publisher::open(client, topic, partition, PUBLISHER_NAME).await?;
    let offsets = p.publish(records).await?;
    p.close().await?;
    Ok(offsets)
}

/// The offset range (earliest, HWM, ...) of `partition`, asked of `client`, which should be
/// the partition leader. An error in the response body becomes [`Error::Broker`] (code 0).
pub async fn range_info(
    client: &mut BrokerClient,
    topic: &Topic,
    partition: &Partition,
) -> Result<OffsetRangeInfo> {
    let resp = client
        .get_partition_range_info(GetPartitionRangeInfoRequest {
            topic: Some(topic.clone()),
            partition: Some(*partition),
        })
        .await?
        .into_inner();
    if !resp.error.is_empty() {
        return Err(Error::Broker {
            code: 0,
            message: resp.error,
        });
    }
    resp.offset_range
        .ok_or_else(|| Error::Protocol("GetPartitionRangeInfo without offset_range".into()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn load_request_names_only_the_partition_and_does_not_unload() {
        let t = kafka_topic("t");
        let p = Partition {
            ring_size: 2520,
            range_start: 630,
            range_stop: 1260,
            unix_time_ns: 7,
        };
        let r = load_request(&t, &p);
        assert_eq!(r.topic, Some(t));
        assert_eq!(r.broker_partition_assignments.len(), 1);
        let a = &r.broker_partition_assignments[0];
        assert_eq!(a.partition, Some(p));
        // A follower named here would get the request forwarded (with is_leader).
        assert!(a.leader_broker.is_empty() && a.follower_broker.is_empty());
        assert!(!r.is_leader);
        // is_draining would make the broker drop the partition instead.
        assert!(!r.is_draining);
    }
}
