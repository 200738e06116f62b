// Reads the given topics of the service's Kafka from the beginning up to their current end
// with kafkajs, a stock Node client, and prints each record as one JSON line. The service's
// producers compress record batches with snappy, so the snappy codec is registered first.
//   {"topic", "partition", "offset", "key", "headers": {name: value}, "value": <parsed JSON>}
// Usage: KAFKA_BROKERS=127.0.0.1:9092 node read-topics.mjs events.orders.v1 events.accounts.v1
// (npm ci first). docs/topics.md describes the topics; the values follow schemas/events.
import kafkajs from 'kafkajs'; // CommonJS: named imports come from the default export
import SnappyCodec from 'kafkajs-snappy';

const { Kafka, logLevel, CompressionTypes, CompressionCodecs } = kafkajs;

CompressionCodecs[CompressionTypes.Snappy] = SnappyCodec;

const brokers = (process.env.KAFKA_BROKERS ?? '127.0.0.1:9092').split(',');
const topics = process.argv.slice(2);
if (topics.length === 0) {
  console.error('usage: node read-topics.mjs <topic> [topic ...]');
  process.exit(2);
}

const kafka = new Kafka({ clientId: 'topics-reader', brokers, logLevel: logLevel.ERROR });

// Where each partition ends now; the reader stops once it has read up to there.
const admin = kafka.admin();
await admin.connect();
const left = new Map(); // "topic/partition" -> end offset
for (const topic of topics) {
  for (const p of await admin.fetchTopicOffsets(topic)) {
    if (Number(p.high) > Number(p.low)) left.set(`${topic}/${p.partition}`, Number(p.high));
  }
}
await admin.disconnect();

// A fresh group id reads from the beginning and commits nothing another reader depends on.
const consumer = kafka.consumer({ groupId: `topics-reader-${process.pid}-${Date.now()}` });
await consumer.connect();
await consumer.subscribe({ topics, fromBeginning: true });
consumer.on(consumer.events.CRASH, (e) => {
  console.error(`consumer crashed: ${e.payload.error}`);
  process.exit(1);
});

const done = new Promise((resolve) => {
  if (left.size === 0) resolve();
  consumer.run({
    eachMessage: async ({ topic, partition, message }) => {
      const headers = {};
      for (const [name, value] of Object.entries(message.headers ?? {})) headers[name] = value?.toString('utf8');
      process.stdout.write(JSON.stringify({
        topic, partition, offset: Number(message.offset),
        key: message.key?.toString('utf8') ?? null,
        headers,
        value: JSON.parse(message.value.toString('utf8')),
      }) + '\n');
      const id = `${topic}/${partition}`;
      if (left.has(id) && Number(message.offset) + 1 >= left.get(id)) {
        left.delete(id);
        if (left.size === 0) resolve();
      }
    },
  });
});
const timeout = Number(process.env.READ_TIMEOUT_MS ?? 30000);
const timer = setTimeout(() => {
  console.error(`timed out after ${timeout} ms with ${left.size} partition(s) not read to the end`);
  process.exit(1);
}, timeout);
await done;
clearTimeout(timer);
await consumer.disconnect();
