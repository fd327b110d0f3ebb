import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.DescribeTopicsOptions;
import org.apache.kafka.clients.admin.ListConsumerGroupOffsetsOptions;
import org.apache.kafka.clients.admin.ListOffsetsResult;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.ProducerState;
import org.apache.kafka.clients.admin.ScramCredentialInfo;
import org.apache.kafka.clients.admin.UserScramCredentialUpsertion;
import org.apache.kafka.common.acl.AclOperation;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.clients.admin.NewPartitions;
import org.apache.kafka.clients.admin.TransactionDescription;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerGroupMetadata;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * Line-oriented driver of the Apache Kafka Java client for the broker conformance tests.
 *
 * <p>Started once with the bootstrap servers; reads one command per line on stdin (fields
 * separated by tabs) and answers each with exactly one JSON line on stdout: {@code {"ok":
 * true, "result": ...}} or {@code {"ok": false, "error": "<exception class>", "message": ...,
 * "causes": [...]}}. Producers live across commands under a name chosen by the caller, so one
 * JVM can play a whole scenario with several clients.
 *
 * <p>Commands:
 *
 * <ul>
 *   <li>{@code producer NAME TXN_ID [key=value ...]} create a transactional producer
 *   <li>{@code init|begin|commit|abort|close NAME} (close of an unknown name does nothing)
 *   <li>{@code send NAME TOPIC PARTITION VALUE} asynchronous send, reported by {@code flush}
 *   <li>{@code flush NAME} flush; result is [[partition, offset], ...] of the sends since the
 *       last flush or begin, in send order
 *   <li>{@code sendoffsets NAME GROUP TOPIC PARTITION:OFFSET ...} sendOffsetsToTransaction
 *   <li>{@code consume TOPIC ISOLATION PARTITIONS TIMEOUT_MS} every record from the start to
 *       the end offsets at that isolation level: [[partition, offset, value], ...]
 *   <li>{@code endoffsets TOPIC ISOLATION PARTITIONS} consumer.endOffsets per partition
 *   <li>{@code committed GROUP TOPIC PARTITIONS TIMEOUT_MS} classic consumer's committed()
 *       (OffsetFetch with RequireStable); null for no offset
 *   <li>{@code groupoffsets GROUP TOPIC PARTITIONS} Admin listConsumerGroupOffsets without
 *       RequireStable; null for no offset
 *   <li>{@code describetxn TXN_ID} Admin describeTransactions: {"state", "producerId",
 *       "producerEpoch", "timeoutMs", "partitions": ["topic-p", ...]}
 *   <li>{@code deletegroups GROUP ...} Admin deleteConsumerGroups
 *   <li>{@code deleteoffsets GROUP TOPIC PARTITION ...} Admin deleteConsumerGroupOffsets
 *   <li>{@code createpartitions TOPIC COUNT} Admin createPartitions (increaseTo)
 *   <li>{@code topicops TOPIC} Admin describeTopics with authorized operations: sorted names
 *   <li>{@code maxtimestamp TOPIC PARTITION} Admin listOffsets maxTimestamp: [offset, ts]
 *   <li>{@code incalter TOPIC OP KEY VALUE} Admin incrementalAlterConfigs (OP: SET, DELETE,
 *       APPEND, SUBTRACT)
 *   <li>{@code topicconfig TOPIC KEY} Admin describeConfigs: the value
 *   <li>{@code createacl RTYPE NAME PATTERN PRINCIPAL HOST OP PERM} Admin createAcls with
 *       Kafka's enum names (TOPIC, PREFIXED, WRITE, ALLOW...)
 *   <li>{@code describeacls} Admin describeAcls(ANY): sorted [[rtype, name, pattern,
 *       principal, host, op, perm], ...]
 *   <li>{@code deleteacls RTYPE NAME PATTERN} Admin deleteAcls of the matching pattern (any
 *       entry): the number deleted
 *   <li>{@code groupconfig GROUP} Admin describeConfigs of a GROUP resource: {name: value}
 *   <li>{@code scramupsert USER MECHANISM ITERATIONS PASSWORD} Admin
 *       alterUserScramCredentials (MECHANISM: SCRAM_SHA_256, SCRAM_SHA_512)
 *   <li>{@code scramdescribe USER} Admin describeUserScramCredentials: [[mechanism,
 *       iterations], ...]
 *
 * <p>Extra command-line arguments {@code KEY=VALUE} configure the admin client (SASL).
 * </ul>
 */
