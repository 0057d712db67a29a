// A Kafka Streams word count with processing.guarantee=exactly_once_v2, run against a broker
// by tests/e2e/test_streams.py as a single-file program against ~/.cache/kelp/jars/clients:
//   java -cp 'jars/*' StreamsWordCount.java BOOTSTRAP APP_ID IN_TOPIC OUT_TOPIC STATE_DIR [KEY=VALUE...]
// Lines of IN_TOPIC are split on spaces and counted per word in a state store (its changelog
// and the repartition topic are Streams' own internal topics); every new count goes to
// OUT_TOPIC (word -> count as a long). KEY=VALUE arguments are more Streams configs (e.g.
// topic.segment.ms=100 for the internal topics). Runs until killed; prints "STATE RUNNING" and
// the like as the application's state changes, "RESTORED <changelog> <partition> <records>" when
// a store partition was restored from its changelog, and "ERROR ..." (then exits 2) if a thread
// dies. The test kills it mid-run with SIGKILL and starts it again: with exactly-once, the last
// count per word must still be exact.
import java.util.Arrays;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.KeyValue;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.processor.StateRestoreListener;

public class StreamsWordCount {
    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], appId = args[1], in = args[2], out = args[3], stateDir = args[4];
        Properties p = new Properties();
        p.put(StreamsConfig.APPLICATION_ID_CONFIG, appId);
        p.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, StreamsConfig.EXACTLY_ONCE_V2);
        p.put(StreamsConfig.STATE_DIR_CONFIG, stateDir);
        p.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, "200");
        p.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, "2");
        p.put(StreamsConfig.DEFAULT_KEY_SERDE_CLASS_CONFIG, Serdes.StringSerde.class);
        p.put(StreamsConfig.DEFAULT_VALUE_SERDE_CLASS_CONFIG, Serdes.StringSerde.class);
        // One node: internal topics with one replica.
        p.put(StreamsConfig.REPLICATION_FACTOR_CONFIG, "1");
        // A killed instance's members leave the group within seconds, not Streams' 45.
        p.put(StreamsConfig.consumerPrefix("session.timeout.ms"), "6000");
        p.put(StreamsConfig.consumerPrefix("heartbeat.interval.ms"), "1000");
        for (int i = 5; i < args.length; i++) {
            int eq = args[i].indexOf('=');
            p.put(args[i].substring(0, eq), args[i].substring(eq + 1));
        }

        StreamsBuilder b = new StreamsBuilder();
        b.stream(in, Consumed.with(Serdes.String(), Serdes.String()))
            .flatMapValues(line -> Arrays.asList(line.split(" ")))
            .filter((k, word) -> !word.isEmpty())
            .map((k, word) -> KeyValue.pair(word, word))
            .groupByKey()
            .count()
            .toStream()
            .to(out, Produced.with(Serdes.String(), Serdes.Long()));

        KafkaStreams streams = new KafkaStreams(b.build(), p);
        streams.setStateListener((now, before) -> System.out.println("STATE " + now));
        streams.setGlobalStateRestoreListener(new StateRestoreListener() {
            public void onRestoreStart(TopicPartition tp, String store, long start, long end) {}
            public void onBatchRestored(TopicPartition tp, String store, long end, long n) {}
            public void onRestoreEnd(TopicPartition tp, String store, long total) {
                System.out.println("RESTORED " + tp.topic() + " " + tp.partition() + " " + total);
            }
        });
        // Any exception a thread dies of fails the test: say it and stop at once.
        streams.setUncaughtExceptionHandler(e -> {
            System.out.println("ERROR " + e);
            e.printStackTrace(System.out);
            System.out.flush();
            Runtime.getRuntime().halt(2);
            return null;
        });
        CountDownLatch done = new CountDownLatch(1);
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            streams.close();
            done.countDown();
        }));
        streams.start();
        done.await();
    }
}
