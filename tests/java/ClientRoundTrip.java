// Java kafka-clients 4.x round trip, run as a single-file program (java ClientRoundTrip.java):
// an Admin creates a multi-partition topic per codec; a producer with idempotence OFF and
// acks=all sends keyed records with headers and explicit timestamps; a consumer with assign()
// (no group) reads everything back and checks keys, values, offsets, headers and timestamps.
// Prints "OK <codec> <n>" per codec; exits 1 with the first mismatch.
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.*;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

public class ClientRoundTrip {
    static final long BASE_TS = 1_700_000_000_000L;

    static void fail(String msg) {
        System.out.println("FAIL " + msg);
        System.exit(1);
    }

    static byte[] b(String s) {
        return s.getBytes(StandardCharsets.UTF_8);
    }

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0];
        String prefix = args[1];
        int n = Integer.parseInt(args[2]);
        int partitions = 4;
        for (String codec : new String[] {"none", "gzip", "snappy", "lz4", "zstd"}) {
            String topic = prefix + "-" + codec;
            Properties ap = new Properties();
            ap.put("bootstrap.servers", bootstrap);
            try (Admin admin = Admin.create(ap)) {
                admin.createTopics(List.of(new NewTopic(topic, partitions, (short) 1))).all().get();
            }
            Properties pp = new Properties();
            pp.put("bootstrap.servers", bootstrap);
            pp.put("enable.idempotence", "false");
            pp.put("acks", "all");
            pp.put("compression.type", codec);
            pp.put("linger.ms", "5");
            pp.put("key.serializer", ByteArraySerializer.class.getName());
            pp.put("value.serializer", ByteArraySerializer.class.getName());
            // partition -> offsets acknowledged, in send order per partition
            Map<Integer, List<Long>> acked = new HashMap<>();
            Map<String, RecordMetadata> metaByKey = new HashMap<>();
            try (KafkaProducer<byte[], byte[]> p = new KafkaProducer<>(pp)) {
                List<java.util.concurrent.Future<RecordMetadata>> fs = new ArrayList<>();
                for (int i = 0; i < n; i++) {
                    ProducerRecord<byte[], byte[]> r = new ProducerRecord<>(
                        topic, null, BASE_TS + i, b("key-" + i), b("value-" + i + "-" + codec));
                    r.headers().add("idx", b(Integer.toString(i)));
                    r.headers().add("codec", b(codec));
                    fs.add(p.send(r));
                }
                p.flush();
                for (int i = 0; i < n; i++) {
                    RecordMetadata m = fs.get(i).get();
                    metaByKey.put("key-" + i, m);
                    acked.computeIfAbsent(m.partition(), k -> new ArrayList<>()).add(m.offset());
                }
            }
            for (Map.Entry<Integer, List<Long>> e : acked.entrySet()) {
                List<Long> offs = new ArrayList<>(e.getValue());
                Collections.sort(offs);
                for (int i = 0; i < offs.size(); i++) {
                    if (offs.get(i) != i) fail(codec + ": partition " + e.getKey() + " offsets not contiguous from 0: " + offs.subList(0, Math.min(10, offs.size())));
                }
            }
            Properties cp = new Properties();
            cp.put("bootstrap.servers", bootstrap);
            cp.put("enable.auto.commit", "false");
            cp.put("key.deserializer", ByteArrayDeserializer.class.getName());
            cp.put("value.deserializer", ByteArrayDeserializer.class.getName());
            Set<String> seen = new HashSet<>();
            try (KafkaConsumer<byte[], byte[]> c = new KafkaConsumer<>(cp)) {
                List<TopicPartition> tps = new ArrayList<>();
                for (int i = 0; i < partitions; i++) tps.add(new TopicPartition(topic, i));
                c.assign(tps);
                c.seekToBeginning(tps);
                long deadline = System.currentTimeMillis() + 60_000;
                while (seen.size() < n && System.currentTimeMillis() < deadline) {
                    for (ConsumerRecord<byte[], byte[]> r : c.poll(Duration.ofMillis(500))) {
                        String key = new String(r.key(), StandardCharsets.UTF_8);
                        int i = Integer.parseInt(key.substring(4));
                        if (!seen.add(key)) fail(codec + ": duplicate " + key);
                        RecordMetadata m = metaByKey.get(key);
                        if (m.partition() != r.partition() || m.offset() != r.offset())
                            fail(codec + ": " + key + " at " + r.partition() + "/" + r.offset() + ", acked " + m.partition() + "/" + m.offset());
                        if (!new String(r.value(), StandardCharsets.UTF_8).equals("value-" + i + "-" + codec))
                            fail(codec + ": bad value for " + key);
                        if (r.timestamp() != BASE_TS + i) fail(codec + ": bad timestamp " + r.timestamp() + " for " + key);
                        Header idx = r.headers().lastHeader("idx");
                        Header hc = r.headers().lastHeader("codec");
                        if (idx == null || !new String(idx.value(), StandardCharsets.UTF_8).equals(Integer.toString(i))
                            || hc == null || !new String(hc.value(), StandardCharsets.UTF_8).equals(codec))
                            fail(codec + ": bad headers for " + key);
                    }
                }
            }
            if (seen.size() != n) fail(codec + ": consumed " + seen.size() + " of " + n);
            System.out.println("OK " + codec + " " + n);
        }
    }
}