public final class TxnHarness {
  private final String bootstrap;
  private final Map<String, KafkaProducer<String, String>> producers = new HashMap<>();
  private final Map<String, List<Future<RecordMetadata>>> pending = new HashMap<>();
  private Admin admin;
  private final Properties adminConfig = new Properties();

  private TxnHarness(String bootstrap) {
    this.bootstrap = bootstrap;
  }

  public static void main(String[] args) throws Exception {
    if (args.length < 1) {
      System.err.println("usage: TxnHarness BOOTSTRAP_SERVERS [ADMIN_KEY=VALUE ...]");
      System.exit(2);
    }
    PrintStream out = new PrintStream(System.out, true, StandardCharsets.UTF_8);
    TxnHarness harness = new TxnHarness(args[0]);
    for (int i = 1; i < args.length; i++) {
      String[] kv = args[i].split("=", 2);
      harness.adminConfig.put(kv[0], kv[1]);
    }
    BufferedReader in =
        new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
    out.println("{\"ok\": true, \"result\": \"ready\"}");
    String line;
    while ((line = in.readLine()) != null) {
      if (line.isEmpty()) {
        continue;
      }
      String[] f = line.split("\t", -1);
      String reply;
      try {
        reply = "{\"ok\": true, \"result\": " + harness.run(f) + "}";
      } catch (Throwable t) {
        reply = error(t);
      }
      out.println(reply);
    }
    harness.shutdown();
  }

