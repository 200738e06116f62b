package main

import (
	"errors"
	"fmt"
	"os"
	"os/user"
	"strconv"
	"strings"

	"rental/infra/ledgerstore"
)

// The operator is who runs the tool, taken from the environment it runs in, never from a
// flag the caller types (docs/operations.md "Who acts"): ADMIN_OPERATOR, which the
// deployment sets to the authenticated identity of the person the session was opened for
// (the per-operator Job or exec wrapper; in Kubernetes the user the API server
// authenticated, never a shared service account), else the login of the OS user running
// the tool (an operator's own workstation account). A shared or root identity is refused.
const (
	envOperator = "ADMIN_OPERATOR"
	// envApprovalAbove is the largest adjustment (SUN) one operator applies alone; above
	// it a second operator approves (default DefaultApprovalAboveSun).
	envApprovalAbove = "ADMIN_APPROVAL_ABOVE_SUN"
)

// DefaultApprovalAboveSun is 1,000 TRX.
const DefaultApprovalAboveSun = 1_000_000_000

// sharedIdentities are OS users that name no person.
var sharedIdentities = map[string]bool{"root": true, "nobody": true, "app": true, "rental": true}

// operator returns the acting operator as an audit actor ("support:<name>").
func operator() (string, error) {
	name := strings.TrimSpace(os.Getenv(envOperator))
	if name == "" {
		if u, err := user.Current(); err == nil {
			name = u.Username
		}
		if sharedIdentities[name] {
			return "", fmt.Errorf("the OS user %q names no operator: set %s to your identity (docs/operations.md)", name, envOperator)
		}
	}
	if name == "" {
		return "", errors.New("no operator identity: set " + envOperator + " (docs/operations.md)")
	}
	return ledgerstore.Actor(name)
}

// approvalAbove is the threshold of two-person approval in SUN.
func approvalAbove() (int64, error) {
	v := os.Getenv(envApprovalAbove)
	if v == "" {
		return DefaultApprovalAboveSun, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("%s=%q: a non-negative amount of SUN", envApprovalAbove, v)
	}
	return n, nil
}
