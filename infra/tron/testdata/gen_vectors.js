#!/usr/bin/env node
// Golden vectors for the Go TRON primitives (infra/tron), produced by TronWeb itself.
//
// Regenerate (offline once node_modules exists; no node is contacted):
//
//   cd infra/tron/testdata
//   npm ci                      # installs the exact tronweb pinned in package-lock.json
//   node gen_vectors.js > vectors.json
//   cd ../ && go test .         # the Go side must still agree
//
// Everything is deterministic: fixed keys, fixed block references and times, and RFC 6979
// signatures, so a rerun with the same tronweb version gives the same file. The private
// keys below are test keys with no funds on any network; never put a real key here.
'use strict';

const crypto = require('crypto');
const { TronWeb, Trx, utils } = require('tronweb');

const pkg = JSON.parse(require('fs').readFileSync(require('path').join(__dirname, 'node_modules/tronweb/package.json'), 'utf8'));

// Keys: the smallest and largest valid scalars, and a few pseudo-random ones.
const keys = [
  '0000000000000000000000000000000000000000000000000000000000000001',
  'fffffffffffffffffffffffffffffffebaaedce6af48a03bbfd25e8cd0364140',
];
for (let i = 0; i < 4; i++) {
  keys.push(crypto.createHash('sha256').update('rental-tron-vector-key-' + i).digest('hex'));
}

const addressOf = (pk) => {
  const bytes = utils.crypto.getAddressFromPriKey(utils.code.hexStr2byteArray(pk));
  return {
    base58: utils.crypto.getBase58CheckAddress(bytes),
    hex: utils.bytes.byteArray2hexStr(bytes).toLowerCase(),
  };
};

const addresses = keys.map((pk) => ({ private_key: pk, ...addressOf(pk) }));

// signMessageV2 over UTF-8 strings, including empty and multi-byte text, whose length
// prefix counts bytes, not characters.
const messages = [
  '',
  'hello tron',
  'Rental login nonce 6f1c2a9e at 2025-01-01T00:00:00Z',
  'Überweisung – 租赁能量 ✓ 🚀',
  'a'.repeat(300),
  'line one\nline two\r\n\ttabbed',
];
const messageVectors = [];
messages.forEach((msg, i) => {
  const pk = keys[(i + 2) % keys.length];
  const signature = Trx.signMessageV2(msg, pk);
  const recovered = utils.message.verifyMessage(msg, signature);
  if (recovered !== addressOf(pk).base58) throw new Error('TronWeb cannot verify its own message signature');
  messageVectors.push({
    private_key: pk,
    address: addressOf(pk).base58,
    message: msg,
    message_hex: Buffer.from(msg, 'utf8').toString('hex'),
    signature,
  });
});

// Transactions: raw_data JSON as a node would return it; TronWeb encodes, hashes and signs.
const A = addresses.map((a) => a.base58);
const H = addresses.map((a) => a.hex);
const USDT = 'TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6t';
const usdtHex = TronWeb.address.toHex(USDT).toLowerCase();
const common = {
  ref_block_bytes: '7ac7',
  ref_block_hash: '4d9bb894f8ea0b5a',
  expiration: 1735689660000,
  timestamp: 1735689600000,
};
const contract = (type, value, extra = {}) => ({
  parameter: { value, type_url: 'type.googleapis.com/protocol.' + type },
  type,
  ...extra,
});
// transfer(address,uint256) to A[3] of 1,000,000 (1 USDT), ABI-encoded by TronWeb.
const transferArgs = utils.abi
  .encodeParams(['address', 'uint256'], [H[3], 1000000])
  .replace(/^0x/, '');
const transferData = utils.ethersUtils.keccak256(utils.ethersUtils.toUtf8Bytes('transfer(address,uint256)')).slice(2, 10) + transferArgs;

