package tronsim

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strings"
	"testing"

	"rental/infra/tron"
)

// Tests of the multi-signature rules. Each names the java-tron source it mirrors.

// delegateOps allows DelegateResourceContract (57) and UnDelegateResourceContract (58).
var delegateOps = hex.EncodeToString(tron.Operations(tron.DelegateResourceContractType, tron.UnDelegateResourceContractType))

type permReq map[string]any

func perm(typ string, threshold int64, ops string, keys ...any) permReq {
	p := permReq{"type": typ, "permission_name": strings.ToLower(typ), "threshold": threshold}
	if ops != "" {
		p["operations"] = ops
	}
	var ks []map[string]any
	for i := 0; i < len(keys); i += 2 {
		ks = append(ks, map[string]any{"address": keys[i], "weight": keys[i+1]})
	}
	p["keys"] = ks
	return p
}

// grant has owner give signer a delegate-only active permission (id 3, after the default
// active 2) and returns after the update landed.
func grant(t *testing.T, h *harness, owner tron.PrivateKey, signers ...any) {
	t.Helper()
	o := owner.Address().String()
	tx := h.signed("/wallet/accountpermissionupdate", map[string]any{"owner_address": o, "visible": true,
		"owner":   perm("Owner", 1, "", o, 1),
		"actives": []permReq{perm("Active", 1, hex.EncodeToString(activeDefaultOperations), o, 1), perm("Active", 2, delegateOps, signers...)}}, owner)
	if r := h.broadcast(tx); !r.Result {
		t.Fatalf("permission update: %+v", r)
	}
	h.mine(1)
}

// signWith appends key's signature over the transaction id, whoever the owner is.
func signWith(t *testing.T, tx *tron.Transaction, keys ...tron.PrivateKey) {
	t.Helper()
	raw, err := hex.DecodeString(tx.RawDataHex)
	if err != nil {
		t.Fatal(err)
	}
	h := sha256.Sum256(raw)
	for _, k := range keys {
		sig, err := k.SignHash(h[:])
		if err != nil {
			t.Fatal(err)
		}
		tx.Signature = append(tx.Signature, hex.EncodeToString(sig))
	}
}

func (h *harness) build(path string, req any) *tron.Transaction {
	h.t.Helper()
	var tx tron.Transaction
	h.wallet(path, req, &tx)
	return &tx
}

func (h *harness) getAccount(a tron.Address) tron.Account {
	h.t.Helper()
	var acc tron.Account
	h.wallet("/wallet/getaccount", tron.AddressRequest{Address: a.String(), Visible: true}, &acc)
	return acc
}

// AccountCapsule.createDefaultOwnerPermission / createDefaultActivePermission: an account
// that never changed its permissions shows owner (id 0) and active (id 2) with its own
// key, and the active operations in hex (DynamicPropertiesStore.getActiveDefaultOperations).
func TestGetAccountShowsDefaultPermissions(t *testing.T) {
	h := newHarness(t, Options{})
	k := newKey(t)
	h.seed(GenesisAccount{Address: k.Address(), BalanceSun: 10 * trx})
	var raw map[string]json.RawMessage
	h.wallet("/wallet/getaccount", tron.AddressRequest{Address: k.Address().String(), Visible: true}, &raw)
	wantJSON := `{"permission_name":"owner","threshold":1,"keys":[{"address":"` + k.Address().String() + `","weight":1}]}`
	if string(raw["owner_permission"]) != wantJSON {
		t.Fatalf("owner_permission %s, want %s", raw["owner_permission"], wantJSON)
	}
	wantActive := `[{"type":"Active","id":2,"permission_name":"active","threshold":1,"operations":"7fff1fc0033ec30f000000000000000000000000000000000000000000000000","keys":[{"address":"` + k.Address().String() + `","weight":1}]}]`
	if string(raw["active_permission"]) != wantActive {
		t.Fatalf("active_permission %s, want %s", raw["active_permission"], wantActive)
	}
	// visible=false prints the key address in hex.
	var hexAcc tron.Account
	h.wallet("/wallet/getaccount", tron.AddressRequest{Address: k.Address().Hex()}, &hexAcc)
	if got := hexAcc.OwnerPermission.Keys[0].Address; got != k.Address().Hex() {
		t.Fatalf("hex key address %q", got)
	}
}

