// The TypeScript client of the resource rental API (rental-api-v1): `paths`, `components`,
// `operations` and `webhooks` are generated from schemas/openapi/openapi.yaml by
// openapi-typescript (src/schema.d.ts, `npm run generate`); calls go through openapi-fetch
// with a middleware that signs each request with an API key; webhook deliveries are
// verified with verifyWebhook.
import createClient, { type Client, type ClientOptions } from 'openapi-fetch';
import type { paths } from './schema.js';
import { signingMiddleware, type Credentials } from './signing.js';

export type { paths, components, operations, webhooks } from './schema.js';
export * from './signing.js';
export * from './webhooks.js';

export interface RentalClientOptions extends ClientOptions {
  /** The API host, e.g. https://api.example.com (no /v1: paths carry it). */
  baseUrl: string;
  /** The API key; without it only public operations work. */
  apiKey?: Credentials;
}

/** A typed client of every operation of the document; requests are signed when an API key is given. */
export function createRentalClient(options: RentalClientOptions): Client<paths> {
  const { apiKey, ...rest } = options;
  const client = createClient<paths>(rest);
  if (apiKey) client.use(signingMiddleware(apiKey));
  return client;
}

export type RentalClient = Client<paths>;
