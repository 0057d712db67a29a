// Java kafka-clients 4.x round trip (tests/e2e/test_clients_roundtrip.py compiles it with javac
// against ~/.cache/kelp/jars/clients and runs it):
//   java -cp classes:jars/* ClientRoundTrip BOOTSTRAP TOPIC_PREFIX N
// For each compression type none/gzip/snappy/lz4/zstd: an Admin creates a 4-partition topic; a
// producer with enable.idempotence=false and acks=all sends N keyed records with two headers and
// explicit timestamps; a consumer without group.id, assign() + seekToBeginning(), reads them all
// back and checks each key, value, partition/offset (as acknowledged), headers (exactly, in
// order), CreateTime timestamp, contiguous offsets from 0 and the end offsets.
// Prints "OK <codec> <n>" per codec; on the first mismatch prints "FAIL ..." and exits 1.
// -Dkelp.client.config=FILE adds that properties file to every client's config (e.g. TLS).
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.*;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.record.TimestampType;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

public class ClientRoundTrip {
    static final long BASE_TS = 1_700_000_000_000L;
    static final int PARTITIONS = 4;
    static final String[] CODECS = {"none", "gzip", "snappy", "lz4", "zstd"};
    static final Properties EXTRA = extra();

    static Properties extra() {
        Properties p = new Properties();
        String f = System.getProperty("kelp.client.config");
        if (f != null) {
            try (java.io.FileReader r = new java.io.FileReader(f)) {
                p.load(r);
            } catch (java.io.IOException e) {
                fail("reading " + f + ": " + e);
            }
        }
        return p;
    }

    static void fail(String msg) {
        System.out.println("FAIL " + msg);
        System.out.flush();
        System.exit(1);
    }

    static byte[] b(String s) {
        return s.getBytes(StandardCharsets.UTF_8);
    }

    static String s(byte[] v) {
        return v == null ? "null" : new String(v, StandardCharsets.UTF_8);
    }

    public static void main(String[] args) throws Exception {
        if (args.length != 3) fail("usage: ClientRoundTrip BOOTSTRAP TOPIC_PREFIX N");
        String bootstrap = args[0];
        String prefix = args[1];
        int n = Integer.parseInt(args[2]);
        for (String codec : CODECS) {
            roundTrip(bootstrap, prefix + "-" + codec, codec, n);
            System.out.println("OK " + codec + " " + n);
            System.out.flush();
        }
    }

