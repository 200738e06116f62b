package tron

import (
	"context"
	"fmt"
)

// GetAccountPermissions reads an account's permissions (getaccount's owner_permission,
// witness_permission and active_permission); a never-activated address has none (Exists
// is false).
func (c *Client) GetAccountPermissions(ctx context.Context, addr Address) (*AccountPermissions, error) {
	var a AccountPermissions
	if err := c.call(ctx, "getaccount", AddressRequest{Address: addr.String(), Visible: true}, &a); err != nil {
		return nil, err
	}
	return &a, nil
}

// GetTransactionFromPending returns a transaction the node holds for a coming block
// (gettransactionfrompending); ErrNotFound when it holds none with that id (unknown, or in a
// block already: GetTransactionInfoByID).
func (c *Client) GetTransactionFromPending(ctx context.Context, txid string) (*Transaction, error) {
	var tx Transaction
	if err := c.call(ctx, "gettransactionfrompending", ValueRequest{Value: txid, Visible: true}, &tx); err != nil {
		return nil, err
	}
	if tx.TxID == "" {
		return nil, fmt.Errorf("tron: gettransactionfrompending %s: %w", txid, ErrNotFound)
	}
	return &tx, nil
}