// AccountPermissionUpdateActuator.validate and checkPermission: each refusal with its
// text, as the servlet prints a ContractValidateException.
func TestAccountPermissionUpdateValidation(t *testing.T) {
	h := newHarness(t, Options{})
	owner := newKey(t)
	h.seed(GenesisAccount{Address: owner.Address(), BalanceSun: 1_000 * trx})
	o := owner.Address().String()
	k1, k2 := newKey(t).Address().String(), newKey(t).Address().String()
	okOwner := perm("Owner", 1, "", o, 1)
	okActive := perm("Active", 1, delegateOps, k1, 1)
	six := []any{}
	for range 6 {
		six = append(six, newKey(t).Address().String(), 1)
	}
	badOps := hex.EncodeToString(tron.Operations(tron.ContractType(7))) // type 7 does not exist
	cases := []struct {
		name string
		req  map[string]any
		want string
	}{
		{"no owner address", map[string]any{"owner": okOwner, "actives": []permReq{okActive}}, "invalidate ownerAddress"},
		{"no account", map[string]any{"owner_address": newKey(t).Address().String(), "owner": okOwner, "actives": []permReq{okActive}}, "ownerAddress account does not exist"},
		{"no owner", map[string]any{"owner_address": o, "actives": []permReq{okActive}}, "owner permission is missed"},
		{"witness", map[string]any{"owner_address": o, "owner": okOwner, "witness": perm("Witness", 1, "", o, 1), "actives": []permReq{okActive}}, "account isn't witness can't set witness permission"},
		{"no actives", map[string]any{"owner_address": o, "owner": okOwner}, "active permission is missed"},
		{"nine actives", map[string]any{"owner_address": o, "owner": okOwner, "actives": []permReq{okActive, okActive, okActive, okActive, okActive, okActive, okActive, okActive, okActive}}, "active permission is too many"},
		{"owner type", map[string]any{"owner_address": o, "owner": perm("Active", 1, "", o, 1), "actives": []permReq{okActive}}, "owner permission type is error"},
		{"active type", map[string]any{"owner_address": o, "owner": okOwner, "actives": []permReq{perm("Owner", 1, "", k1, 1)}}, "active permission type is error"},
		{"six keys", map[string]any{"owner_address": o, "owner": okOwner, "actives": []permReq{perm("Active", 1, delegateOps, six...)}}, "number of keys in permission should not be greater than 5"},
		{"no keys", map[string]any{"owner_address": o, "owner": okOwner, "actives": []permReq{perm("Active", 1, delegateOps)}}, "key's count should be greater than 0"},
		{"threshold 0", map[string]any{"owner_address": o, "owner": okOwner, "actives": []permReq{perm("Active", 0, delegateOps, k1, 1)}}, "permission's threshold should be greater than 0"},
		{"long name", map[string]any{"owner_address": o, "owner": okOwner, "actives": []permReq{{"type": "Active", "permission_name": strings.Repeat("n", 33), "threshold": 1, "operations": delegateOps, "keys": []map[string]any{{"address": k1, "weight": 1}}}}}, "permission's name is too long"},
		{"parent", map[string]any{"owner_address": o, "owner": okOwner, "actives": []permReq{{"type": "Active", "parent_id": 2, "threshold": 1, "operations": delegateOps, "keys": []map[string]any{{"address": k1, "weight": 1}}}}}, "permission's parent should be owner"},
		{"same key twice", map[string]any{"owner_address": o, "owner": okOwner, "actives": []permReq{perm("Active", 1, delegateOps, k1, 1, k1, 1)}}, "address should be distinct in permission Active"},
		{"bad key address", map[string]any{"owner_address": o, "owner": okOwner, "actives": []permReq{perm("Active", 1, delegateOps, "4100", 1)}}, "key is not a validate address"},
		{"weight 0", map[string]any{"owner_address": o, "owner": okOwner, "actives": []permReq{perm("Active", 1, delegateOps, k1, 0)}}, "key's weight should be greater than 0"},
		{"weights below threshold", map[string]any{"owner_address": o, "owner": okOwner, "actives": []permReq{perm("Active", 3, delegateOps, k1, 1, k2, 1)}}, "sum of all key's weight should not be less than threshold in permission Active"},
		{"owner with operations", map[string]any{"owner_address": o, "owner": perm("Owner", 1, delegateOps, o, 1), "actives": []permReq{okActive}}, "Owner permission needn't operations"},
		{"short operations", map[string]any{"owner_address": o, "owner": okOwner, "actives": []permReq{perm("Active", 1, "0000", k1, 1)}}, "operations size must 32"},
		{"no operations", map[string]any{"owner_address": o, "owner": okOwner, "actives": []permReq{perm("Active", 1, "", k1, 1)}}, "operations size must 32"},
		{"unknown type", map[string]any{"owner_address": o, "owner": okOwner, "actives": []permReq{perm("Active", 1, badOps, k1, 1)}}, "7 isn't a validate ContractType"},
	}
	for _, c := range cases {
		c.req["visible"] = true
		got := h.walletError("/wallet/accountpermissionupdate", c.req)
		if want := "class org.tron.core.exception.ContractValidateException : " + c.want; got != want {
			t.Errorf("%s: got %q, want %q", c.name, got, want)
		}
	}
	if a := h.account(owner.Address()); a.BalanceSun != 1_000*trx {
		t.Fatalf("refused updates changed the balance: %d", a.BalanceSun)
	}
}

