// Webhook verification of rental-api-v1 (the WebhookSignature scheme of the OpenAPI
// document, docs/webhooks.md), with Node's crypto only:
//
//   X-API-SIGN = base64(HMAC-SHA256(endpoint secret, X-API-TIMESTAMP + "." + raw body))
//
// accepted when X-API-TIMESTAMP (Unix seconds) is within 300 s of the receiver's clock and
// the signatures are equal in constant time. Checked against
// schemas/vectors/webhook-signing.json by test/vectors.ts.
import { createHmac, timingSafeEqual } from 'node:crypto';
import type { components, webhooks } from './schema.js';

/** The replay window of a delivery, seconds either way (inclusive). */
export const WEBHOOK_TOLERANCE_SECONDS = 300;

/** Every event type the document describes. */
export type EventType = keyof webhooks;

/** The delivery body of one event type, as the document's `webhooks` entry types it. */
export type WebhookEventOf<T extends EventType> = NonNullable<webhooks[T]['post']>['requestBody'] extends infer B
  ? B extends { content: { 'application/json': infer E } }
    ? E
    : never
  : never;

/** Any delivery: a union discriminated by `event`. */
export type WebhookEvent = { [T in EventType]: WebhookEventOf<T> }[EventType];

/** The envelope fields common to every event. */
export type EventEnvelope = Pick<components['schemas']['EventOrderConfirmed'], 'event_id' | 'event_version' | 'created_at' | 'account_id' | 'network' | 'test'>;

function hmac(secret: string, message: string | Buffer): Buffer {
  return createHmac('sha256', Buffer.from(secret, 'utf8')).update(message).digest();
}

/**
 * Whether a delivery is authentic: `signature` (X-API-SIGN) is the HMAC of
 * `timestamp` (X-API-TIMESTAMP, as received) + "." + `rawBody` (the bytes as received)
 * under `secret`, and the timestamp is within the tolerance of `nowSeconds`.
 */
export function verifyWebhookSignature(
  secret: string,
  timestamp: string,
  rawBody: string | Buffer,
  signature: string,
  nowSeconds: number = Math.floor(Date.now() / 1000),
): boolean {
  if (!/^[0-9]+$/.test(timestamp)) return false;
  if (Math.abs(nowSeconds - Number(timestamp)) > WEBHOOK_TOLERANCE_SECONDS) return false;
  const got = Buffer.from(signature, 'base64');
  if (got.length !== 32 || got.toString('base64') !== signature) return false;
  const body = typeof rawBody === 'string' ? Buffer.from(rawBody, 'utf8') : rawBody;
  return timingSafeEqual(got, hmac(secret, Buffer.concat([Buffer.from(timestamp + '.', 'utf8'), body])));
}

/** Headers of a delivery, in any case (Node lower-cases them). */
export type DeliveryHeaders = Record<string, string | string[] | undefined> | Headers;

function header(h: DeliveryHeaders, name: string): string {
  const v = h instanceof Headers ? h.get(name) : (h[name.toLowerCase()] ?? h[name]);
  return Array.isArray(v) ? (v[0] ?? '') : (v ?? '');
}

export class WebhookVerificationError extends Error {}

/**
 * Verifies a delivery against each secret in turn (during a rotation: the new one, then
 * the old one) and returns its event, typed by `event`. Throws WebhookVerificationError
 * when no secret verifies it or the body's event type differs from X-Event-Type.
 * Deduplicate on `event_id`; a delivery with `test: true` must not trigger a money action;
 * ignore event types you do not know.
 */
export function verifyWebhook(
  secrets: string | string[],
  headers: DeliveryHeaders,
  rawBody: string | Buffer,
  nowSeconds?: number,
): WebhookEvent {
  const timestamp = header(headers, 'X-API-TIMESTAMP');
  const signature = header(headers, 'X-API-SIGN');
  const ok = (Array.isArray(secrets) ? secrets : [secrets]).some((s) => verifyWebhookSignature(s, timestamp, rawBody, signature, nowSeconds));
  if (!ok) throw new WebhookVerificationError('webhook signature or timestamp does not verify');
  const event = JSON.parse(typeof rawBody === 'string' ? rawBody : rawBody.toString('utf8')) as WebhookEvent;
  if (event.event !== header(headers, 'X-Event-Type') || event.event_id !== header(headers, 'X-Event-Id')) {
    throw new WebhookVerificationError('X-Event-Type or X-Event-Id does not match the body');
  }
  return event;
}
