// End to end through the generated client on a running dev stack, driven by
// infra/cmd/devstack's TestE2ETypeScriptClient: register a webhook endpoint served here,
// fund the account at its deposit address (the simulator's faucet), wait for the credit,
// place an order, read it back until active, and verify the order.confirmed delivery.
// Environment: API_URL, SIM_URL, KEY_ID, KEY_SECRET, RECEIVER (an activated address).
// Prints one JSON line with what it saw; exits 1 on any failure.
import { createServer, type IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createRentalClient, verifyWebhook, type WebhookEvent } from '../src/index.js';

const env = (name: string): string => {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is not set`);
  return v;
};
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
async function until<T>(what: string, seconds: number, probe: () => Promise<T | undefined>): Promise<T> {
  const end = Date.now() + seconds * 1000;
  for (;;) {
    const v = await probe();
    if (v !== undefined) return v;
    if (Date.now() > end) throw new Error(`${what}: not within ${seconds} s`);
    await sleep(200);
  }
}

interface Delivery { headers: IncomingHttpHeaders; body: Buffer }
const deliveries: Delivery[] = [];
const server = createServer((req, res) => {
  const chunks: Buffer[] = [];
  req.on('data', (c: Buffer) => chunks.push(c));
  req.on('end', () => {
    deliveries.push({ headers: req.headers, body: Buffer.concat(chunks) });
    res.writeHead(204).end();
  });
});
await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
const hookUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}/hooks`;

const api = createRentalClient({ baseUrl: env('API_URL'), apiKey: { keyId: env('KEY_ID'), secret: env('KEY_SECRET') } });
const receiver = env('RECEIVER');

try {
  const hook = await api.POST('/v1/webhooks', { body: { url: hookUrl, events: ['order.confirmed'] } });
  if (!hook.data) throw new Error(`POST /v1/webhooks: ${hook.response.status} ${JSON.stringify(hook.error)}`);
  // 201 carries the secret (shown once); only a replay of the same Idempotency-Key omits it.
  const secret = hook.data.secret;
  if (hook.response.status !== 201 || !secret) throw new Error(`POST /v1/webhooks: ${hook.response.status} without a secret`);

  const deps = await api.GET('/v1/deposit-addresses');
  const trx = deps.data?.data.find((d) => d.currency === 'TRX');
  if (!trx) throw new Error(`GET /v1/deposit-addresses: ${deps.response.status} ${JSON.stringify(deps.error)}`);
  const funded = 100_000_000;
  const faucet = await fetch(`${env('SIM_URL')}/sim/trx/transfer`, {
    method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ to: trx.address, amount_sun: funded }),
  });
  if (!faucet.ok) throw new Error(`faucet: ${faucet.status}`);
  const balance = await until('the deposit credited', 30, async () => {
    const b = await api.GET('/v1/balance');
    return b.data && b.data.balance_sun >= funded ? b.data : undefined;
  });
  await until('GET /v1/prices', 20, async () => ((await api.GET('/v1/prices')).data ? true : undefined));

  const created = await api.POST('/v1/orders', {
    body: { client_order_id: `ts-${receiver}`, resource: 'energy', amount: 65_000, tier: '5m', receiver },
  });
  if (!created.data) throw new Error(`POST /v1/orders: ${created.response.status} ${JSON.stringify(created.error)}`);
  const order = created.data;

  const active = await until('the order active', 30, async () => {
    const r = await api.GET('/v1/orders/{id}', { params: { path: { id: order.id } } });
    if (!r.data) throw new Error(`GET /v1/orders/{id}: ${r.response.status} ${JSON.stringify(r.error)}`);
    return r.data.status === 'active' ? r.data : undefined;
  });

  const confirmed = await until('the order.confirmed delivery', 30, async () => {
    for (const d of deliveries) {
      const ev: WebhookEvent = verifyWebhook(secret, d.headers, d.body);
      if (ev.event === 'order.confirmed' && ev.data.order_id === order.id) return { ev, headers: d.headers };
    }
    return undefined;
  });
  // A delivery with another secret or a changed byte must not verify.
  let forgedRefused = false;
  try {
    verifyWebhook('whsec_not_the_secret', confirmed.headers, JSON.stringify(confirmed.ev));
  } catch {
    forgedRefused = true;
  }

  console.log(JSON.stringify({
    balance_sun: balance.balance_sun,
    order_id: order.id, created_status: created.response.status, read_status: active.status,
    total_amount_sun: order.total_amount_sun, delegate_hashes: active.delegate_hashes,
    event: confirmed.ev.event, event_id: confirmed.ev.event_id, event_order_id: confirmed.ev.data.order_id,
    event_delivered_amount: confirmed.ev.data.delivered_amount, event_test: confirmed.ev.test,
    forged_refused: forgedRefused, deliveries: deliveries.length,
  }));
} finally {
  server.close();
}