// AccountPermissionUpdateActuator.execute and AccountCapsule.updatePermissions: the fee
// (getUpdateAccountPermissionFee, 100 TRX) is burnt, the actives are numbered 2, 3, ...
// and getaccount shows them; an owner without the fee is refused with
// ContractExeException's text (Commons.adjustBalance).
func TestAccountPermissionUpdateFeeAndIDs(t *testing.T) {
	h := newHarness(t, Options{})
	owner, signer := newKey(t), newKey(t)
	h.seed(GenesisAccount{Address: owner.Address(), BalanceSun: 1_000 * trx})
	o := owner.Address().String()
	tx := h.signed("/wallet/accountpermissionupdate", map[string]any{"owner_address": o, "visible": true,
		"owner":   perm("Owner", 1, "", o, 1),
		"actives": []permReq{perm("Active", 1, hex.EncodeToString(activeDefaultOperations), o, 1), perm("Active", 1, delegateOps, signer.Address().String(), 1)}}, owner)
	if r := h.broadcast(tx); !r.Result {
		t.Fatalf("broadcast %+v", r)
	}
	h.mine(1)
	info := h.info(tx.TxID)
	if info.Fee != 100*trx {
		t.Fatalf("fee %d, want 100 TRX (bandwidth from the free allowance)", info.Fee)
	}
	if a := h.account(owner.Address()); a.BalanceSun != 900*trx {
		t.Fatalf("balance %d, want 900 TRX", a.BalanceSun)
	}
	acc := h.getAccount(owner.Address())
	if len(acc.ActivePermission) != 2 || acc.ActivePermission[0].ID != 2 || acc.ActivePermission[1].ID != 3 {
		t.Fatalf("actives %+v", acc.ActivePermission)
	}
	p := acc.ActivePermission[1]
	if p.Operations != delegateOps || p.Weight(signer.Address()) != 1 || !p.Allows(tron.DelegateResourceContractType) || p.Allows(tron.TransferContractType) {
		t.Fatalf("delegate permission %+v", p)
	}

	poor := newKey(t)
	h.seed(GenesisAccount{Address: poor.Address(), BalanceSun: 50 * trx})
	pa := poor.Address().String()
	ptx := h.signed("/wallet/accountpermissionupdate", map[string]any{"owner_address": pa, "visible": true,
		"owner": perm("Owner", 1, "", pa, 1), "actives": []permReq{perm("Active", 1, delegateOps, pa, 1)}}, poor)
	r := h.broadcast(ptx)
	want := "Contract execute error : " + poor.Address().Hex() + " insufficient balance, balance: 50000000, amount: 100000000"
	if r.Result || r.Code != "CONTRACT_EXE_ERROR" || r.Message != want {
		t.Fatalf("poor owner: %+v, want %q", r, want)
	}
}