const txCases = [
  {
    name: 'transfer_visible',
    key: 2,
    visible: true,
    raw: { contract: [contract('TransferContract', { amount: 1500000, owner_address: A[2], to_address: A[3] })], ...common },
  },
  {
    name: 'transfer_hex',
    key: 3,
    visible: false,
    raw: { contract: [contract('TransferContract', { amount: 99000000000, owner_address: H[3], to_address: H[4] })], ...common },
  },
  {
    name: 'transfer_memo',
    key: 4,
    visible: true,
    raw: {
      contract: [contract('TransferContract', { amount: 1, owner_address: A[4], to_address: A[5] })],
      ...common,
      data: Buffer.from('order 42', 'utf8').toString('hex'),
    },
  },
  {
    name: 'delegate_energy_locked',
    key: 2,
    visible: true,
    raw: {
      contract: [contract('DelegateResourceContract', {
        balance: 2500000000, resource: 'ENERGY', receiver_address: A[5], owner_address: A[2], lock: true, lock_period: 86400,
      })],
      ...common,
    },
  },
  {
    name: 'delegate_bandwidth_unlocked_hex',
    key: 3,
    visible: false,
    raw: {
      contract: [contract('DelegateResourceContract', {
        balance: 1000000, resource: 'BANDWIDTH', receiver_address: H[2], owner_address: H[3],
      })],
      ...common,
    },
  },
  {
    name: 'undelegate_energy',
    key: 2,
    visible: true,
    raw: {
      contract: [contract('UnDelegateResourceContract', {
        balance: 2500000000, resource: 'ENERGY', receiver_address: A[5], owner_address: A[2],
      })],
      ...common,
    },
  },
  {
    name: 'account_create',
    key: 4,
    visible: true,
    raw: { contract: [contract('AccountCreateContract', { owner_address: A[4], account_address: A[1] })], ...common },
  },
  {
    name: 'trigger_usdt_transfer',
    key: 5,
    visible: true,
    raw: {
      contract: [contract('TriggerSmartContract', { data: transferData, owner_address: A[5], contract_address: USDT })],
      ...common,
      fee_limit: 30000000,
    },
  },
  {
    name: 'trigger_usdt_transfer_hex_call_value',
    key: 5,
    visible: false,
    raw: {
      contract: [contract('TriggerSmartContract', {
        data: transferData, owner_address: H[5], contract_address: usdtHex, call_value: 7,
      })],
      ...common,
      fee_limit: 100000000,
    },
  },
];

const transactions = txCases.map((c) => {
  const tx = { visible: c.visible, raw_data: c.raw };
  const pb = utils.transaction.txJsonToPb(tx);
  tx.raw_data_hex = utils.transaction.txPbToRawDataHex(pb).toLowerCase();
  tx.txID = utils.transaction.txPbToTxID(pb).replace(/^0x/, '').toLowerCase();
  const signed = utils.crypto.signTransaction(keys[c.key], { ...tx });
  if (!utils.transaction.txCheck(signed)) throw new Error(c.name + ': TronWeb txCheck failed');
  const signer = utils.crypto.ecRecover(signed.txID, signed.signature[0]);
  if (signer.toLowerCase() !== H[c.key]) throw new Error(c.name + ': TronWeb cannot recover its own signature');
  return {
    name: c.name,
    private_key: keys[c.key],
    owner: A[c.key],
    transaction: {
      visible: signed.visible,
      txID: signed.txID,
      raw_data: signed.raw_data,
      raw_data_hex: signed.raw_data_hex,
      signature: signed.signature,
    },
  };
});

const abi = [
  { function: 'transfer(address,uint256)', to: A[3], amount: '1000000', data: transferData },
  {
    function: 'balanceOf(address)',
    owner: A[2],
    data:
      utils.ethersUtils.keccak256(utils.ethersUtils.toUtf8Bytes('balanceOf(address)')).slice(2, 10) +
      utils.abi.encodeParams(['address'], [H[2]]).replace(/^0x/, ''),
  },
];

process.stdout.write(
  JSON.stringify({ generator: 'tronweb ' + pkg.version, addresses, messages: messageVectors, transactions, abi }, null, 2) + '\n',
);
