// TronWeb's multi-signature flow, unchanged, against the simulator (docs/custody.md):
// updateAccountPermissions signed by the owner grants a delegate-only permission (id 2);
// a delegation built with { permissionId: 2 } and one built without it (trx.multiSign then
// asks /wallet/getsignweight and checks the transaction it returns) are signed by the
// signer with trx.multiSign and land; multiSign refuses the owner's key for permission 2,
// and a delegation the owner signs under permission 2 is refused at broadcast (SIGERROR).
//
// Run by hand (it needs Node and the tronweb package of infra/tron/testdata):
//   (cd infra/tron/testdata && npm ci)
//   SIM_ADDR=127.0.0.1:18511 SIM_BLOCK_INTERVAL=1s go run ./infra/cmd/tronsim &
//   NODE_PATH=infra/tron/testdata/node_modules node infra/tronsim/testdata/tronweb_multisign.js
const { TronWeb } = require('tronweb');
const url = process.env.SIM_URL || 'http://127.0.0.1:18511';
const sim = async (path, body) => (await fetch(url + path, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) })).json();
(async () => {
  const tw = new TronWeb({ fullHost: url });
  const pool = await tw.createAccount();
  const signer = await tw.createAccount();
  const recv = await tw.createAccount();
  await sim('/sim/accounts', { address: pool.address.base58, balance_sun: 1000e6, stake_energy_sun: 100000e6, stake_bandwidth_sun: 100000e6 });
  await sim('/sim/accounts', { address: recv.address.base58, balance_sun: 1e6 });
  const ops = '0000000000000006000000000000000000000000000000000000000000000000';
  const up = await tw.transactionBuilder.updateAccountPermissions(pool.address.hex,
    { type: 0, permission_name: 'owner', threshold: 1, keys: [{ address: pool.address.hex, weight: 1 }] }, null,
    [{ type: 2, permission_name: 'delegate', threshold: 1, operations: ops, keys: [{ address: signer.address.hex, weight: 1 }] }]);
  const must = (ok, what) => { if (!ok) throw new Error(what); console.log('ok:', what); };
  const upSigned = await tw.trx.sign(up, pool.privateKey);
  must((await tw.trx.sendRawTransaction(upSigned)).result, 'permission update accepted');
  await sim('/sim/blocks', { count: 1 });
  const acc = await tw.trx.getAccount(pool.address.base58);
  must(acc.active_permission.length === 1 && acc.active_permission[0].id === 2 && acc.active_permission[0].operations === ops, 'getaccount shows permission 2 with the operations');
  const tx = await tw.transactionBuilder.delegateResource(100e6, recv.address.hex, 'ENERGY', pool.address.hex, false, 0, { permissionId: 2 });
  const signed = await tw.trx.multiSign(tx, signer.privateKey, 2);
  must((await tw.trx.sendRawTransaction(signed)).result && signed.raw_data.contract[0].Permission_id === 2, 'delegation built with permissionId 2, multiSigned by the signer, accepted');
  const tx2 = await tw.transactionBuilder.delegateResource(200e6, recv.address.hex, 'ENERGY', pool.address.hex, false, 0);
  const signed2 = await tw.trx.multiSign(tx2, signer.privateKey, 2);
  must((await tw.trx.sendRawTransaction(signed2)).result && signed2.raw_data.contract[0].Permission_id === 2, 'delegation multiSigned through getsignweight accepted');
  let refused = false;
  try { await tw.trx.multiSign(await tw.transactionBuilder.delegateResource(300e6, recv.address.hex, 'ENERGY', pool.address.hex, false, 0), pool.privateKey, 2); }
  catch (e) { refused = String(e).includes('has no permission to sign'); }
  must(refused, "multiSign refuses the owner's key for permission 2");
  const t3 = await tw.transactionBuilder.delegateResource(400e6, recv.address.hex, 'ENERGY', pool.address.hex, false, 0, { permissionId: 2 });
  const r3 = await tw.trx.sendRawTransaction(await tw.trx.multiSign(t3, pool.privateKey, 2));
  must(!r3.result && r3.code === 'SIGERROR', 'a delegation the owner signs under permission 2 is refused (SIGERROR)');
})().catch(e => { console.error('FAILED', e); process.exit(1); });