// TransactionCapsule.validateSignature, checkPermission and checkWeight: a broadcast
// signed for a permission that does not exist, by a key outside the permission, with too
// little weight, or for a contract type the permission does not allow, is refused with
// SIGERROR and java-tron's text (Wallet.broadcastTransaction prefixes "Validate signature
// error: "); a delegation signed by the delegate key under its permission lands.
func TestBroadcastPermissionChecks(t *testing.T) {
	h := newHarness(t, Options{})
	pool, recv := delegationSetup(t, h)
	h.seed(GenesisAccount{Address: pool.Address(), BalanceSun: 1_000 * trx, StakeEnergySun: 10_000 * trx, StakeBandwidthSun: 10_000 * trx})
	signer, other := newKey(t), newKey(t)
	grant(t, h, pool, signer.Address().String(), 2)

	delegate := func(id int32) *tron.Transaction {
		return h.build("/wallet/delegateresource", tron.DelegateResourceRequest{OwnerAddress: pool.Address().String(),
			ReceiverAddress: recv.String(), Balance: 100 * trx, Resource: "ENERGY", PermissionID: id, Visible: true})
	}
	refused := func(name string, tx *tron.Transaction, want string) {
		t.Helper()
		r := h.broadcast(tx)
		if r.Result || r.Code != "SIGERROR" || r.Message != "Validate signature error: "+want {
			t.Errorf("%s: %+v, want SIGERROR %q", name, r, want)
		}
	}
	tx := delegate(9)
	signWith(t, tx, signer)
	refused("missing permission", tx, "permission isn't exit")
	tx = delegate(1)
	signWith(t, tx, pool)
	refused("witness permission of a non-witness", tx, "permission isn't exit")
	tx = delegate(3)
	signWith(t, tx, other)
	refused("key not in the permission", tx, tx.Signature[0]+" is signed by "+other.Address().String()+" but it is not contained of permission.")
	tx = delegate(3)
	signWith(t, tx, pool)
	refused("owner key is not in the delegate permission", tx, tx.Signature[0]+" is signed by "+pool.Address().String()+" but it is not contained of permission.")
	tx = delegate(0)
	signWith(t, tx, signer)
	refused("delegate key under the owner permission", tx, tx.Signature[0]+" is signed by "+signer.Address().String()+" but it is not contained of permission.")
	tx = delegate(3)
	signWith(t, tx, signer, signer)
	refused("two signatures for a one-key permission", tx, "Signature count is 2 more than key counts of permission : 1")
	transfer := h.build("/wallet/createtransaction", map[string]any{"owner_address": pool.Address().String(),
		"to_address": recv.String(), "amount": 1, "Permission_id": 3, "visible": true})
	signWith(t, transfer, signer)
	refused("transfer under the delegate permission", transfer, "Permission denied")

	// Weight 2 meets threshold 2: the delegation lands with its Permission_id.
	tx = delegate(3)
	if !strings.Contains(string(tx.RawData), `"Permission_id":3`) {
		t.Fatalf("built transaction lacks Permission_id: %s", tx.RawData)
	}
	signWith(t, tx, signer)
	if r := h.broadcast(tx); !r.Result {
		t.Fatalf("delegate-key delegation: %+v", r)
	}
	h.mine(1)
	if info := h.info(tx.TxID); info.BlockNumber == 0 || info.Fee != 0 {
		t.Fatalf("delegation info %+v", info)
	}

	// A permission whose key weighs less than its threshold: "sig error".
	h2 := newHarness(t, Options{})
	pool2, recv2 := delegationSetup(t, h2)
	h2.seed(GenesisAccount{Address: pool2.Address(), BalanceSun: 1_000 * trx, StakeEnergySun: 10_000 * trx, StakeBandwidthSun: 10_000 * trx})
	a, b := newKey(t), newKey(t)
	grant(t, h2, pool2, a.Address().String(), 1, b.Address().String(), 1)
	tx = h2.build("/wallet/delegateresource", tron.DelegateResourceRequest{OwnerAddress: pool2.Address().String(),
		ReceiverAddress: recv2.String(), Balance: 100 * trx, Resource: "ENERGY", PermissionID: 3, Visible: true})
	signWith(t, tx, a)
	if r := h2.broadcast(tx); r.Result || r.Code != "SIGERROR" || r.Message != "Validate signature error: sig error" {
		t.Fatalf("weight below threshold: %+v", r)
	}
	signWith(t, tx, a)
	if r := h2.broadcast(tx); r.Result || r.Message != "Validate signature error: "+a.Address().String()+" has signed twice!" {
		t.Fatalf("signed twice: %+v", r)
	}
}

