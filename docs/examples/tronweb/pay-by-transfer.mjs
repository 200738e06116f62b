// Pay by transfer from outside: TronWeb against the simulator and the API of a running stack.
import { TronWeb } from 'tronweb';
const NODE = process.env.NODE_URL || 'http://127.0.0.1:18101';
const API = process.env.API_URL || 'http://127.0.0.1:18100';
const tw = new TronWeb({ fullHost: NODE });
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
async function j(url, opts) { const r = await fetch(url, opts); return [r.status, await r.json()]; }
async function fund(addr, sun) {
  const [s, b] = await j(`${NODE}/sim/trx/transfer`, { method: 'POST', body: JSON.stringify({ to: addr, amount_sun: sun }) });
  if (s !== 200) throw new Error('fund: ' + JSON.stringify(b));
  for (let i = 0; i < 100; i++) { if ((await tw.trx.getBalance(addr)) === sun) return; await sleep(200); }
  throw new Error('not funded');
}
async function payment(txid, want) {
  const t0 = Date.now();
  for (let i = 0; i < 200; i++) {
    const [s, b] = await j(`${API}/v1/payments/${txid}`);
    if (s === 200 && b.status === want) return [b, Date.now() - t0];
    await sleep(100);
  }
  throw new Error(`payment ${txid} never ${want}`);
}
const fail = (m) => { console.error('FAIL', m); process.exit(1); };

const [, prices] = await j(`${API}/v1/prices`);
const pay = prices.payment_addresses.energy_1h;
const row = prices.items.find((i) => i.resource === 'energy' && i.tier === '1h');
console.log('energy_1h pays to', pay, 'price', row.price_sun_per_unit, 'min', row.min_amount);

// 1. A fresh wallet sends TRX with trx.sendTransaction: the energy the quote promises.
const w = await tw.createAccount();
await fund(w.address.base58, 100_000_000);
const sent = await tw.trx.sendTransaction(pay, 5_000_000, { privateKey: w.privateKey });
if (!sent.result) fail('sendTransaction: ' + JSON.stringify(sent));
const head0 = (await tw.trx.getCurrentBlock()).block_header.raw_data.number;
const [p1, ms1] = await payment(sent.txid, 'delivered');
const res = await tw.trx.getAccountResources(w.address.base58);
console.log('1. delivered', p1.amount, 'energy for', p1.price_sun, 'SUN, kept', p1.kept_sun, 'in', ms1, 'ms; EnergyLimit', res.EnergyLimit);
if (!(res.EnergyLimit >= p1.amount)) {
  for (let i = 0; i < 40 && !((await tw.trx.getAccountResources(w.address.base58)).EnergyLimit >= p1.amount); i++) await sleep(250);
}
const head1 = (await tw.trx.getCurrentBlock()).block_header.raw_data.number;
const got = (await tw.trx.getAccountResources(w.address.base58)).EnergyLimit;
console.log('   energy', got, 'at block', head1, '(transfer broadcast at head', head0 + ')');
if (!(got >= p1.amount)) fail('no energy');

// 2. sendTrx + addUpdateData: the memo's address receives.
const r = await tw.createAccount();
await fund(r.address.base58, 1_000_000);
let tx = await tw.transactionBuilder.sendTrx(pay, 4_000_000, w.address.base58);
tx = await tw.transactionBuilder.addUpdateData(tx, r.address.base58, 'utf8');
const signed = await tw.trx.sign(tx, w.privateKey);
const b1 = await tw.trx.sendRawTransaction(signed);
if (!b1.result) fail('memo broadcast: ' + JSON.stringify(b1));
// 4. The same transfer broadcast twice is served once.
const b2 = await tw.trx.sendRawTransaction(signed);
console.log('   second broadcast:', JSON.stringify(b2).slice(0, 120));
const [p2] = await payment(signed.txID, 'delivered');
if (p2.receiver !== r.address.base58) fail('memo receiver ' + p2.receiver);
console.log('2. memo delivered to', p2.receiver, p2.amount, 'energy; memo', JSON.stringify(p2.memo));

// 3. Below the minimum: the transfer comes back.
const s = await tw.createAccount();
await fund(s.address.base58, 10_000_000);
const small = await tw.trx.sendTransaction(pay, 1_500_000, { privateKey: s.privateKey });
const [p3] = await payment(small.txid, 'refunded');
console.log('3. refunded', p3.refund_sun, 'reason', p3.reason, 'refund tx', p3.refund_txid);
for (let i = 0; i < 50 && (await tw.trx.getBalance(s.address.base58)) < 10_000_000; i++) await sleep(200);
console.log('   sender balance', await tw.trx.getBalance(s.address.base58));

const [s404, b404] = await j(`${API}/v1/payments/${'0'.repeat(64)}`);
console.log('unknown txid:', s404, b404.error && b404.error.slug);
console.log('OK');
