// The soak's share-group (KIP-932) members: one JVM running N KafkaShareConsumer threads of one
// share group, explicit acknowledgement, for as long as the soak runs (perf/soak.py compiles it
// against ${KELP_CACHE:-~/.cache/kelp}/jars/clients-share and starts two of these processes; it
// kills one of them with SIGKILL now and then and starts it again).
//
//   java -cp 'classes:jars/*' ShareSoak BOOTSTRAP GROUP TOPIC NAME [OPTION...]
//     --members N        consumer threads (default 1), members NAME.0 .. NAME.(N-1)
//     --release-pct P    RELEASE a record delivered for the first time with probability P% (3)
//     --reject-pct P     REJECT a record with probability P% (1); everything else is ACCEPTed
//     --stop-file PATH   commit, close cleanly and exit once PATH exists
//     --earliest         first set the group config share.auto.offset.reset=earliest (Admin)
//     --think-ms T       wait T ms between logging a poll's records and acknowledging them
//                        (100): a SIGKILL often lands there, leaving acknowledgements unsent
//
// Writes one line per record delivered and per partition acknowledged, flushed after every poll
// and before the acknowledgements go out (commitSync after each poll), so that an
// acknowledgement the broker may have seen is always in the log:
//   D <member> <ms> <partition> <offset> <deliveryCount> ACCEPT|RELEASE|REJECT
//   A <member> <ms> sending                          the acknowledgements are about to leave
//   C <member> <ms> <partition> OK|ERR:<error>      commitSync's answer for that partition
// A member killed after its A line and before its C lines may or may not have had its
// acknowledgements applied (the broker answered, the answer was never logged); before its A
// line, they were never sent.
//   S <member> <ms> start | X <member> <ms> closed | E <member> <ms> <error>
import java.io.File;
import java.io.PrintStream;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import java.util.Random;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicIdPartition;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

public class ShareSoak {
    static final PrintStream OUT = new PrintStream(new java.io.FileOutputStream(java.io.FileDescriptor.out), false);

    static synchronized void emit(List<String> lines) {
        for (String l : lines) {
            OUT.println(l);
        }
        OUT.flush();
    }

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], group = args[1], topic = args[2], name = args[3];
        int members = 1;
        double releasePct = 3, rejectPct = 1;
        String stopFile = null;
        boolean earliest = false;
        long think = 100;
        for (int i = 4; i < args.length; i++) {
            switch (args[i]) {
                case "--members": members = Integer.parseInt(args[++i]); break;
                case "--release-pct": releasePct = Double.parseDouble(args[++i]); break;
                case "--reject-pct": rejectPct = Double.parseDouble(args[++i]); break;
                case "--stop-file": stopFile = args[++i]; break;
                case "--earliest": earliest = true; break;
                case "--think-ms": think = Long.parseLong(args[++i]); break;
                default: throw new IllegalArgumentException("unknown option " + args[i]);
            }
        }
        if (earliest) {
            Properties ap = new Properties();
            ap.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
            try (Admin admin = Admin.create(ap)) {
                ConfigResource res = new ConfigResource(ConfigResource.Type.GROUP, group);
                admin.incrementalAlterConfigs(Map.of(res, List.of(new AlterConfigOp(
                    new ConfigEntry("share.auto.offset.reset", "earliest"), AlterConfigOp.OpType.SET))))
                    .all().get();
            }
        }
        List<Thread> threads = new ArrayList<>();
        for (int m = 0; m < members; m++) {
            String member = name + "." + m;
            final double rel = releasePct, rej = rejectPct;
            final String stop = stopFile;
            final long th = think;
            Thread t = new Thread(() -> member(bootstrap, group, topic, member, rel, rej, stop, th), member);
            t.start();
            threads.add(t);
        }
        for (Thread t : threads) {
            t.join();
        }
    }

    static void member(String bootstrap, String group, String topic, String member, double releasePct,
                       double rejectPct, String stopFile, long think) {
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        p.put(ConsumerConfig.CLIENT_ID_CONFIG, "soak-share-" + member);
        p.put(ConsumerConfig.SHARE_ACKNOWLEDGEMENT_MODE_CONFIG, "explicit");
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        Random rnd = new Random();
        List<String> lines = new ArrayList<>();
        try (KafkaShareConsumer<byte[], byte[]> c = new KafkaShareConsumer<>(p)) {
            c.subscribe(List.of(topic));
            emit(List.of("S " + member + " " + System.currentTimeMillis() + " start"));
            while (stopFile == null || !new File(stopFile).exists()) {
                ConsumerRecords<byte[], byte[]> recs = c.poll(Duration.ofMillis(500));
                if (recs.isEmpty()) {
                    continue;
                }
                long now = System.currentTimeMillis();
                lines.clear();
                for (ConsumerRecord<byte[], byte[]> r : recs) {
                    int dc = r.deliveryCount().map(Short::intValue).orElse(-1);
                    double x = rnd.nextDouble() * 100;
                    AcknowledgeType t = x < rejectPct ? AcknowledgeType.REJECT
                        : (dc == 1 && x < rejectPct + releasePct) ? AcknowledgeType.RELEASE
                        : AcknowledgeType.ACCEPT;
                    c.acknowledge(r, t);
                    lines.add("D " + member + " " + now + " " + r.partition() + " " + r.offset() + " " + dc
                        + " " + t.name());
                }
                emit(lines);  // before the acknowledgements leave
                Thread.sleep(think);
                emit(List.of("A " + member + " " + System.currentTimeMillis() + " sending"));
                Map<TopicIdPartition, Optional<KafkaException>> res;
                try {
                    res = c.commitSync(Duration.ofSeconds(30));
                } catch (KafkaException e) {  // every acknowledgement of this poll unconfirmed
                    emit(List.of("E " + member + " " + System.currentTimeMillis() + " commitSync "
                        + String.valueOf(e).replace('\n', ' ')));
                    continue;
                }
                now = System.currentTimeMillis();
                lines.clear();
                for (Map.Entry<TopicIdPartition, Optional<KafkaException>> en : res.entrySet()) {
                    lines.add("C " + member + " " + now + " " + en.getKey().partition() + " "
                        + en.getValue().map(e -> "ERR:" + e.getClass().getSimpleName()).orElse("OK"));
                }
                emit(lines);
            }
            c.commitSync(Duration.ofSeconds(30));
        } catch (Throwable e) {
            emit(List.of("E " + member + " " + System.currentTimeMillis() + " "
                + String.valueOf(e).replace('\n', ' ')));
            return;
        }
        emit(List.of("X " + member + " " + System.currentTimeMillis() + " closed"));
    }
}
