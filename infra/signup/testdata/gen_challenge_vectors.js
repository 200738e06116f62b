#!/usr/bin/env node
// Golden vectors for the signup challenge: challenge messages rendered with the template of
// infra/signup/message.go (documented in docs/signup.md) and signed by TronWeb's own
// signMessageV2, the function wallets use. The Go tests check that the service renders the
// identical text for the same nonce and clock, and that it accepts these signatures through
// HTTP while refusing any altered byte.
//
// Regenerate (offline; uses the tronweb pinned in infra/tron/testdata/package-lock.json):
//
//   (cd ../../tron/testdata && npm ci)      # only if node_modules is missing
//   node gen_challenge_vectors.js > challenge_vectors.json
//   cd .. && go test .                      # the Go side must still agree
//
// Deterministic: fixed keys, nonces and times, and RFC 6979 signatures. The keys are test
// keys with no funds on any network; never put a real key here.
'use strict';

const crypto = require('crypto');
const path = require('path');
const fs = require('fs');
const { Trx, utils } = require(path.join(__dirname, '../../tron/testdata/node_modules/tronweb'));

const pkg = JSON.parse(fs.readFileSync(path.join(__dirname, '../../tron/testdata/node_modules/tronweb/package.json'), 'utf8'));

const brand = 'tronrent';
const host = 'api.rental.test';
const network = 'nile';
const issuedAt = '2025-06-01T12:00:00.000Z';
const expiresAt = '2025-06-01T12:10:00.000Z'; // ten minutes, the spec's challenge lifetime

const actions = {
  signup: 'create an account',
  login: 'sign in to the dashboard',
  recovery: 'recover your account',
};

// The template, byte for byte as in message.go.
function message(address, purpose, nonce) {
  return [
    `${brand} (${host}) asks you to sign this message to ${actions[purpose]} with your TRON address:`,
    address,
    '',
    `Purpose: ${purpose}`,
    `Network: ${network}`,
    `Host: ${host}`,
    `Nonce: ${nonce}`,
    `Issued At: ${issuedAt}`,
    `Expiration Time: ${expiresAt}`,
    '',
    'Signing proves that you control this address. It is not a transaction: it moves no funds and costs no fee.',
  ].join('\n');
}

const addressOf = (pk) =>
  utils.crypto.getBase58CheckAddress(utils.crypto.getAddressFromPriKey(utils.code.hexStr2byteArray(pk)));

const keys = [0, 1, 2].map((i) => crypto.createHash('sha256').update('rental-signup-vector-key-' + i).digest('hex'));
const purposes = ['signup', 'login', 'recovery'];

const vectors = [];
keys.forEach((pk, i) => {
  const purpose = purposes[i % purposes.length];
  const nonce = crypto.createHash('sha256').update('rental-signup-vector-nonce-' + i).digest('hex').slice(0, 32);
  const address = addressOf(pk);
  const msg = message(address, purpose, nonce);
  const signature = Trx.signMessageV2(msg, pk);
  if (utils.message.verifyMessage(msg, signature) !== address) {
    throw new Error('TronWeb cannot verify its own signature');
  }
  // The same wallet signing a text that differs in one byte (the nonce's last character):
  // a valid signature, but not over the challenge, so the service must refuse it.
  const altered = msg.replace('Nonce: ' + nonce, 'Nonce: ' + nonce.slice(0, -1) + (nonce.endsWith('0') ? '1' : '0'));
  vectors.push({
    private_key: pk,
    address,
    purpose,
    nonce,
    message: msg,
    signature,
    altered_message_signature: Trx.signMessageV2(altered, pk),
  });
});

process.stdout.write(JSON.stringify({
  generator: 'gen_challenge_vectors.js',
  tronweb_version: pkg.version,
  brand,
  host,
  network,
  issued_at: issuedAt,
  expires_at: expiresAt,
  vectors,
}, null, 2) + '\n');