// Manager.consumeMultiSignFee: a transaction with more than one signature burns
// getMultiSignFee (1 TRX) from the owner, reported in TransactionInfo.fee
// (TransactionUtil.buildTransactionInfoInstance). TronWeb's trx.multiSign asks
// /wallet/getsignweight (TransactionUtil.getTransactionSignWeight) before each signature.
func TestMultiSignFeeAndSignWeight(t *testing.T) {
	h := newHarness(t, Options{})
	pool, recv := delegationSetup(t, h)
	h.seed(GenesisAccount{Address: pool.Address(), BalanceSun: 1_000 * trx, StakeEnergySun: 10_000 * trx, StakeBandwidthSun: 10_000 * trx})
	a, b := newKey(t), newKey(t)
	grant(t, h, pool, a.Address().String(), 1, b.Address().String(), 1)
	tx := h.build("/wallet/delegateresource", tron.DelegateResourceRequest{OwnerAddress: pool.Address().String(),
		ReceiverAddress: recv.String(), Balance: 100 * trx, Resource: "ENERGY", PermissionID: 3})

	type weight struct {
		Permission    tron.AccountPermission `json:"permission"`
		ApprovedList  []string               `json:"approved_list"`
		CurrentWeight int64                  `json:"current_weight"`
		Result        struct{ Code, Message string }
		Transaction   struct {
			Transaction tron.Transaction `json:"transaction"`
		} `json:"transaction"`
	}
	var w weight
	h.wallet("/wallet/getsignweight", tx, &w)
	if w.Result.Code != "NOT_ENOUGH_PERMISSION" || w.Permission.ID != 3 || w.Permission.Weight(a.Address()) != 1 || w.CurrentWeight != 0 {
		t.Fatalf("unsigned sign weight %+v", w)
	}
	signWith(t, tx, a)
	h.wallet("/wallet/getsignweight", tx, &w)
	if w.Result.Code != "NOT_ENOUGH_PERMISSION" || w.CurrentWeight != 1 || len(w.ApprovedList) != 1 || w.ApprovedList[0] != a.Address().Hex() {
		t.Fatalf("one signature %+v", w)
	}
	signWith(t, tx, b)
	h.wallet("/wallet/getsignweight", tx, &w)
	if w.Result.Code != "ENOUGH_PERMISSION" || w.CurrentWeight != 2 || w.Transaction.Transaction.TxID != tx.TxID {
		t.Fatalf("two signatures %+v", w)
	}
	before := h.account(pool.Address()).BalanceSun
	if r := h.broadcast(tx); !r.Result {
		t.Fatalf("2-of-2 delegation: %+v", r)
	}
	h.mine(1)
	if info := h.info(tx.TxID); info.Fee != 1*trx {
		t.Fatalf("multi-sign fee %d, want 1 TRX", info.Fee)
	}
	if after := h.account(pool.Address()).BalanceSun; before-after != 1*trx {
		t.Fatalf("balance moved by %d, want 1 TRX", before-after)
	}
	var transfer tron.Transaction
	h.wallet("/wallet/createtransaction", map[string]any{"owner_address": pool.Address().String(), "to_address": recv.String(), "amount": 1, "Permission_id": 3, "visible": true}, &transfer)
	h.wallet("/wallet/getsignweight", &transfer, &w)
	if w.Result.Code != "PERMISSION_ERROR" || w.Result.Message != "Permission denied!" {
		t.Fatalf("transfer under the delegate permission %+v", w)
	}
}

