package tron

import "context"

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