    static void roundTrip(String bootstrap, String topic, String codec, int n) throws Exception {
        Properties ap = new Properties();
        ap.put("bootstrap.servers", bootstrap);
        ap.putAll(EXTRA);
        ap.put("request.timeout.ms", "15000");
        try (Admin admin = Admin.create(ap)) {
            admin.createTopics(List.of(new NewTopic(topic, PARTITIONS, (short) 1))).all().get(30, TimeUnit.SECONDS);
            TopicDescription d = admin.describeTopics(List.of(topic)).allTopicNames().get(30, TimeUnit.SECONDS).get(topic);
            if (d.partitions().size() != PARTITIONS)
                fail(codec + ": describeTopics lists " + d.partitions().size() + " partitions, want " + PARTITIONS);
        }

        Properties pp = new Properties();
        pp.put("bootstrap.servers", bootstrap);
        pp.putAll(EXTRA);
        pp.put("enable.idempotence", "false");
        pp.put("acks", "all");
        pp.put("compression.type", codec);
        pp.put("linger.ms", "5");
        pp.put("delivery.timeout.ms", "60000");
        pp.put("request.timeout.ms", "15000");
        pp.put("key.serializer", ByteArraySerializer.class.getName());
        pp.put("value.serializer", ByteArraySerializer.class.getName());
        Map<String, RecordMetadata> acked = new HashMap<>();
        Map<Integer, List<Long>> ackedOffsets = new TreeMap<>();
        try (KafkaProducer<byte[], byte[]> p = new KafkaProducer<>(pp)) {
            List<Future<RecordMetadata>> fs = new ArrayList<>();
            for (int i = 0; i < n; i++) {
                ProducerRecord<byte[], byte[]> r = new ProducerRecord<>(
                    topic, null, BASE_TS + i, b("key-" + i), b("value-" + i + "-" + codec));
                r.headers().add("idx", b(Integer.toString(i)));
                r.headers().add("codec", b(codec));
                fs.add(p.send(r));
            }
            p.flush();
            for (int i = 0; i < n; i++) {
                RecordMetadata m;
                try {
                    m = fs.get(i).get(60, TimeUnit.SECONDS);
                } catch (Exception e) {
                    fail(codec + ": send of key-" + i + " failed: " + e);
                    return;
                }
                acked.put("key-" + i, m);
                ackedOffsets.computeIfAbsent(m.partition(), k -> new ArrayList<>()).add(m.offset());
            }
        }
        if (ackedOffsets.size() < 2) fail(codec + ": all records went to partitions " + ackedOffsets.keySet());
        for (Map.Entry<Integer, List<Long>> e : ackedOffsets.entrySet()) {
            List<Long> offs = new ArrayList<>(e.getValue());
            Collections.sort(offs);
            for (int i = 0; i < offs.size(); i++) {
                if (offs.get(i) != i)
                    fail(codec + ": partition " + e.getKey() + " acked offsets not contiguous from 0: "
                        + offs.subList(0, Math.min(20, offs.size())));
            }
        }

        Properties cp = new Properties();
        cp.put("bootstrap.servers", bootstrap);
        cp.putAll(EXTRA);
        cp.put("enable.auto.commit", "false");
        cp.put("request.timeout.ms", "15000");
        cp.put("key.deserializer", ByteArrayDeserializer.class.getName());
        cp.put("value.deserializer", ByteArrayDeserializer.class.getName());
        Set<String> seen = new HashSet<>();
        Map<Integer, Long> lastOffset = new HashMap<>();
        try (KafkaConsumer<byte[], byte[]> c = new KafkaConsumer<>(cp)) {
            List<TopicPartition> tps = new ArrayList<>();
            for (int i = 0; i < PARTITIONS; i++) tps.add(new TopicPartition(topic, i));
            c.assign(tps);
            c.seekToBeginning(tps);
            long deadline = System.currentTimeMillis() + 60_000;
            long quietUntil = Long.MAX_VALUE;
            while (System.currentTimeMillis() < Math.min(deadline, quietUntil)) {
                for (ConsumerRecord<byte[], byte[]> r : c.poll(Duration.ofMillis(300))) {
                    String key = s(r.key());
                    RecordMetadata m = acked.get(key);
                    if (m == null) fail(codec + ": unexpected record " + key + " at " + r.partition() + "/" + r.offset());
                    if (!seen.add(key)) fail(codec + ": " + key + " consumed twice (again at " + r.partition() + "/" + r.offset() + ")");
                    int i = Integer.parseInt(key.substring(4));
                    if (m.partition() != r.partition() || m.offset() != r.offset())
                        fail(codec + ": " + key + " consumed at " + r.partition() + "/" + r.offset()
                            + ", acked at " + m.partition() + "/" + m.offset());
                    Long prev = lastOffset.put(r.partition(), r.offset());
                    if (prev != null && prev >= r.offset())
                        fail(codec + ": partition " + r.partition() + " offset " + r.offset() + " after " + prev);
                    if (!s(r.value()).equals("value-" + i + "-" + codec))
                        fail(codec + ": " + key + " value " + s(r.value()));
                    if (r.timestampType() != TimestampType.CREATE_TIME || r.timestamp() != BASE_TS + i)
                        fail(codec + ": " + key + " timestamp " + r.timestampType() + " " + r.timestamp() + ", want CreateTime " + (BASE_TS + i));
                    Header[] hs = r.headers().toArray();
                    if (hs.length != 2 || !hs[0].key().equals("idx") || !s(hs[0].value()).equals(Integer.toString(i))
                        || !hs[1].key().equals("codec") || !s(hs[1].value()).equals(codec)) {
                        StringBuilder sb = new StringBuilder();
                        for (Header h : hs) sb.append(h.key()).append('=').append(s(h.value())).append(' ');
                        fail(codec + ": " + key + " headers [" + sb.toString().trim() + "]");
                    }
                }
                // Once everything is in, keep polling briefly: nothing more may come.
                if (seen.size() == n && quietUntil == Long.MAX_VALUE) quietUntil = System.currentTimeMillis() + 1000;
            }
            if (seen.size() != n) fail(codec + ": consumed " + seen.size() + " of " + n + " within 60 s");
            Map<TopicPartition, Long> begin = c.beginningOffsets(tps, Duration.ofSeconds(15));
            Map<TopicPartition, Long> end = c.endOffsets(tps, Duration.ofSeconds(15));
            for (TopicPartition tp : tps) {
                long want = ackedOffsets.getOrDefault(tp.partition(), List.of()).size();
                if (begin.get(tp) != 0L) fail(codec + ": " + tp + " beginning offset " + begin.get(tp) + ", want 0");
                if (end.get(tp) != want) fail(codec + ": " + tp + " end offset " + end.get(tp) + ", want " + want);
            }
        }
    }
}
