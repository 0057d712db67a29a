// Produces N records with the Java client's defaults (idempotence on, acks=all) to one
// partition, then reads them back in a consumer group and prints "OK <n>" if every record came
// back exactly once and in order. Args: bootstrap topic group n. Run by the e2e tests with
// `java -cp <jars> IdempotentRoundTrip.java` (single-file source launch).
import java.time.Duration;
import java.util.*;
import org.apache.kafka.clients.consumer.*;
import org.apache.kafka.clients.producer.*;
import org.apache.kafka.common.serialization.*;

public class IdempotentRoundTrip {
    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], topic = args[1], group = args[2];
        int n = Integer.parseInt(args[3]);
        Properties pp = new Properties();
        pp.put("bootstrap.servers", bootstrap);
        pp.put("key.serializer", StringSerializer.class.getName());
        pp.put("value.serializer", StringSerializer.class.getName());
        pp.put("linger.ms", "5");
        try (KafkaProducer<String, String> p = new KafkaProducer<>(pp)) {
            List<java.util.concurrent.Future<RecordMetadata>> fs = new ArrayList<>();
            for (int i = 0; i < n; i++) {
                fs.add(p.send(new ProducerRecord<>(topic, 0, "k" + i, "v" + i)));
            }
            long prev = -1;
            for (java.util.concurrent.Future<RecordMetadata> f : fs) {
                long off = f.get().offset();
                if (off != prev + 1) throw new IllegalStateException("offset gap at " + off);
                prev = off;
            }
        }
        Properties cp = new Properties();
        cp.put("bootstrap.servers", bootstrap);
        cp.put("group.id", group);
        cp.put("auto.offset.reset", "earliest");
        cp.put("enable.auto.commit", "false");
        cp.put("key.deserializer", StringDeserializer.class.getName());
        cp.put("value.deserializer", StringDeserializer.class.getName());
        List<String> got = new ArrayList<>();
        try (KafkaConsumer<String, String> c = new KafkaConsumer<>(cp)) {
            c.subscribe(Collections.singletonList(topic));
            long deadline = System.currentTimeMillis() + 30_000;
            while (got.size() < n && System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(200))) {
                    got.add(r.value());
                }
            }
            c.commitSync();
            // Anything beyond n would be a duplicate.
            long end = System.currentTimeMillis() + 1000;
            while (System.currentTimeMillis() < end) {
                for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(200))) {
                    got.add(r.value());
                }
            }
            Map<org.apache.kafka.common.TopicPartition, OffsetAndMetadata> committed =
                c.committed(Collections.singleton(new org.apache.kafka.common.TopicPartition(topic, 0)));
            System.out.println("COMMITTED " + committed.values().iterator().next().offset());
        }
        for (int i = 0; i < n; i++) {
            if (got.size() != n || !got.get(i).equals("v" + i)) {
                System.out.println("BAD " + got.size() + " first mismatch at " + i);
                System.exit(1);
            }
        }
        System.out.println("OK " + got.size());
    }
}
