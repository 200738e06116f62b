// Checks request-signing.json and webhook-signing.json with Node's own crypto and nothing
// else, as an integrator's signer would: `node check.mjs [directory of the two files]`.
// Prints one line per vector and exits 1 when any vector does not hold.
import { createHmac, timingSafeEqual } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';

const dir = process.argv[2] ?? dirname(fileURLToPath(import.meta.url));
const load = (name) => JSON.parse(readFileSync(join(dir, name), 'utf8'));
const hmac = (secret, message) =>
  createHmac('sha256', Buffer.from(secret, 'utf8')).update(Buffer.from(message, 'utf8')).digest();

let failed = 0;
const check = (what, ok, detail) => {
  console.log(`${ok ? 'ok  ' : 'FAIL'} ${what}${ok ? '' : ': ' + detail}`);
  if (!ok) failed++;
};

// API requests: canonical = timestamp + METHOD + path + ("?" + query, if any) + body.
for (const v of load('request-signing.json').vectors) {
  const target = v.path + (v.query ? '?' + v.query : '');
  const canonical = v.timestamp + v.method.toUpperCase() + target + v.body;
  const signature = hmac(v.secret, canonical).toString('base64');
  check(`request: ${v.name}: canonical`, canonical === v.canonical && target === v.request_target,
    JSON.stringify(canonical));
  check(`request: ${v.name}: signature`, signature === v.signature && v.headers['X-API-SIGN'] === signature &&
    v.headers['X-API-TIMESTAMP'] === v.timestamp && v.headers['X-API-KEY'] === v.key_id, signature);
}

// Webhooks: signature over timestamp + "." + raw body; verification within the window.
const wh = load('webhook-signing.json');
for (const v of wh.signatures) {
  const payload = v.timestamp + '.' + v.body;
  const signature = hmac(v.secret, payload).toString('base64');
  check(`webhook: ${v.name}`, payload === v.signed_payload && signature === v.signature, signature);
}

function verify(secret, timestamp, body, signature, now) {
  if (!/^[0-9]+$/.test(timestamp)) return false;
  if (Math.abs(now - Number(timestamp)) > wh.window_seconds) return false;
  const got = Buffer.from(signature, 'base64');
  if (got.length !== 32 || got.toString('base64') !== signature) return false;
  return timingSafeEqual(got, hmac(secret, timestamp + '.' + body));
}
for (const v of wh.verify) {
  const got = verify(v.secret, v.timestamp, v.body, v.signature, v.now);
  check(`webhook verify: ${v.name}`, got === v.valid, `verified ${got}, want ${v.valid}`);
}

if (failed > 0) {
  console.log(`${failed} vector(s) failed`);
  process.exit(1);
}
