// Package vectors publishes test vectors for the two signatures of rental-api-v1, so an
// integrator in any language can test a signer or verifier: request-signing.json (API
// requests, X-API-SIGN over the canonical string) and webhook-signing.json (deliveries,
// X-API-SIGN over timestamp + "." + raw body, and verification within the 300 s window).
// infra/reqsign and schemas/webhooksig are tested against them in Go, and check.mjs checks
// them with Node's crypto alone. The package has no code.
package vectors
