package tronsim

import (
	"strings"

	"rental/infra/tron"
)

// getTransactionFromPending is /wallet/gettransactionfrompending
// (GetTransactionFromPendingServlet over Manager.getTxFromPending): a transaction the node
// holds for a coming block, printed as gettransactionbyid prints one; {} for any other id
// (unknown, or already in a block).
func (s *Sim) getTransactionFromPending(r *walletReq) (any, error) {
	var q tron.ValueRequest
	if err := r.decode(&q); err != nil {
		return nil, err
	}
	id := strings.ToLower(q.Value)
	s.mu.RLock()
	defer s.mu.RUnlock()
	for _, list := range [][]*txRecord{s.pending, s.heldRecs()} {
		for _, t := range list {
			if t.ID == id {
				return txJSON(t, r.visible), nil
			}
		}
	}
	return emptyObject, nil
}