  @SuppressWarnings("removal") // ConsumerGroupMetadata(String): what an assign()-only app has
  private String run(String[] f) throws Exception {
    switch (f[0]) {
      case "producer":
        return producer(f);
      case "init":
        producer(f[1]).initTransactions();
        return "null";
      case "begin":
        producer(f[1]).beginTransaction();
        pending.get(f[1]).clear();
        return "null";
      case "send":
        {
          ProducerRecord<String, String> rec =
              new ProducerRecord<>(f[2], Integer.parseInt(f[3]), null, f[4]);
          pending.get(f[1]).add(producer(f[1]).send(rec));
          return "null";
        }
      case "flush":
        return flush(f[1]);
      case "commit":
        producer(f[1]).commitTransaction();
        return "null";
      case "abort":
        producer(f[1]).abortTransaction();
        return "null";
      case "close":
        {
          KafkaProducer<String, String> p = producers.remove(f[1]);
          pending.remove(f[1]);
          if (p != null) { // tolerated, so that cleanup after a failed step stays quiet
            p.close(Duration.ofSeconds(5));
          }
          return "null";
        }
      case "sendoffsets":
        {
          Map<TopicPartition, OffsetAndMetadata> offsets = new LinkedHashMap<>();
          for (int i = 4; i < f.length; i++) {
            String[] po = f[i].split(":");
            offsets.put(
                new TopicPartition(f[3], Integer.parseInt(po[0])),
                new OffsetAndMetadata(Long.parseLong(po[1])));
          }
          producer(f[1]).sendOffsetsToTransaction(offsets, new ConsumerGroupMetadata(f[2]));
          return "null";
        }
      case "consume":
        return consume(f[1], f[2], Integer.parseInt(f[3]), Long.parseLong(f[4]));
      case "endoffsets":
        return endOffsets(f[1], f[2], Integer.parseInt(f[3]));
      case "committed":
        return committed(f[1], f[2], Integer.parseInt(f[3]), Long.parseLong(f[4]));
      case "groupoffsets":
        return groupOffsets(f[1], f[2], Integer.parseInt(f[3]));
      case "describetxn":
        return describeTxn(f[1]);
      case "deletegroups":
        admin()
            .deleteConsumerGroups(List.of(f).subList(1, f.length))
            .all()
            .get(20, TimeUnit.SECONDS);
        return "null";
      case "deleteoffsets":
        {
          Set<TopicPartition> tps = new HashSet<>();
          for (int i = 3; i < f.length; i++) {
            tps.add(new TopicPartition(f[2], Integer.parseInt(f[i])));
          }
          admin().deleteConsumerGroupOffsets(f[1], tps).all().get(20, TimeUnit.SECONDS);
          return "null";
        }
      case "topicops":
        {
          List<String> ops = new ArrayList<>();
          for (AclOperation op :
              admin()
                  .describeTopics(
                      List.of(f[1]), new DescribeTopicsOptions().includeAuthorizedOperations(true))
                  .allTopicNames()
                  .get(20, TimeUnit.SECONDS)
                  .get(f[1])
                  .authorizedOperations()) {
            ops.add(json(op.toString()));
          }
          ops.sort(null);
          return ops.toString();
        }
      case "describeproducers":
        {
          // [[producer id, epoch, last sequence, open transaction's first offset or -1], ...]
          TopicPartition tp = new TopicPartition(f[1], Integer.parseInt(f[2]));
          List<String> out = new ArrayList<>();
          for (ProducerState state :
              admin()
                  .describeProducers(List.of(tp))
                  .partitionResult(tp)
                  .get(20, TimeUnit.SECONDS)
                  .activeProducers()) {
            out.add(
                "["
                    + state.producerId()
                    + ", "
                    + state.producerEpoch()
                    + ", "
                    + state.lastSequence()
                    + ", "
                    + state.currentTransactionStartOffset().orElse(-1L)
                    + "]");
          }
          out.sort(null);
          return out.toString();
        }
      case "maxtimestamp":
        {
          TopicPartition tp = new TopicPartition(f[1], Integer.parseInt(f[2]));
          ListOffsetsResult.ListOffsetsResultInfo info =
              admin()
                  .listOffsets(Map.of(tp, OffsetSpec.maxTimestamp()))
                  .partitionResult(tp)
                  .get(20, TimeUnit.SECONDS);
          return "[" + info.offset() + ", " + info.timestamp() + "]";
        }
      case "incalter":
        {
          ConfigResource resource = new ConfigResource(ConfigResource.Type.TOPIC, f[1]);
          AlterConfigOp op =
              new AlterConfigOp(new ConfigEntry(f[3], f[4]), AlterConfigOp.OpType.valueOf(f[2]));
          admin()
              .incrementalAlterConfigs(Map.of(resource, List.of(op)))
              .all()
              .get(20, TimeUnit.SECONDS);
          return "null";
        }
      case "topicconfig":
        {
          ConfigResource resource = new ConfigResource(ConfigResource.Type.TOPIC, f[1]);
          Config config =
              admin().describeConfigs(List.of(resource)).all().get(20, TimeUnit.SECONDS).get(resource);
          return json(config.get(f[2]).value());
        }
      case "createacl":
        admin()
            .createAcls(
                List.of(
                    new org.apache.kafka.common.acl.AclBinding(
                        new org.apache.kafka.common.resource.ResourcePattern(
                            org.apache.kafka.common.resource.ResourceType.valueOf(f[1]),
                            f[2],
                            org.apache.kafka.common.resource.PatternType.valueOf(f[3])),
                        new org.apache.kafka.common.acl.AccessControlEntry(
                            f[4],
                            f[5],
                            AclOperation.valueOf(f[6]),
                            org.apache.kafka.common.acl.AclPermissionType.valueOf(f[7])))))
            .all()
            .get(20, TimeUnit.SECONDS);
        return "null";
      case "describeacls":
        {
          List<String> rows = new ArrayList<>();
          for (org.apache.kafka.common.acl.AclBinding b :
              admin()
                  .describeAcls(org.apache.kafka.common.acl.AclBindingFilter.ANY)
                  .values()
                  .get(20, TimeUnit.SECONDS)) {
            rows.add(
                "["
                    + String.join(
                        ", ",
                        json(b.pattern().resourceType().toString()),
                        json(b.pattern().name()),
                        json(b.pattern().patternType().toString()),
                        json(b.entry().principal()),
                        json(b.entry().host()),
                        json(b.entry().operation().toString()),
                        json(b.entry().permissionType().toString()))
                    + "]");
          }
          rows.sort(null);
          return "[" + String.join(", ", rows) + "]";
        }
      case "deleteacls":
        return String.valueOf(
            admin()
                .deleteAcls(
                    List.of(
                        new org.apache.kafka.common.acl.AclBindingFilter(
                            new org.apache.kafka.common.resource.ResourcePatternFilter(
                                org.apache.kafka.common.resource.ResourceType.valueOf(f[1]),
                                f[2],
                                org.apache.kafka.common.resource.PatternType.valueOf(f[3])),
                            org.apache.kafka.common.acl.AccessControlEntryFilter.ANY)))
                .all()
                .get(20, TimeUnit.SECONDS)
                .size());
      case "groupconfig":
        {
          ConfigResource resource = new ConfigResource(ConfigResource.Type.GROUP, f[1]);
          Config config =
              admin().describeConfigs(List.of(resource)).all().get(20, TimeUnit.SECONDS).get(resource);
          List<String> pairs = new ArrayList<>();
          config.entries().stream()
              .sorted((a, b) -> a.name().compareTo(b.name()))
              .forEach(e -> pairs.add(json(e.name()) + ": " + json(e.value())));
          return "{" + String.join(", ", pairs) + "}";
        }
      case "scramupsert":
        admin()
            .alterUserScramCredentials(
                List.of(
                    new UserScramCredentialUpsertion(
                        f[1],
                        new ScramCredentialInfo(
                            org.apache.kafka.clients.admin.ScramMechanism.valueOf(f[2]),
                            Integer.parseInt(f[3])),
                        f[4])))
            .all()
            .get(20, TimeUnit.SECONDS);
        return "null";
      case "scramdescribe":
        {
          List<String> infos = new ArrayList<>();
          for (ScramCredentialInfo info :
              admin()
                  .describeUserScramCredentials(List.of(f[1]))
                  .description(f[1])
                  .get(20, TimeUnit.SECONDS)
                  .credentialInfos()) {
            infos.add("[" + json(info.mechanism().toString()) + ", " + info.iterations() + "]");
          }
          infos.sort(null);
          return infos.toString();
        }
      case "createpartitions":
        admin()
            .createPartitions(Map.of(f[1], NewPartitions.increaseTo(Integer.parseInt(f[2]))))
            .all()
            .get(20, TimeUnit.SECONDS);
        return "null";
      default:
        throw new IllegalArgumentException("unknown command " + f[0]);
    }
  }

