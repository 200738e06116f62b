package tronsim

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"

	"rental/infra/tron"
)

// getSignWeight is /wallet/getsignweight (GetTransactionSignWeightServlet over
// Wallet.getTransactionSignWeight): the posted transaction is re-packed from its JSON
// (Util.packTransaction, raw_data_hex ignored), so the answer carries the transaction with
// the id of what was posted. Wallets use it to re-id a transaction they changed locally:
// TronWeb's transactionBuilder.addUpdateData (a memo in raw_data.data) and
// extendExpiration read transaction.transaction from it.
//
// The simulator models one permission per account, the owner's (threshold 1, the owner's
// key at weight 1), as java-tron creates it for every account: result.code is
// ENOUGH_PERMISSION once the owner signed, NOT_ENOUGH_PERMISSION before, and
// PERMISSION_ERROR "Account does not exist!" for an owner without an account.
func (s *Sim) getSignWeight(r *walletReq) (any, error) {
	var t tron.Transaction
	if err := r.decode(&t); err != nil {
		return nil, err
	}
	rec, err := newRecord(&t)
	if err != nil {
		return nil, &nodeErr{"org.tron.core.exception.BadItemException", err.Error()}
	}
	out, err := tron.NewTransaction(rec.Data, r.visible)
	if err != nil {
		return nil, &nodeErr{"org.tron.core.exception.BadItemException", err.Error()}
	}
	out.Signature = rec.Sigs
	owner := rec.Data.Contract.Owner()
	ext := signWeightTx{Transaction: out, TxID: rec.ID, Result: signWeightReturn{Result: true}}
	s.mu.RLock()
	_, exists := s.viewLocked().Accounts[owner]
	s.mu.RUnlock()
	if !exists {
		return signWeightReply{Result: signWeightResult{Code: "PERMISSION_ERROR", Message: "Account does not exist!"}, Transaction: ext}, nil
	}
	ownerText := hex.EncodeToString(owner[:])
	if r.visible {
		ownerText = owner.String()
	}
	reply := signWeightReply{
		Permission:  &signWeightPermission{PermissionName: "owner", Threshold: 1, Keys: []signWeightKey{{Address: ownerText, Weight: 1}}},
		Result:      signWeightResult{Code: "NOT_ENOUGH_PERMISSION"},
		Transaction: ext,
	}
	// TransactionCapsule.checkWeight: each signature must recover a key of the permission.
	h := sha256.Sum256(rec.Raw)
	for _, sh := range rec.Sigs {
		sig, err := hex.DecodeString(sh)
		if err != nil {
			return signWeightReply{Result: signWeightResult{Code: "SIGNATURE_FORMAT_ERROR", Message: "Signature size is " + strconv.Itoa(len(sig))}, Transaction: ext}, nil
		}
		a, err := tron.RecoverHash(h[:], sig)
		if err != nil || a != owner {
			return signWeightReply{Result: signWeightResult{Code: "PERMISSION_ERROR", Message: "Signature is not in the permission's keys"}, Transaction: ext}, nil
		}
		reply.ApprovedList, reply.CurrentWeight = append(reply.ApprovedList, ownerText), 1
	}
	if reply.CurrentWeight >= 1 {
		reply.Result.Code = "ENOUGH_PERMISSION"
	}
	return reply, nil
}

// signWeightReply is Util.printTransactionSignWeight: TransactionSignWeight with its
// transaction extension's transaction printed as printTransactionToJSON.
type signWeightReply struct {
	Permission    *signWeightPermission `json:"permission,omitempty"`
	ApprovedList  []string              `json:"approved_list,omitempty"`
	CurrentWeight int64                 `json:"current_weight,omitempty"`
	Result        signWeightResult      `json:"result"`
	Transaction   signWeightTx          `json:"transaction"`
}

type signWeightPermission struct {
	PermissionName string          `json:"permission_name"`
	Threshold      int64           `json:"threshold"`
	Keys           []signWeightKey `json:"keys"`
}

type signWeightKey struct {
	Address string `json:"address"`
	Weight  int64  `json:"weight"`
}

type signWeightResult struct {
	Code    string `json:"code"`
	Message string `json:"message,omitempty"`
}

type signWeightReturn struct {
	Result bool `json:"result"`
}

type signWeightTx struct {
	Result      signWeightReturn  `json:"result"`
	TxID        string            `json:"txid"`
	Transaction *tron.Transaction `json:"transaction"`
}
