// A share-group (KIP-932) member: the Java KafkaShareConsumer of kafka-clients 4.2.x, run against a
// broker by tests/e2e/test_share_groups.py as a single-file program against
// ~/.cache/kelp/jars/clients-share:
//
//   java -cp 'jars/*' ShareConsume.java config BOOTSTRAP GROUP KEY=VALUE...
//     Sets group configs (Admin incrementalAlterConfigs on a GROUP resource, e.g.
//     share.auto.offset.reset=earliest: Kafka's default, latest, skips what was produced before
//     the group's first fetch), then waits until DescribeConfigs shows every value
//     ("CONFIG KEY VALUE" each), at most 30 s ("ERROR ..." and exit 2 otherwise).
//
//   java -cp 'jars/*' ShareConsume.java consume BOOTSTRAP GROUP TOPIC [OPTION...]
//     Subscribes a KafkaShareConsumer to TOPIC and polls until a stop condition, then commits
//     (commitSync) and closes cleanly. Options:
//       --ack implicit|explicit   share.acknowledgement.mode (default implicit)
//       --max N                   stop after a poll that brought the records handled to N or more
//       --timeout-ms T            stop T ms after the start (default 60000)
//       --stop-file PATH          stop once PATH exists (checked between polls)
//       --release SUFFIX          explicit: RELEASE records whose value ends with SUFFIX when
//                                 delivered the first time (delivery count 1), ACCEPT them after
//       --reject SUFFIX           explicit: REJECT records whose value ends with SUFFIX
//       --accept-first N          explicit: acknowledge only the first N records; the rest of that
//                                 poll is left unacknowledged and the consumer stops (close then
//                                 releases them)
//       --commit-each-poll        commitSync after every poll (else acknowledgements ride on the
//                                 next ShareFetch, and the last ones go with the final commitSync)
//       --halt                    after the first poll that returns records: print them, then
//                                 Runtime.halt(3) without acknowledging or closing anything (the
//                                 broker sees the connections drop)
//       --client-id ID, --prop KEY=VALUE   more consumer configs
//     Prints, one line each:
//       REC partition offset key value deliveryCount   every record a poll returned
//       ACK partition offset ACCEPT|RELEASE|REJECT|NONE   explicit mode: what it did with it
//       ACKED partition first-last OK|error            acknowledgement commit callback (the
//                                                      broker's answer to acks sent)
//       COMMITERR partition error                      a commitSync answer with an error
//       HALT n                                         --halt: about to halt after n records
//       DONE handled n                                 closed cleanly
//       ERROR message                                  anything unexpected (then exit 2)
import java.io.File;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import java.util.Set;
import java.util.TreeSet;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicIdPartition;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.serialization.StringDeserializer;

public class ShareConsume {
    public static void main(String[] args) throws Exception {
        try {
            if (args.length >= 3 && args[0].equals("config")) {
                config(args[1], args[2], List.of(args).subList(3, args.length));
            } else if (args.length >= 4 && args[0].equals("consume")) {
                consume(args[1], args[2], args[3], List.of(args).subList(4, args.length));
            } else {
                System.err.println("usage: ShareConsume config BOOTSTRAP GROUP KEY=VALUE... | "
                    + "consume BOOTSTRAP GROUP TOPIC [OPTION...]");
                System.exit(64);
            }
        } catch (Throwable e) {
            System.out.println("ERROR " + e.getClass().getName() + ": " + e.getMessage());
            e.printStackTrace();
            System.out.flush();
            System.exit(2);
        }
    }

    static void config(String bootstrap, String group, List<String> kvs) throws Exception {
        Properties p = new Properties();
        p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        try (Admin admin = Admin.create(p)) {
            ConfigResource res = new ConfigResource(ConfigResource.Type.GROUP, group);
            List<AlterConfigOp> ops = new ArrayList<>();
            for (String kv : kvs) {
                int eq = kv.indexOf('=');
                ops.add(new AlterConfigOp(new ConfigEntry(kv.substring(0, eq), kv.substring(eq + 1)),
                                          AlterConfigOp.OpType.SET));
            }
            admin.incrementalAlterConfigs(Map.of(res, ops)).all().get();
            // Kafka applies group configs through its metadata log: wait until they are visible.
            long deadline = System.currentTimeMillis() + 30_000;
            while (true) {
                Config c = admin.describeConfigs(List.of(res)).all().get().get(res);
                List<String> missing = new ArrayList<>();
                for (AlterConfigOp op : ops) {
                    ConfigEntry e = c.get(op.configEntry().name());
                    if (e == null || !op.configEntry().value().equals(e.value())) {
                        missing.add(op.configEntry().name() + "=" + (e == null ? null : e.value()));
                    }
                }
                if (missing.isEmpty()) {
                    break;
                }
                if (System.currentTimeMillis() > deadline) {
                    throw new IllegalStateException("group configs not visible after 30 s: " + missing);
                }
                Thread.sleep(200);
            }
            for (AlterConfigOp op : ops) {
                System.out.println("CONFIG " + op.configEntry().name() + " " + op.configEntry().value());
            }
        }
    }