  private KafkaProducer<String, String> producer(String name) {
    KafkaProducer<String, String> p = producers.get(name);
    if (p == null) {
      throw new IllegalArgumentException("no producer named " + name);
    }
    return p;
  }

  private String producer(String[] f) {
    Properties props = new Properties();
    props.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
    props.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, f[2]);
    props.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, "20000");
    props.put(ProducerConfig.LINGER_MS_CONFIG, "0");
    for (int i = 3; i < f.length; i++) {
      String[] kv = f[i].split("=", 2);
      props.put(kv[0], kv[1]);
    }
    producers.put(
        f[1], new KafkaProducer<>(props, new StringSerializer(), new StringSerializer()));
    pending.put(f[1], new ArrayList<>());
    return "null";
  }

  private String flush(String name) throws Exception {
    producer(name).flush();
    List<Future<RecordMetadata>> futures = pending.get(name);
    StringBuilder sb = new StringBuilder("[");
    for (int i = 0; i < futures.size(); i++) {
      RecordMetadata md = futures.get(i).get(10, TimeUnit.SECONDS);
      sb.append(i == 0 ? "" : ", ").append('[').append(md.partition()).append(", ");
      sb.append(md.offset()).append(']');
    }
    futures.clear();
    return sb.append(']').toString();
  }

  private static List<TopicPartition> partitions(String topic, int count) {
    List<TopicPartition> tps = new ArrayList<>();
    for (int p = 0; p < count; p++) {
      tps.add(new TopicPartition(topic, p));
    }
    return tps;
  }

  private KafkaConsumer<String, String> consumer(String isolation, String group) {
    Properties props = new Properties();
    props.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
    props.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, isolation);
    props.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
    props.put(ConsumerConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "20000");
    // close() waits for the in-flight long poll
    props.put(ConsumerConfig.FETCH_MAX_WAIT_MS_CONFIG, "100");
    if (group != null) {
      props.put(ConsumerConfig.GROUP_ID_CONFIG, group);
      props.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, "classic");
    }
    return new KafkaConsumer<>(props, new StringDeserializer(), new StringDeserializer());
  }

  private String consume(String topic, String isolation, int count, long timeoutMs) {
    List<TopicPartition> tps = partitions(topic, count);
    try (KafkaConsumer<String, String> c = consumer(isolation, null)) {
      c.assign(tps);
      c.seekToBeginning(tps);
      Map<TopicPartition, Long> end = c.endOffsets(tps);
      StringBuilder sb = new StringBuilder("[");
      boolean first = true;
      long deadline = System.currentTimeMillis() + timeoutMs;
      while (true) {
        boolean done = true;
        for (TopicPartition tp : tps) {
          done &= c.position(tp) >= end.get(tp);
        }
        if (done) {
          break;
        }
        if (System.currentTimeMillis() > deadline) {
          throw new IllegalStateException("did not reach the end offsets " + end + " in time");
        }
        for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(100))) {
          sb.append(first ? "" : ", ").append('[').append(r.partition()).append(", ");
          sb.append(r.offset()).append(", ").append(json(r.value())).append(']');
          first = false;
        }
      }
      return sb.append(']').toString();
    }
  }

  private String endOffsets(String topic, String isolation, int count) {
    List<TopicPartition> tps = partitions(topic, count);
    try (KafkaConsumer<String, String> c = consumer(isolation, null)) {
      Map<TopicPartition, Long> end = c.endOffsets(tps);
      List<String> out = new ArrayList<>();
      for (TopicPartition tp : tps) {
        out.add(String.valueOf(end.get(tp)));
      }
      return out.toString();
    }
  }

  private String committed(String group, String topic, int count, long timeoutMs) {
    List<TopicPartition> tps = partitions(topic, count);
    try (KafkaConsumer<String, String> c = consumer("read_committed", group)) {
      Map<TopicPartition, OffsetAndMetadata> got =
          c.committed(new HashSet<>(tps), Duration.ofMillis(timeoutMs));
      return offsetList(tps, got);
    }
  }

  private Admin admin() {
    if (admin == null) {
      Properties props = new Properties();
      props.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
      props.putAll(adminConfig);
      admin = Admin.create(props);
    }
    return admin;
  }

  private String describeTxn(String transactionalId) throws Exception {
    TransactionDescription d =
        admin()
            .describeTransactions(List.of(transactionalId))
            .description(transactionalId)
            .get(20, TimeUnit.SECONDS);
    List<String> parts = new ArrayList<>();
    for (TopicPartition tp : d.topicPartitions()) {
      parts.add(json(tp.toString()));
    }
    parts.sort(null);
    return "{\"state\": "
        + json(d.state().toString())
        + ", \"producerId\": "
        + d.producerId()
        + ", \"producerEpoch\": "
        + d.producerEpoch()
        + ", \"timeoutMs\": "
        + d.transactionTimeoutMs()
        + ", \"partitions\": "
        + parts
        + "}";
  }

  private String groupOffsets(String group, String topic, int count) throws Exception {
    List<TopicPartition> tps = partitions(topic, count);
    Map<TopicPartition, OffsetAndMetadata> got =
        admin()
            .listConsumerGroupOffsets(group, new ListConsumerGroupOffsetsOptions())
            .partitionsToOffsetAndMetadata()
            .get(20, TimeUnit.SECONDS);
    return offsetList(tps, got);
  }

  private static String offsetList(
      List<TopicPartition> tps, Map<TopicPartition, OffsetAndMetadata> got) {
    List<String> out = new ArrayList<>();
    for (TopicPartition tp : tps) {
      OffsetAndMetadata om = got.get(tp);
      out.add(om == null ? "null" : String.valueOf(om.offset()));
    }
    return out.toString();
  }

  private void shutdown() {
    for (KafkaProducer<String, String> p : producers.values()) {
      p.close(Duration.ofSeconds(2));
    }
    if (admin != null) {
      admin.close(Duration.ofSeconds(2));
    }
  }

  private static String error(Throwable t) {
    if (t instanceof ExecutionException && t.getCause() != null) {
      t = t.getCause();
    }
    List<String> causes = new ArrayList<>();
    for (Throwable c = t.getCause(); c != null && causes.size() < 5; c = c.getCause()) {
      causes.add(json(c.getClass().getSimpleName()));
    }
    return "{\"ok\": false, \"error\": "
        + json(t.getClass().getSimpleName())
        + ", \"message\": "
        + json(String.valueOf(t.getMessage()))
        + ", \"causes\": "
        + causes
        + "}";
  }

  private static String json(String s) {
    if (s == null) {
      return "null";
    }
    StringBuilder sb = new StringBuilder("\"");
    for (char ch : s.toCharArray()) {
      switch (ch) {
        case '"':
          sb.append("\\\"");
          break;
        case '\\':
          sb.append("\\\\");
          break;
        default:
          if (ch < 0x20) {
            sb.append(String.format("\\u%04x", (int) ch));
          } else {
            sb.append(ch);
          }
      }
    }
    return sb.append('"').toString();
  }
}
