// POST /v1/transactions checked from outside with TronWeb 6 against a dev stack: signup, key,
// faucet deposit, a wallet holding USDT without energy (FRESH=1: never activated), the three
// refusals with the balance unchanged, the transfer posted twice, its result, the reclaim.
// npm install tronweb; BASE=http://127.0.0.1:8080 SIM=http://127.0.0.1:8090 node relay.mjs
// (TronWeb checks an altered expiration against the wall clock: run it on a freshly reset
// dev stack, whose chain time is the wall clock's.)
import { TronWeb } from 'tronweb';
import crypto from 'node:crypto';
const BASE = process.env.BASE, SIM = process.env.SIM;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const tw = new TronWeb({ fullHost: SIM });

async function post(path, body, headers = {}) {
  const res = await fetch(BASE + path, { method: 'POST', headers: { 'Content-Type': 'application/json', ...headers }, body: JSON.stringify(body) });
  const json = await res.json();
  if (!res.ok) throw new Error(`${path}: HTTP ${res.status} ${JSON.stringify(json)}`);
  return json;
}
async function sim(path, body) {
  const res = await fetch(SIM + path, { method: body ? 'POST' : 'GET', headers: { 'Content-Type': 'application/json' }, body: body ? JSON.stringify(body) : undefined });
  return res.json();
}
let KEY, SECRET;
async function api(method, target, bodyObj) {
  const body = bodyObj === undefined ? '' : JSON.stringify(bodyObj);
  const ts = new Date().toISOString();
  const sign = crypto.createHmac('sha256', SECRET).update(ts + method + target + body).digest('base64');
  const res = await fetch(BASE + target, { method, headers: { 'X-API-KEY': KEY, 'X-API-TIMESTAMP': ts, 'X-API-SIGN': sign, ...(body ? { 'Content-Type': 'application/json' } : {}) }, body: body || undefined });
  return { status: res.status, json: await res.json() };
}

// Account, key and balance.
const owner = await tw.createAccount();
const ch = await post('/v1/accounts/challenge', { address: owner.address.base58 });
const signature = await tw.trx.signMessageV2(ch.message, owner.privateKey);
const boot = await post('/v1/accounts/challenge/verify', { address: owner.address.base58, nonce: ch.nonce, signature });
const bearer = { Authorization: `Bearer ${boot.bootstrap_token}` };
await post('/v1/accounts', { address: owner.address.base58 }, bearer);
const key = await post('/v1/api-keys', { scopes: ['account.read', 'deposits.read', 'orders.read', 'orders.write'], label: 'relay check' }, bearer);
KEY = key.id; SECRET = key.secret;
const deps = (await api('GET', '/v1/deposit-addresses')).json;
const trxDep = deps.data.find((d) => d.currency === 'TRX').address;
await sim('/sim/trx/transfer', { to: trxDep, amount_sun: 100_000_000 });
for (let i = 0; ; i++) {
  const b = (await api('GET', '/v1/balance')).json;
  if (b.balance_sun > 0) break;
  if (i > 60) throw new Error('deposit not credited');
  await sleep(1000);
}
const balance = async () => (await api('GET', '/v1/balance')).json;
console.log('balance', JSON.stringify(await balance()));

// A fresh wallet holding USDT and 1 TRX, no energy; a recipient holding USDT.
const wallet = await tw.createAccount(), to = await tw.createAccount();
const info = await sim('/sim/info');
const usdt = info.usdt_contract || info.usdt;
if (!process.env.FRESH) await sim('/sim/trx/transfer', { to: wallet.address.base58, amount_sun: 1_000_000 });
await sim('/sim/usdt/transfer', { to: wallet.address.base58, amount: 50_000_000 });
await sim('/sim/usdt/transfer', { to: to.address.base58, amount: 1 });
await sleep(4000);
const trx0 = await tw.trx.getBalance(wallet.address.base58);
const res0 = await tw.trx.getAccountResources(wallet.address.base58);
console.log('wallet TRX', trx0, 'energy limit', res0.EnergyLimit || 0);

async function signed(amount, pk = wallet.privateKey, opts = {}) {
  const { transaction } = await tw.transactionBuilder.triggerSmartContract(usdt, 'transfer(address,uint256)', { feeLimit: 50_000_000, ...opts },
    [{ type: 'address', value: to.address.base58 }, { type: 'uint256', value: amount }], wallet.address.base58);
  if (pk !== wallet.privateKey) return tw.utils.crypto.signTransaction(pk, transaction); // TronWeb's sign refuses a foreign key
  return tw.trx.sign(transaction, pk, false, false);
}
async function refused(name, tx) {
  const b0 = await balance();
  const r = await api('POST', '/v1/transactions', { transaction: tx });
  const b1 = await balance();
  console.log(`refused ${name}: HTTP ${r.status} ${r.json.error?.code} ${r.json.error?.slug}; balance ${b0.balance_sun}/${b0.reserved_sun} -> ${b1.balance_sun}/${b1.reserved_sun}`);
}

await refused('reverting', await signed(60_000_000));
const stranger = await tw.createAccount();
await refused('badly signed', await signed(1_000_000, stranger.privateKey));
{
  const { transaction } = await tw.transactionBuilder.triggerSmartContract(usdt, 'transfer(address,uint256)', { feeLimit: 50_000_000 },
    [{ type: 'address', value: to.address.base58 }, { type: 'uint256', value: 1_000_000 }], wallet.address.base58);
  const soon = await tw.transactionBuilder.extendExpiration(transaction, -50, { txLocal: true }); // 10 s left
  await refused('expiring', await tw.trx.sign(soon, wallet.privateKey, false, false));
}

const tx = await signed(1_000_000);
const b0 = await balance();
const head0 = (await sim('/sim/head')).num ?? (await tw.trx.getCurrentBlock()).block_header.raw_data.number;
const t0 = Date.now();
const first = await api('POST', '/v1/transactions', { transaction: tx });
console.log('POST', first.status, 'order', first.json.id, 'amount', first.json.amount, 'tier', first.json.tier, 'total_sun', first.json.total_amount_sun, JSON.stringify(first.json.transaction));
const again = await api('POST', '/v1/transactions', { transaction: tx });
console.log('repeat', again.status, again.json.id === first.json.id ? 'same order' : 'OTHER ORDER ' + again.json.id);
let o;
for (;;) {
  o = (await api('GET', '/v1/orders/' + first.json.id)).json;
  if (['confirmed', 'failed', 'expired', 'refused'].includes(o.transaction.status)) break;
  await sleep(100);
}
const landed = Date.now() - t0;
const txinfo = await tw.trx.getUnconfirmedTransactionInfo(tx.txID); // the full node: the solidified one lags
console.log('transaction', JSON.stringify(o.transaction), 'posted at head', head0, 'in', landed, 'ms');
console.log('receipt', JSON.stringify(txinfo.receipt));
console.log('wallet TRX after', await tw.trx.getBalance(wallet.address.base58), '(before', trx0 + ')');
for (let i = 0; ; i++) {
  o = (await api('GET', '/v1/orders/' + first.json.id)).json;
  if (o.status === 'reclaimed' || i > 120) break;
  await sleep(1000);
}
const res1 = await tw.trx.getAccountResources(wallet.address.base58);
const b1 = await balance();
console.log('order', o.status, 'energy limit now', res1.EnergyLimit || 0, 'charged', b0.balance_sun - b1.balance_sun, 'reserved', b1.reserved_sun, 'order total', o.total_amount_sun);
const list = (await api('GET', '/v1/orders?client_order_id=' + tx.txID)).json;
console.log('orders for the txid', list.data.length);
