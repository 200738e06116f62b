#!/usr/bin/env node
// Golden vectors for deposit address derivation: the addresses at m/44'/195'/0'/0/<i> of the
// dev seed (deposits.DevSeedHex), derived by the HD wallet bundled with TronWeb (ethers'
// HDNodeWallet), so the Go derivation is checked against an independent implementation.
//
// Regenerate (offline; uses the tronweb pinned in infra/tron/testdata/package-lock.json):
//
//   node gen_deposit_vectors.js > deposit_vectors.json
//   cd .. && go test .
'use strict';

const path = require('path');
const fs = require('fs');
const { utils } = require(path.join(__dirname, '../../tron/testdata/node_modules/tronweb'));

const pkg = JSON.parse(fs.readFileSync(path.join(__dirname, '../../tron/testdata/node_modules/tronweb/package.json'), 'utf8'));

// Must equal deposits.DevSeedHex: hex of "rental-dev-only-hd-seed-not-for-mainnet".
const seedHex = Buffer.from('rental-dev-only-hd-seed-not-for-mainnet', 'utf8').toString('hex');

const root = utils.ethersUtils.ethersHDNodeWallet.fromSeed('0x' + seedHex);
const chain = root.derivePath("m/44'/195'/0'/0");
const vectors = [0, 1, 2, 7, 1000].map((i) => {
  const node = root.derivePath(`m/44'/195'/0'/0/${i}`);
  const pk = node.privateKey.slice(2);
  const address = utils.crypto.getBase58CheckAddress(utils.crypto.getAddressFromPriKey(utils.code.hexStr2byteArray(pk)));
  return { index: i, path: `m/44'/195'/0'/0/${i}`, address };
});

process.stdout.write(JSON.stringify({
  generator: 'gen_deposit_vectors.js',
  tronweb_version: pkg.version,
  seed_hex: seedHex,
  chain_public_key: chain.publicKey,
  vectors,
}, null, 2) + '\n');
