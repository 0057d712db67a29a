// Java kafka-clients 4.x transactions against a broker (tests/e2e/test_transactions.py runs
// it as a single-file program against ~/.cache/kelp/jars/clients):
//   java -cp 'jars/*' TransactionalRoundTrip.java BOOTSTRAP TOPIC
// A transactional producer commits 100 records, writes 50 and aborts them, commits 100 more;
// a second producer with the same transactional.id takes over (initTransactions) while the
// first has a transaction open, and the first one's commit must fail as fenced. A
// read_committed consumer must then read exactly the 200 committed records plus the new
// producer's 10, in order per partition; a read_uncommitted one sees the aborted 50 and the
// zombie's record too. Prints "OK committed=210 uncommitted=261 fenced=true", or "FAIL ..."
// and exits 1.
import java.time.Duration;
import java.util.*;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.InvalidProducerEpochException;
import org.apache.kafka.common.errors.ProducerFencedException;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

public class TransactionalRoundTrip {
    static void fail(String why) {
        System.out.println("FAIL " + why);
        System.exit(1);
    }

    static KafkaProducer<String, String> producer(String bs, String txnId) {
        Properties p = new Properties();
        p.put("bootstrap.servers", bs);
        p.put("transactional.id", txnId);
        p.put("key.serializer", StringSerializer.class.getName());
        p.put("value.serializer", StringSerializer.class.getName());
        p.put("linger.ms", "5");
        return new KafkaProducer<>(p);
    }

    static int count(String bs, String topic, String isolation, int expect) {
        Properties c = new Properties();
        c.put("bootstrap.servers", bs);
        c.put("isolation.level", isolation);
        c.put("key.deserializer", StringDeserializer.class.getName());
        c.put("value.deserializer", StringDeserializer.class.getName());
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(c)) {
            List<TopicPartition> parts = new ArrayList<>();
            for (int i = 0; i < 3; i++) parts.add(new TopicPartition(topic, i));
            consumer.assign(parts);
            consumer.seekToBeginning(parts);
            int n = 0;
            Map<Integer, Long> last = new HashMap<>();
            long deadline = System.currentTimeMillis() + 30_000;
            while (n < expect && System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(300))) {
                    Long prev = last.put(r.partition(), r.offset());
                    if (prev != null && prev >= r.offset()) fail("offsets out of order in " + r.partition());
                    if (isolation.equals("read_committed") && (r.value().startsWith("aborted") || r.value().startsWith("zombie")))
                        fail("read_committed saw " + r.value());
                    n++;
                }
            }
            // Nothing more should come.
            for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofSeconds(2))) n++;
            return n;
        }
    }

    public static void main(String[] args) throws Exception {
        String bs = args[0], topic = args[1];
        try (Admin admin = Admin.create(Map.of("bootstrap.servers", bs))) {
            admin.createTopics(List.of(new NewTopic(topic, 3, (short) 1))).all().get();
        }
        String txnId = topic + "-txn";
        KafkaProducer<String, String> p = producer(bs, txnId);
        p.initTransactions();
        String[][] rounds = {{"a", "commit"}, {"aborted", "abort"}, {"c", "commit"}};
        for (String[] round : rounds) {
            int n = round[1].equals("commit") ? 100 : 50;
            p.beginTransaction();
            for (int i = 0; i < n; i++) p.send(new ProducerRecord<>(topic, round[0] + i, round[0] + i));
            if (round[1].equals("commit")) {
                p.commitTransaction();
            } else {
                p.flush();
                p.abortTransaction();
            }
        }
        // The zombie: a transaction open when a new producer takes the id over.
        p.beginTransaction();
        p.send(new ProducerRecord<>(topic, "zombie", "zombie")).get();
        KafkaProducer<String, String> q = producer(bs, txnId);
        q.initTransactions();
        q.beginTransaction();
        for (int i = 0; i < 10; i++) q.send(new ProducerRecord<>(topic, "new" + i, "new" + i));
        q.commitTransaction();
        q.close();
        boolean fenced = false;
        try {
            p.commitTransaction();
        } catch (ProducerFencedException | InvalidProducerEpochException e) {
            fenced = true;
        } catch (KafkaException e) {
            fenced = e.getCause() instanceof ProducerFencedException
                || e.getCause() instanceof InvalidProducerEpochException;
            if (!fenced) throw e;
        }
        p.close(Duration.ofSeconds(5));
        if (!fenced) fail("the zombie's commit went through");
        int committed = count(bs, topic, "read_committed", 210);
        int uncommitted = count(bs, topic, "read_uncommitted", 261);
        if (committed != 210) fail("read_committed read " + committed + " of 210");
        if (uncommitted != 261) fail("read_uncommitted read " + uncommitted + " of 261");
        System.out.println("OK committed=" + committed + " uncommitted=" + uncommitted + " fenced=" + fenced);
    }
}
