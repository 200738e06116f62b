// Checks the package's signing and webhook verification against the published vectors
// (schemas/vectors): `node <build>/test/vectors.js <directory of the vectors>`. Prints one
// line per vector and exits 1 when any does not hold.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { canonicalString, sign, signatureHeaders, verifyWebhookSignature, WEBHOOK_TOLERANCE_SECONDS } from '../src/index.js';

const dir = process.argv[2];
if (!dir) throw new Error('usage: vectors.js <schemas/vectors directory>');
const load = (name: string): unknown => JSON.parse(readFileSync(join(dir, name), 'utf8'));

interface RequestVector {
  name: string; secret: string; key_id: string; timestamp: string; method: string;
  path: string; query: string; body: string; canonical: string; signature: string;
}
interface WebhookFile {
  window_seconds: number;
  signatures: { name: string; secret: string; timestamp: string; body: string; signature: string }[];
  verify: { name: string; secret: string; timestamp: string; body: string; signature: string; now: number; valid: boolean }[];
}

let failed = 0;
const check = (what: string, ok: boolean, detail: string): void => {
  console.log(`${ok ? 'ok  ' : 'FAIL'} ${what}${ok ? '' : ': ' + detail}`);
  if (!ok) failed++;
};

for (const v of (load('request-signing.json') as { vectors: RequestVector[] }).vectors) {
  const target = v.path + (v.query ? '?' + v.query : '');
  const canonical = canonicalString(v.timestamp, v.method, target, v.body);
  check(`request: ${v.name}: canonical`, canonical === v.canonical, JSON.stringify(canonical));
  check(`request: ${v.name}: signature`, sign(v.secret, canonical) === v.signature, sign(v.secret, canonical));
  // The headers the middleware sends for this request at the vector's time.
  const h = signatureHeaders({ keyId: v.key_id, secret: v.secret }, v.method, new URL('https://api.example.com' + target), v.body, new Date(v.timestamp));
  check(`request: ${v.name}: headers`, h['X-API-SIGN'] === v.signature && h['X-API-TIMESTAMP'] === v.timestamp && h['X-API-KEY'] === v.key_id, JSON.stringify(h));
}

const wh = load('webhook-signing.json') as WebhookFile;
check('webhook: tolerance', wh.window_seconds === WEBHOOK_TOLERANCE_SECONDS, String(wh.window_seconds));
for (const v of wh.signatures) {
  const now = Number(v.timestamp);
  check(`webhook: ${v.name}`, verifyWebhookSignature(v.secret, v.timestamp, v.body, v.signature, now), v.signature);
}
for (const v of wh.verify) {
  const got = verifyWebhookSignature(v.secret, v.timestamp, v.body, v.signature, v.now);
  check(`webhook verify: ${v.name}`, got === v.valid, `verified ${got}, want ${v.valid}`);
}
if (failed > 0) {
  console.log(`${failed} vector(s) failed`);
  process.exit(1);
}
