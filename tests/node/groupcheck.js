// Two kafkajs consumers in one group on a 6-partition topic: produces n messages, consumes
// until all are seen, prints "OK <n>" if assignments were disjoint and covered every
// partition and no message came twice. Args: bootstrap topic group n. Bounded by 60 s.
// A connection refused by the broker (e.g. wrong SASL credentials) prints "FAIL connect: ...".
const { Kafka, logLevel } = require("kafkajs");

const [bootstrap, topic, group, nStr] = process.argv.slice(2);
const n = Number(nStr);
// Optional security from the environment: KELP_SSL_CA (a PEM file: TLS trusting it) and
// KELP_SASL ("mechanism:user:password", e.g. "scram-sha-512:alice:secret", or
// "oauthbearer::<JWT>").
const fs = require("fs");
const config = { brokers: [bootstrap], clientId: "kelp-e2e", logLevel: logLevel.NOTHING };
if (process.env.KELP_SSL_CA) config.ssl = { ca: [fs.readFileSync(process.env.KELP_SSL_CA)] };
// KELP_SSL_CERT and KELP_SSL_KEY: a client certificate (mutual TLS).
if (config.ssl && process.env.KELP_SSL_CERT) {
  config.ssl.cert = fs.readFileSync(process.env.KELP_SSL_CERT);
  config.ssl.key = fs.readFileSync(process.env.KELP_SSL_KEY);
}
if (process.env.KELP_SASL) {
  const [mechanism, username, ...rest] = process.env.KELP_SASL.split(":");
  if (mechanism === "oauthbearer") {
    // "oauthbearer::<JWT>": the token as the provider's answer.
    const value = rest.join(":");
    config.sasl = { mechanism, oauthBearerProvider: async () => ({ value }) };
  } else {
    config.sasl = { mechanism, username, password: rest.join(":") };
  }
}
const kafka = new Kafka(config);

function fail(msg) {
  console.log("FAIL " + msg);
  process.exit(1);
}

async function main() {
  const timer = setTimeout(() => fail("timed out"), 60000);
  // With SASL a refused connection is what is checked: the admin does not retry it.
  const admin = kafka.admin(process.env.KELP_SASL ? { retry: { retries: 0 } } : {});
  try {
    await admin.connect();
  } catch (e) {
    fail("connect: " + (e.type || e.name) + ": " + e.message);
  }
  await admin.createTopics({ topics: [{ topic, numPartitions: 6 }] });
  await admin.disconnect();

  const producer = kafka.producer({ idempotent: true, maxInFlightRequests: 1 });
  await producer.connect();
  const messages = [];
  for (let i = 0; i < n; i++) messages.push({ value: String(i), partition: i % 6 });
  await producer.send({ topic, messages, acks: -1 });
  await producer.disconnect();

  const seen = new Map();
  const assigned = [new Set(), new Set()];
  const consumers = [];
  for (let ci = 0; ci < 2; ci++) {
    const c = kafka.consumer({ groupId: group, sessionTimeout: 10000, heartbeatInterval: 500 });
    c.on(c.events.GROUP_JOIN, (e) => {
      assigned[ci] = new Set((e.payload.memberAssignment[topic] || []).map(Number));
    });
    await c.connect();
    await c.subscribe({ topic, fromBeginning: true });
    await c.run({
      eachMessage: async ({ message }) => {
        const v = message.value.toString();
        seen.set(v, (seen.get(v) || 0) + 1);
      },
    });
    consumers.push(c);
  }
  while (seen.size < n) await new Promise((r) => setTimeout(r, 100));
  await new Promise((r) => setTimeout(r, 1000));
  const final = assigned.map((s) => new Set(s));
  for (const c of consumers) await c.disconnect();
  clearTimeout(timer);
  for (const [v, k] of seen) if (k !== 1) fail(`message ${v} seen ${k} times`);
  const union = new Set();
  for (const s of final) {
    if (s.size === 0) fail("a consumer got no partitions");
    for (const p of s) {
      if (union.has(p)) fail(`partition ${p} assigned twice`);
      union.add(p);
    }
  }
  if (union.size !== 6) fail(`assignments cover ${union.size} partitions`);
  console.log("OK " + seen.size);
}

main().catch((e) => fail(e.stack || String(e)));
