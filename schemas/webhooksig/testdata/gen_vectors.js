// Generates vectors.json: webhook signatures computed with Node's crypto, independently of
// the Go code they check (schemas/webhooksig). Run: node gen_vectors.js > vectors.json
'use strict';
const crypto = require('crypto');

const cases = [
  { name: 'order.confirmed', secret: 'whsec_test_4mYq0c2Yx8pB3vJ1nW6sR9tK5hL7dF2aZ0eG3uI8oPq',
    timestamp: '1767225600',
    body: '{"event":"order.confirmed","event_id":"evt_0123456789abcdef01234567","event_version":1,"created_at":"2026-01-01T00:00:00.000Z","account_id":"acc_1","network":"mainnet","test":false,"data":{"order_id":"ord_1","tier":"1h"}}' },
  { name: 'empty body', secret: 'whsec_live_x', timestamp: '0', body: '' },
  { name: 'unicode body', secret: 'whsec_test_ünïcode-secret', timestamp: '1767225600',
    body: '{"label":"Zahlung für März ✓","emoji":"🚀"}' },
  { name: 'body with newline and spaces', secret: 'whsec_test_abc', timestamp: '1999999999',
    body: '{\n  "event": "balance.credited",\n  "test": true\n}\n' },
];

const out = cases.map(c => ({
  name: c.name,
  secret: c.secret,
  timestamp: c.timestamp,
  body: c.body,
  signature: crypto.createHmac('sha256', Buffer.from(c.secret, 'utf8'))
    .update(Buffer.from(c.timestamp + '.' + c.body, 'utf8'))
    .digest('base64'),
}));
process.stdout.write(JSON.stringify(out, null, 2) + '\n');