    static void consume(String bootstrap, String group, String topic, List<String> opts) throws Exception {
        String ack = "implicit", release = null, reject = null, stopFile = null;
        long max = Long.MAX_VALUE, timeoutMs = 60_000, acceptFirst = Long.MAX_VALUE;
        boolean halt = false, commitEachPoll = false;
        Properties p = new Properties();
        for (int i = 0; i < opts.size(); i++) {
            String o = opts.get(i);
            switch (o) {
                case "--ack": ack = opts.get(++i); break;
                case "--max": max = Long.parseLong(opts.get(++i)); break;
                case "--timeout-ms": timeoutMs = Long.parseLong(opts.get(++i)); break;
                case "--stop-file": stopFile = opts.get(++i); break;
                case "--release": release = opts.get(++i); break;
                case "--reject": reject = opts.get(++i); break;
                case "--accept-first": acceptFirst = Long.parseLong(opts.get(++i)); break;
                case "--commit-each-poll": commitEachPoll = true; break;
                case "--halt": halt = true; break;
                case "--client-id": p.put(ConsumerConfig.CLIENT_ID_CONFIG, opts.get(++i)); break;
                case "--prop": {
                    String kv = opts.get(++i);
                    int eq = kv.indexOf('=');
                    p.put(kv.substring(0, eq), kv.substring(eq + 1));
                    break;
                }
                default: throw new IllegalArgumentException("unknown option " + o);
            }
        }
        boolean explicit = ack.equals("explicit");
        if (!explicit && !ack.equals("implicit")) {
            throw new IllegalArgumentException("--ack implicit|explicit, not " + ack);
        }
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        p.put(ConsumerConfig.SHARE_ACKNOWLEDGEMENT_MODE_CONFIG, ack);
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());

        long deadline = System.currentTimeMillis() + timeoutMs;
        long handled = 0, acked = 0;
        KafkaShareConsumer<String, String> c = new KafkaShareConsumer<>(p);
        c.setAcknowledgementCommitCallback((Map<TopicIdPartition, Set<Long>> offsets, Exception e) -> {
            for (Map.Entry<TopicIdPartition, Set<Long>> en : offsets.entrySet()) {
                TreeSet<Long> s = new TreeSet<>(en.getValue());
                if (s.isEmpty()) {
                    continue;
                }
                System.out.println("ACKED " + en.getKey().partition() + " " + s.first() + "-" + s.last()
                    + " " + (e == null ? "OK" : e.getClass().getSimpleName() + ":" + e.getMessage()));
            }
            System.out.flush();
        });
        c.subscribe(List.of(topic));
        boolean stop = false;
        while (!stop) {
            if (System.currentTimeMillis() >= deadline || (stopFile != null && new File(stopFile).exists())) {
                break;
            }
            ConsumerRecords<String, String> recs = c.poll(Duration.ofMillis(500));
            for (ConsumerRecord<String, String> r : recs) {
                handled++;
                int dc = r.deliveryCount().map(Short::intValue).orElse(-1);
                System.out.println("REC " + r.partition() + " " + r.offset() + " "
                    + (r.key() == null ? "-" : r.key()) + " " + r.value() + " " + dc);
                if (!explicit || halt) {
                    continue;
                }
                AcknowledgeType t;
                if (acked >= acceptFirst) {
                    System.out.println("ACK " + r.partition() + " " + r.offset() + " NONE");
                    stop = true;
                    continue;
                } else if (release != null && r.value() != null && r.value().endsWith(release) && dc == 1) {
                    t = AcknowledgeType.RELEASE;
                } else if (reject != null && r.value() != null && r.value().endsWith(reject)) {
                    t = AcknowledgeType.REJECT;
                } else {
                    t = AcknowledgeType.ACCEPT;
                }
                c.acknowledge(r, t);
                acked++;
                System.out.println("ACK " + r.partition() + " " + r.offset() + " " + t.name());
            }
            System.out.flush();
            if (halt && recs.count() > 0) {
                System.out.println("HALT " + recs.count());
                System.out.flush();
                Runtime.getRuntime().halt(3);
            }
            if (stop) {
                break;  // unacknowledged records: another poll would throw; close releases them
            }
            if (commitEachPoll && recs.count() > 0) {
                printCommitErrors(c.commitSync(Duration.ofSeconds(30)));
            }
            if (handled >= max) {
                break;
            }
        }
        printCommitErrors(c.commitSync(Duration.ofSeconds(30)));
        c.close(Duration.ofSeconds(30));
        System.out.println("DONE handled " + handled);
        System.out.flush();
    }

    static void printCommitErrors(Map<TopicIdPartition, Optional<KafkaException>> res) {
        for (Map.Entry<TopicIdPartition, Optional<KafkaException>> en : res.entrySet()) {
            en.getValue().ifPresent(e -> System.out.println(
                "COMMITERR " + en.getKey().partition() + " " + e.getClass().getSimpleName() + ":" + e.getMessage()));
        }
    }
}
