// KIP-848 consumer groups with the Java client 4.x (group.protocol=consumer), run by
// tests/e2e/test_consumer_groups_848.py:
//   java -cp classes:jars/* ConsumerGroupProtocol BOOTSTRAP PREFIX ASSIGNOR N
// 1. A 6-partition topic gets N keyed records. Consumer A (server assignor ASSIGNOR) joins
//    alone, consumer B joins while A consumes; both commit after every poll and in
//    onPartitionsRevoked. Every record is consumed, no partition is ever held by both at once
//    (checked at every poll), and the two end with disjoint assignments covering all 6.
// 2. Admin: describeConsumerGroups says type CONSUMER, state STABLE, 2 members whose
//    assignments match what the consumers hold; listGroups with a CONSUMER type filter lists
//    it; committed offsets equal the end offsets.
// 3. B closes (leaves): A gets all 6 partitions back.
// 4. A regex subscription (SubscriptionPattern, resolved by the broker) reads two matching
//    topics, skips one that does not match, and picks up a matching topic created later.
// Prints "OK <step>" per step; on a failure prints "FAIL ..." and exits 1.
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.*;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.GroupListing;
import org.apache.kafka.clients.admin.ListGroupsOptions;
import org.apache.kafka.clients.admin.MemberDescription;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.consumer.*;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.GroupState;
import org.apache.kafka.common.GroupType;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

public class ConsumerGroupProtocol {
    static void fail(String msg) {
        System.out.println("FAIL " + msg);
        System.out.flush();
        System.exit(1);
    }

    static void check(boolean ok, String msg) {
        if (!ok) fail(msg);
    }

    static KafkaConsumer<String, String> consumer(String bootstrap, String group, String assignor, String id) {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("group.id", group);
        p.put("group.protocol", "consumer");
        p.put("group.remote.assignor", assignor);
        p.put("client.id", id);
        p.put("enable.auto.commit", "false");
        p.put("auto.offset.reset", "earliest");
        p.put("key.deserializer", StringDeserializer.class.getName());
        p.put("value.deserializer", StringDeserializer.class.getName());
        return new KafkaConsumer<>(p);
    }

    static void produce(String bootstrap, String topic, int n) throws Exception {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("acks", "all");
        p.put("linger.ms", "5");
        p.put("key.serializer", StringSerializer.class.getName());
        p.put("value.serializer", StringSerializer.class.getName());
        try (KafkaProducer<String, String> pr = new KafkaProducer<>(p)) {
            for (int i = 0; i < n; i++) pr.send(new ProducerRecord<>(topic, "k" + i, topic + "/" + i));
            pr.flush();
        }
    }

    /** A consumer that commits what it read after every poll and when partitions go. */
    static class Member {
        final KafkaConsumer<String, String> c;
        final Set<String> seen;
        final Map<TopicPartition, OffsetAndMetadata> pending = new HashMap<>();

        Member(KafkaConsumer<String, String> c, Set<String> seen) {
            this.c = c;
            this.seen = seen;
        }

        void subscribe(String topic) {
            c.subscribe(List.of(topic), new ConsumerRebalanceListener() {
                public void onPartitionsRevoked(Collection<TopicPartition> parts) {
                    commit();
                }

                public void onPartitionsAssigned(Collection<TopicPartition> parts) {}
            });
        }

        void commit() {
            if (!pending.isEmpty()) {
                c.commitSync(new HashMap<>(pending));
                pending.clear();
            }
        }

