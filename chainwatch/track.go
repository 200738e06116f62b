package chainwatch

import (
	"context"

	"rental/infra/chainstore"
)

// Track registers transaction ids whose on-chain result chainwatch reports; see
// chainstore.Track.
//
// Deprecated: call chainstore.Track. This forwarder remains only until
// processors/orderflow is switched over; delete this file then.
func Track(ctx context.Context, db chainstore.Execer, txIDs ...string) error {
	return chainstore.Track(ctx, db, txIDs...)
}
