// Produces records "0", "1", ... (key = value) round-robin over a topic's partitions with the
// Java client's idempotent producer (acks=all, retries until delivery.timeout.ms) at a steady
// rate until the file named by the third argument exists, then flushes and exits. Prints one
// line per outcome: "ACK <id> <partition> <offset> <epoch ms>" or "FAIL <id> <error>", then
// "SENT <n>". Args: bootstrap topic stop-file rate-per-second. Run by the e2e cluster tests
// with `java -cp <jars> ClusterProducer.java` (single-file source launch).
import java.io.File;
import java.io.PrintStream;
import java.util.Properties;
import org.apache.kafka.clients.producer.*;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.serialization.StringSerializer;

public class ClusterProducer {
    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], topic = args[1];
        File stop = new File(args[2]);
        int rate = Integer.parseInt(args[3]);
        Properties pp = new Properties();
        pp.put("bootstrap.servers", bootstrap);
        pp.put("key.serializer", StringSerializer.class.getName());
        pp.put("value.serializer", StringSerializer.class.getName());
        pp.put("acks", "all");
        pp.put("enable.idempotence", "true");
        pp.put("linger.ms", "5");
        pp.put("request.timeout.ms", "5000");
        pp.put("delivery.timeout.ms", "120000");
        pp.put("retry.backoff.ms", "100");
        pp.put("retry.backoff.max.ms", "500");
        PrintStream out = new PrintStream(System.out, false, "UTF-8");
        long n = 0;
        try (KafkaProducer<String, String> p = new KafkaProducer<>(pp)) {
            int partitions = p.partitionsFor(topic).size();
            long start = System.nanoTime();
            while (!stop.exists()) {
                final long id = n++;
                String v = Long.toString(id);
                p.send(new ProducerRecord<>(topic, (int) (id % partitions), v, v), (md, e) -> {
                    synchronized (out) {
                        if (e == null) {
                            out.println("ACK " + id + " " + md.partition() + " " + md.offset()
                                + " " + System.currentTimeMillis());
                        } else {
                            out.println("FAIL " + id + " " + e);
                        }
                    }
                });
                long due = start + n * 1_000_000_000L / rate;
                long wait = due - System.nanoTime();
                if (wait > 0) Thread.sleep(wait / 1_000_000, (int) (wait % 1_000_000));
            }
            p.flush();
        }
        synchronized (out) {
            out.println("SENT " + n);
            out.flush();
        }
    }
}