// A permission update counts for every transaction after it, pending ones included
// (java-tron validates signatures against the account store that holds the pending
// state, Manager.pushTransaction): removing the delegate key refuses its next delegation.
func TestPermissionUpdateTakesEffectForLaterTransactions(t *testing.T) {
	h := newHarness(t, Options{})
	pool, recv := delegationSetup(t, h)
	h.seed(GenesisAccount{Address: pool.Address(), BalanceSun: 1_000 * trx, StakeEnergySun: 10_000 * trx, StakeBandwidthSun: 10_000 * trx})
	signer := newKey(t)
	grant(t, h, pool, signer.Address().String(), 2)
	o := pool.Address().String()
	revoke := h.signed("/wallet/accountpermissionupdate", map[string]any{"owner_address": o, "visible": true,
		"owner": perm("Owner", 1, "", o, 1), "actives": []permReq{perm("Active", 1, hex.EncodeToString(activeDefaultOperations), o, 1)}}, pool)
	if r := h.broadcast(revoke); !r.Result {
		t.Fatalf("revoke: %+v", r)
	}
	tx := h.build("/wallet/delegateresource", tron.DelegateResourceRequest{OwnerAddress: o,
		ReceiverAddress: recv.String(), Balance: 100 * trx, Resource: "ENERGY", PermissionID: 3, Visible: true})
	signWith(t, tx, signer)
	if r := h.broadcast(tx); r.Result || r.Message != "Validate signature error: permission isn't exit" {
		t.Fatalf("delegation after the revocation (pending): %+v", r)
	}
	h.mine(1)
	if acc := h.getAccount(pool.Address()); len(acc.ActivePermission) != 1 {
		t.Fatalf("actives after the revocation: %+v", acc.ActivePermission)
	}
}

