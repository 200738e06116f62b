// Request signing of rental-api-v1 (the ApiSignature scheme of the OpenAPI document,
// docs/auth.md), with Node's crypto only:
//
//   canonical  = X-API-TIMESTAMP + METHOD + path + query + body   (no separators)
//   X-API-SIGN = base64(HMAC-SHA256(secret, canonical))
//
// The timestamp is ISO 8601 UTC with milliseconds; the path and query are those of the URL
// as sent (percent-encoded, query unchanged); the body is the raw bytes sent. Checked
// against schemas/vectors/request-signing.json by test/vectors.ts.
import { createHmac } from 'node:crypto';
import type { Middleware } from 'openapi-fetch';

export interface Credentials {
  /** The key id (`ak_live_...` or `ak_test_...`), sent in X-API-KEY. */
  keyId: string;
  /** The secret returned once at creation (`sk_live_...` or `sk_test_...`), prefix included. */
  secret: string;
}

/** The canonical string of a request: timestamp + METHOD + path + ("?" + query) + body. */
export function canonicalString(timestamp: string, method: string, pathAndQuery: string, body: string | Uint8Array): string {
  const text = typeof body === 'string' ? body : Buffer.from(body).toString('utf8');
  return timestamp + method.toUpperCase() + pathAndQuery + text;
}

/** base64 HMAC-SHA256 of the canonical string's UTF-8 bytes, keyed with the whole secret. */
export function sign(secret: string, canonical: string): string {
  return createHmac('sha256', Buffer.from(secret, 'utf8')).update(Buffer.from(canonical, 'utf8')).digest('base64');
}

/** The current time as the API wants it: ISO 8601, UTC, milliseconds, Z. */
export function timestampNow(now: Date = new Date()): string {
  return now.toISOString();
}

/** The three signature headers of one request. */
export function signatureHeaders(
  creds: Credentials,
  method: string,
  url: URL,
  body: string | Uint8Array,
  now: Date = new Date(),
): Record<'X-API-KEY' | 'X-API-TIMESTAMP' | 'X-API-SIGN', string> {
  const timestamp = timestampNow(now);
  const signature = sign(creds.secret, canonicalString(timestamp, method, url.pathname + url.search, body));
  return { 'X-API-KEY': creds.keyId, 'X-API-TIMESTAMP': timestamp, 'X-API-SIGN': signature };
}

/**
 * An openapi-fetch middleware that signs every request with the key. Each attempt gets a
 * fresh timestamp and signature (a signature is accepted once, 1009), so a retry through
 * the client is signed anew.
 */
export function signingMiddleware(creds: Credentials): Middleware {
  return {
    async onRequest({ request }) {
      const body = request.body === null ? '' : new Uint8Array(await request.clone().arrayBuffer());
      const headers = signatureHeaders(creds, request.method, new URL(request.url), body);
      for (const [name, value] of Object.entries(headers)) {
        request.headers.set(name, value);
      }
      return request;
    },
  };
}