        void poll() {
            for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(200))) {
                seen.add(r.value());
                pending.put(new TopicPartition(r.topic(), r.partition()), new OffsetAndMetadata(r.offset() + 1));
            }
            commit();
        }
    }

    static void disjoint(Member a, Member b) {
        Set<TopicPartition> both = new HashSet<>(a.c.assignment());
        both.retainAll(b.c.assignment());
        check(both.isEmpty(), "partitions held by both members at once: " + both);
    }

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], prefix = args[1], assignor = args[2];
        int n = Integer.parseInt(args[3]);
        String topic = prefix + "-t", group = prefix + "-g";
        Properties ap = new Properties();
        ap.put("bootstrap.servers", bootstrap);
        try (Admin admin = Admin.create(ap)) {
            admin.createTopics(List.of(new NewTopic(topic, 6, (short) 1))).all().get();
            produce(bootstrap, topic, n);

            // 1. Two members share the topic; everything is read; no partition is held twice.
            Set<String> seen = Collections.synchronizedSet(new HashSet<>());
            Member a = new Member(consumer(bootstrap, group, assignor, "member-a"), seen);
            Member b = new Member(consumer(bootstrap, group, assignor, "member-b"), seen);
            a.subscribe(topic);
            long deadline = System.currentTimeMillis() + 60_000;
            while (a.c.assignment().size() < 6 && System.currentTimeMillis() < deadline) a.poll();
            check(a.c.assignment().size() == 6, "A alone holds " + a.c.assignment());
            b.subscribe(topic);
            deadline = System.currentTimeMillis() + 90_000;
            while (System.currentTimeMillis() < deadline) {
                a.poll();
                b.poll();
                disjoint(a, b);
                if (seen.size() == n && a.c.assignment().size() + b.c.assignment().size() == 6
                        && !b.c.assignment().isEmpty() && !a.c.assignment().isEmpty()) break;
            }
            check(seen.size() == n, "read " + seen.size() + " of " + n);
            check(a.c.assignment().size() + b.c.assignment().size() == 6 && !b.c.assignment().isEmpty(),
                    "assignments A " + a.c.assignment() + " B " + b.c.assignment());
            System.out.println("OK shared " + a.c.assignment().size() + "+" + b.c.assignment().size());

            // 2. The admin view agrees.
            ConsumerGroupDescription d = null;
            deadline = System.currentTimeMillis() + 30_000;
            while (System.currentTimeMillis() < deadline) {
                a.poll();
                b.poll();
                d = admin.describeConsumerGroups(List.of(group)).all().get().get(group);
                if (d.groupState() == GroupState.STABLE) break;
            }
            check(d.type() == GroupType.CONSUMER, "type " + d.type());
            check(d.groupState() == GroupState.STABLE, "state " + d.groupState());
            check(d.members().size() == 2, "members " + d.members());
            for (MemberDescription m : d.members()) {
                Member which = m.clientId().equals("member-a") ? a : b;
                check(m.assignment().topicPartitions().equals(which.c.assignment()),
                        m.clientId() + " described " + m.assignment().topicPartitions() + " holds " + which.c.assignment());
            }
            Collection<GroupListing> listed = admin.listGroups(new ListGroupsOptions().withTypes(Set.of(GroupType.CONSUMER)))
                    .all().get();
            check(listed.stream().anyMatch(g -> g.groupId().equals(group)), "not listed: " + listed);
            Map<TopicPartition, OffsetAndMetadata> committed = admin.listConsumerGroupOffsets(group)
                    .partitionsToOffsetAndMetadata().get();
            Map<TopicPartition, OffsetSpec> latest = new HashMap<>();
            for (int p = 0; p < 6; p++) latest.put(new TopicPartition(topic, p), OffsetSpec.latest());
            var ends = admin.listOffsets(latest).all().get();
            for (var e : ends.entrySet()) {
                OffsetAndMetadata c = committed.get(e.getKey());
                check(c != null && c.offset() == e.getValue().offset(),
                        e.getKey() + " committed " + c + " end " + e.getValue().offset());
            }
            System.out.println("OK described " + d.groupState() + " " + d.members().size() + " members");

            // 3. B leaves: A gets everything back.
            b.c.close();
            deadline = System.currentTimeMillis() + 30_000;
            while (a.c.assignment().size() < 6 && System.currentTimeMillis() < deadline) a.poll();
            check(a.c.assignment().size() == 6, "after B left A holds " + a.c.assignment());
            // The new partitions' onPartitionsAssigned runs in poll: let it, before closing.
            for (int i = 0; i < 5; i++) a.poll();
            a.c.close();
            System.out.println("OK leave");

            // 4. A broker-side regex subscription.
            String rx = prefix + "-rx";
            admin.createTopics(List.of(new NewTopic(rx + "-a", 2, (short) 1), new NewTopic(rx + "-b", 1, (short) 1),
                    new NewTopic(prefix + "-other", 1, (short) 1))).all().get();
            for (String t : List.of(rx + "-a", rx + "-b", prefix + "-other")) produce(bootstrap, t, 10);
            Set<String> rseen = Collections.synchronizedSet(new HashSet<>());
            KafkaConsumer<String, String> r = consumer(bootstrap, prefix + "-rg", assignor, "regex");
            r.subscribe(new SubscriptionPattern(rx.replace("-", "\\-") + "-.*"));
            deadline = System.currentTimeMillis() + 60_000;
            while (rseen.size() < 20 && System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<String, String> rec : r.poll(Duration.ofMillis(200))) rseen.add(rec.value());
            }
            check(rseen.size() == 20, "regex read " + rseen.size() + " of 20: " + rseen);
            admin.createTopics(List.of(new NewTopic(rx + "-c", 1, (short) 1))).all().get();
            produce(bootstrap, rx + "-c", 5);
            deadline = System.currentTimeMillis() + 60_000;
            while (rseen.size() < 25 && System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<String, String> rec : r.poll(Duration.ofMillis(200))) rseen.add(rec.value());
            }
            check(rseen.size() == 25, "after a new matching topic read " + rseen.size() + " of 25");
            check(rseen.stream().noneMatch(v -> v.startsWith(prefix + "-other/")), "read a topic the regex does not match");
            r.close();
            System.out.println("OK regex");
        }
    }
}