// The broadcast checks in java-tron's order: Wallet.broadcastTransaction refuses a
// transaction expiring before the next block slot (TransactionCapsule.checkExpiration);
// Manager.pushTransaction checks the signature before processTransaction's TaPoS;
// Manager.validateCommon's size limit comes before BandwidthProcessor; validateDup gives
// one message for a pending and a landed duplicate.
func TestBroadcastCheckOrder(t *testing.T) {
	h := newHarness(t, Options{})
	pool, recv := delegationSetup(t, h)
	req := tron.DelegateResourceRequest{OwnerAddress: pool.Address().String(), ReceiverAddress: recv.String(),
		Balance: 100 * trx, Resource: "ENERGY", Visible: true}

	// Expiring within the next slot (head + 3 s): expired, not taken.
	tx := h.build("/wallet/delegateresource", req)
	raw, err := tron.ParseRawDataJSON(tx.RawData)
	if err != nil {
		t.Fatal(err)
	}
	head := h.head()
	raw.Expiration = head.Timestamp + BlockTimeMs - 1
	soon, err := tron.NewSignedTransaction(raw, true, pool)
	if err != nil {
		t.Fatal(err)
	}
	if r := h.broadcast(soon); r.Result || r.Code != "TRANSACTION_EXPIRATION_ERROR" || r.Message != "Transaction expired" {
		t.Fatalf("expiring before the next slot: %+v", r)
	}

	// Bad TaPoS and a foreign signature: the signature is reported.
	raw.Expiration = head.Timestamp + 60_000
	raw.RefBlockHash = []byte{1, 2, 3, 4, 5, 6, 7, 8}
	bad, err := tron.NewTransaction(raw, true)
	if err != nil {
		t.Fatal(err)
	}
	signWith(t, bad, newKey(t))
	if r := h.broadcast(bad); r.Code != "SIGERROR" {
		t.Fatalf("bad signature and TaPoS: %+v, want SIGERROR", r)
	}

	// A 600 KB memo from an account without bandwidth or TRX: too big, before bandwidth.
	broke := newKey(t)
	h.seed(GenesisAccount{Address: broke.Address(), BalanceSun: 0})
	h.seed(GenesisAccount{Address: broke.Address(), BalanceSun: 0})
	big := &tron.RawData{Contract: &tron.TransferContract{OwnerAddress: broke.Address(), ToAddress: recv, Amount: 1},
		RefBlockBytes: raw.RefBlockBytes, Data: make([]byte, 600*1024), Expiration: head.Timestamp + 60_000, Timestamp: head.Timestamp}
	hd, _ := hex.DecodeString(h.head().BlockID)
	big.RefBlockHash = hd[8:16]
	bigTx, err := tron.NewSignedTransaction(big, true, broke)
	if err != nil {
		t.Fatal(err)
	}
	r := h.broadcast(bigTx)
	if r.Result || r.Code != "TOO_BIG_TRANSACTION_ERROR" || !strings.HasPrefix(r.Message, "Too big transaction with result, TxId "+bigTx.TxID+", the size is ") ||
		!strings.HasSuffix(r.Message, " bytes, maxTxSize 512000") {
		t.Fatalf("oversized transaction: %+v", r)
	}

	// Duplicates: the same message pending and landed.
	good := h.build("/wallet/delegateresource", req)
	signWith(t, good, pool)
	if r := h.broadcast(good); !r.Result {
		t.Fatalf("good: %+v", r)
	}
	if r := h.broadcast(good); r.Code != "DUP_TRANSACTION_ERROR" || r.Message != "Dup transaction." {
		t.Fatalf("pending duplicate: %+v", r)
	}
	h.mine(1)
	if r := h.broadcast(good); r.Code != "DUP_TRANSACTION_ERROR" || r.Message != "Dup transaction." {
		t.Fatalf("landed duplicate: %+v", r)
	}
}

// GetTransactionInfoByBlockNumServlet answers {} for num 0 (and any number not above 0),
// [] for a block without transactions.
func TestTransactionInfoByBlockNumZero(t *testing.T) {
	h := newHarness(t, Options{})
	h.mine(2)
	for _, num := range []int64{0, -1} {
		var raw json.RawMessage
		h.wallet("/wallet/gettransactioninfobyblocknum", tron.NumRequest{Num: num}, &raw)
		if string(raw) != "{}" {
			t.Fatalf("num %d: %s", num, raw)
		}
	}
	var raw json.RawMessage
	h.wallet("/wallet/gettransactioninfobyblocknum", tron.NumRequest{Num: 1}, &raw)
	if string(raw) != "[]" {
		t.Fatalf("num 1: %s", raw)
	}
}

// Permissions survive a restart of a persistent simulator (persist.go).
func TestPermissionsPersist(t *testing.T) {
	file := t.TempDir() + "/chain.json"
	h := newHarness(t, Options{DataFile: file})
	pool, _ := delegationSetup(t, h)
	signer := newKey(t)
	grant(t, h, pool, signer.Address().String(), 2)
	if err := h.sim.Close(); err != nil {
		t.Fatal(err)
	}
	again, err := New(Options{DataFile: file, GenesisTime: testGenesis})
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	p := again.confirmed.permissionByID(pool.Address(), 3)
	if p == nil || keyWeight(p, signer.Address()) != 2 || !tron.OperationsAllow(p.Operations, tron.UnDelegateResourceContractType) {
		t.Fatalf("permission 3 after restart: %+v", p)
	}
}
