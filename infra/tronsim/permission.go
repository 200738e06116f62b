package tronsim

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"unicode/utf16"

	"google.golang.org/protobuf/encoding/protowire"

	"rental/infra/custody"
	"rental/infra/tron"
)

// Account permissions as java-tron enforces them (multi-signature, committee proposal
// ALLOW_MULTI_SIGN, on for mainnet and nile):
//
//   - AccountPermissionUpdateActuator (actuator/AccountPermissionUpdateActuator.java)
//     validates /wallet/accountpermissionupdate and charges getUpdateAccountPermissionFee;
//     AccountCapsule.updatePermissions numbers the actives 2, 3, ... in their order.
//   - TransactionCapsule.validateSignature/checkPermission/checkWeight (chainbase) decide
//     whether the signatures of a broadcast satisfy the permission its Permission_id names.
//   - Manager.consumeMultiSignFee charges getMultiSignFee when a transaction carries more
//     than one signature.
//
// An account that never updated its permissions has java-tron's defaults
// (AccountCapsule.createDefaultOwnerPermission / createDefaultActivePermission): owner
// id 0 and active id 2, each with the account's own key at weight 1, threshold 1.

const (
	// updateAccountPermissionFee and multiSignFee are DynamicPropertiesStore's defaults
	// (100 TRX and 1 TRX), the values mainnet and nile run with.
	updateAccountPermissionFee = 100 * trxPrecision
	multiSignFee               = 1 * trxPrecision
	// totalSignNum is DynamicPropertiesStore's TOTAL_SIGN_NUM: at most this many keys in a
	// permission and signatures on a transaction.
	totalSignNum = 5
	// maxActivePermissions is AccountPermissionUpdateActuator's cap on actives.
	maxActivePermissions = 8
	// transactionMaxByteSize is Constant.TRANSACTION_MAX_BYTE_SIZE (500 KiB).
	transactionMaxByteSize = 500 * 1024
	// maxResultSizeInTx is Constant.MAX_RESULT_SIZE_IN_TX.
	maxResultSizeInTx = 64
)

// availableContractTypes is DynamicPropertiesStore's AVAILABLE_CONTRACT_TYPE and
// activeDefaultOperations its ACTIVE_DEFAULT_OPERATIONS as mainnet has them after the
// proposals that added types 48, 49 and the Stake 2.0 types 54-59: every type may be
// named in an active permission; the default active permission allows all but
// AccountPermissionUpdateContract (46).
var (
	availableContractTypes  = mustHex("7fff1fc0037ec30f000000000000000000000000000000000000000000000000")
	activeDefaultOperations = mustHex("7fff1fc0033ec30f000000000000000000000000000000000000000000000000")
)

func mustHex(s string) []byte {
	b, err := hex.DecodeString(s)
	if err != nil {
		panic(err)
	}
	return b
}

// accountPerms are an account's permissions once it has updated them (nil in account
// means java-tron's defaults). Values are never modified in place: an update replaces the
// pointer, so state clones may share them.
type accountPerms struct {
	Owner   tron.Permission   `json:"owner"`
	Witness *tron.Permission  `json:"witness,omitempty"`
	Actives []tron.Permission `json:"actives"`
}

func defaultOwner(addr tron.Address) tron.Permission {
	return tron.Permission{Type: tron.PermissionOwner, Name: "owner", Threshold: 1,
		Keys: []tron.PermissionKey{{Address: addr[:], Weight: 1}}}
}

func defaultActive(addr tron.Address) tron.Permission {
	return tron.Permission{Type: tron.PermissionActive, ID: 2, Name: "active", Threshold: 1,
		Operations: bytes.Clone(activeDefaultOperations), Keys: []tron.PermissionKey{{Address: addr[:], Weight: 1}}}
}

// permissions returns the owner and active permissions of an existing account.
func (a account) permissions(addr tron.Address) (tron.Permission, []tron.Permission) {
	if a.Perms == nil {
		return defaultOwner(addr), []tron.Permission{defaultActive(addr)}
	}
	return a.Perms.Owner, a.Perms.Actives
}

// permissionByID is AccountCapsule.getPermissionById; for an account that does not exist
// TransactionCapsule.validateSignature falls back to the default owner (0) and active (2).
func (s *state) permissionByID(addr tron.Address, id int32) *tron.Permission {
	a, ok := s.Accounts[addr]
	if !ok {
		switch id {
		case 0:
			p := defaultOwner(addr)
			return &p
		case 2:
			p := defaultActive(addr)
			return &p
		}
		return nil
	}
	owner, actives := a.permissions(addr)
	switch id {
	case 0:
		return &owner
	case 1:
		if a.Perms != nil && a.Perms.Witness != nil {
			w := *a.Perms.Witness
			return &w
		}
		return nil
	}
	for i := range actives {
		if actives[i].ID == id {
			p := actives[i]
			return &p
		}
	}
	return nil
}

// addressValid is DecodeUtil.addressValid: 21 bytes starting with 0x41.
func addressValid(b []byte) bool { return len(b) == tron.AddressLen && b[0] == 0x41 }

// checkPermission is AccountPermissionUpdateActuator.checkPermission, in its order.
func checkPermission(p *tron.Permission) error {
	if len(p.Keys) > totalSignNum {
		return invalid("number of keys in permission should not be greater than %d", totalSignNum)
	}
	if len(p.Keys) == 0 {
		return invalid("key's count should be greater than 0")
	}
	if p.Type == tron.PermissionWitness && len(p.Keys) != 1 {
		return invalid("Witness permission's key count should be 1")
	}
	if p.Threshold <= 0 {
		return invalid("permission's threshold should be greater than 0")
	}
	if len(utf16.Encode([]rune(p.Name))) > 32 { // Java's String.length()
		return invalid("permission's name is too long")
	}
	if p.ParentID != 0 {
		return invalid("permission's parent should be owner")
	}
	seen := map[string]bool{}
	for _, k := range p.Keys {
		seen[string(k.Address)] = true
	}
	if len(seen) != len(p.Keys) {
		return invalid("address should be distinct in permission %s", p.Type)
	}
	var sum int64
	for _, k := range p.Keys {
		if !addressValid(k.Address) {
			return invalid("key is not a validate address")
		}
		if k.Weight <= 0 {
			return invalid("key's weight should be greater than 0")
		}
		if sum > math.MaxInt64-k.Weight {
			return invalid("long overflow") // Math.addExact's ArithmeticException
		}
		sum += k.Weight
	}
	if sum < p.Threshold {
		return invalid("sum of all key's weight should not be less than threshold in permission %s", p.Type)
	}
	if p.Type != tron.PermissionActive {
		if len(p.Operations) != 0 {
			return invalid("%s permission needn't operations", p.Type)
		}
		return nil
	}
	if len(p.Operations) != 32 {
		return invalid("operations size must 32")
	}
	for i := range 256 {
		if p.Operations[i/8]&(1<<(i%8)) != 0 && availableContractTypes[i/8]&(1<<(i%8)) == 0 {
			return invalid("%d isn't a validate ContractType", i)
		}
	}
	return nil
}

// execError is java-tron's ContractExeException: broadcast answers CONTRACT_EXE_ERROR and
// the transaction is not taken.
type execError struct{ Msg string }

func (e *execError) Error() string { return e.Msg }

// execPermissionUpdate is AccountPermissionUpdateActuator: validate, then (unless only
// validating, as a build does) replace the permissions and burn the fee.
func (s *state) execPermissionUpdate(ctx execCtx, c *tron.AccountPermissionUpdateContract, net int64) (execResult, error) {
	if !addressValid(c.OwnerAddress[:]) {
		return execResult{}, invalid("invalidate ownerAddress")
	}
	owner, ok := s.Accounts[c.OwnerAddress]
	if !ok {
		return execResult{}, invalid("ownerAddress account does not exist")
	}
	if c.OwnerPerm == nil {
		return execResult{}, invalid("owner permission is missed")
	}
	if c.Witness != nil { // the simulator has no witnesses
		return execResult{}, invalid("account isn't witness can't set witness permission")
	}
	if len(c.Actives) == 0 {
		return execResult{}, invalid("active permission is missed")
	}
	if len(c.Actives) > maxActivePermissions {
		return execResult{}, invalid("active permission is too many")
	}
	if c.OwnerPerm.Type != tron.PermissionOwner {
		return execResult{}, invalid("owner permission type is error")
	}
	if err := checkPermission(c.OwnerPerm); err != nil {
		return execResult{}, err
	}
	for i := range c.Actives {
		if c.Actives[i].Type != tron.PermissionActive {
			return execResult{}, invalid("active permission type is error")
		}
		if err := checkPermission(&c.Actives[i]); err != nil {
			return execResult{}, err
		}
	}
	if ctx.validateOnly {
		return execResult{ContractRet: "SUCCESS"}, nil
	}
	fee := int64(updateAccountPermissionFee)
	if owner.Balance < fee {
		// Commons.adjustBalance's BalanceInsufficientException, address in hex.
		return execResult{}, &execError{fmt.Sprintf("%s insufficient balance, balance: %d, amount: %d",
			hex.EncodeToString(c.OwnerAddress[:]), owner.Balance, fee)}
	}
	perms := &accountPerms{Owner: *c.OwnerPerm}
	perms.Owner.ID = 0
	for i, p := range c.Actives {
		p.ID = int32(i + 2)
		perms.Actives = append(perms.Actives, p)
	}
	owner.Balance -= fee
	owner.Perms = perms
	s.Accounts[c.OwnerAddress] = owner
	return execResult{ContractRet: "SUCCESS", Fee: fee, NetUsage: net}, nil
}

// sigAddress is ECKey.signatureToAddress as checkWeight calls it: a signature shorter
// than 65 bytes is a SignatureFormatException, a recovery byte out of range or a point
// that does not recover a SignatureException.
func sigAddress(hash, sig []byte) (tron.Address, error) {
	if len(sig) < 65 {
		return tron.Address{}, signatureFormatError(fmt.Sprintf("Signature size is %d", len(sig)))
	}
	header := int(sig[64])
	if header < 27 {
		header += 27
	}
	if header < 27 || header > 34 {
		return tron.Address{}, signatureError(fmt.Sprintf("Header byte out of range: %d", header))
	}
	if header >= 31 {
		header -= 4
	}
	rec := append(append([]byte(nil), sig[:64]...), byte(header-27))
	a, err := tron.RecoverHash(hash, rec)
	if err != nil {
		return tron.Address{}, signatureError("Could not recover public key from signature")
	}
	return a, nil
}

// signatureFormatError and signatureError are java-tron's SignatureFormatException and
// SignatureException; getsignweight names them SIGNATURE_FORMAT_ERROR and
// COMPUTE_ADDRESS_ERROR (any other refusal is PERMISSION_ERROR).
type (
	signatureFormatError string
	signatureError       string
)

func (e signatureFormatError) Error() string { return string(e) }
func (e signatureError) Error() string       { return string(e) }

func keyWeight(p *tron.Permission, a tron.Address) int64 {
	for _, k := range p.Keys {
		if bytes.Equal(k.Address, a[:]) {
			return k.Weight
		}
	}
	return 0
}

// checkWeight is TransactionCapsule.checkWeight: every signature must come from a key of
// the permission, once; it returns the signers' summed weight and their addresses.
func checkWeight(p *tron.Permission, sigs [][]byte, hash []byte) (int64, []tron.Address, error) {
	if len(sigs) > len(p.Keys) {
		return 0, nil, fmt.Errorf("Signature count is %d more than key counts of permission : %d", len(sigs), len(p.Keys))
	}
	var weight int64
	var approved []tron.Address
	seen := map[tron.Address]bool{}
	for _, sig := range sigs {
		a, err := sigAddress(hash, sig)
		if err != nil {
			return 0, nil, err
		}
		w := keyWeight(p, a)
		if w == 0 {
			return 0, nil, fmt.Errorf("%s is signed by %s but it is not contained of permission.", hex.EncodeToString(sig), a)
		}
		if seen[a] {
			return 0, nil, fmt.Errorf("%s has signed twice!", a)
		}
		seen[a] = true
		approved = append(approved, a)
		weight += w
	}
	return weight, approved, nil
}

// checkPermissionUse is TransactionCapsule.checkPermission: a permission other than the
// owner must be an active one whose operations allow the contract's type.
func checkPermissionUse(id int32, p *tron.Permission, t tron.ContractType) (typeErr, denied bool) {
	if id == 0 {
		return false, false
	}
	if p.Type != tron.PermissionActive {
		return true, false
	}
	return false, !tron.OperationsAllow(p.Operations, t)
}

func decodeSigs(rec *txRecord) [][]byte {
	out := make([][]byte, len(rec.Sigs))
	for i, sh := range rec.Sigs {
		b, err := hex.DecodeString(sh)
		if err != nil {
			b = nil
		}
		out[i] = b
	}
	return out
}

// validateSignatureLocked is TransactionCapsule.validatePubSignature against the pending
// state (java-tron's account store holds the pending transactions' effects, so a
// permission update counts for every transaction after it). The error text follows
// "Validate signature error: " in the SIGERROR answer.
func (s *Sim) validateSignatureLocked(rec *txRecord) error {
	if len(rec.Sigs) == 0 {
		return errors.New("miss sig or contract")
	}
	if len(rec.Sigs) > totalSignNum {
		return errors.New("too many signatures")
	}
	c := rec.Data.Contract
	id := rec.Data.PermissionID
	p := s.pendLocked().permissionByID(c.Owner(), id)
	if p == nil {
		return errors.New("permission isn't exit")
	}
	typeErr, denied := checkPermissionUse(id, p, c.Type())
	switch {
	case typeErr:
		return errors.New("Permission type is error")
	case denied:
		return errors.New("Permission denied")
	}
	h := sha256.Sum256(rec.Raw)
	weight, _, err := checkWeight(p, decodeSigs(rec), h[:])
	if err != nil {
		return err
	}
	if weight < p.Threshold {
		return errors.New("sig error")
	}
	return nil
}

// tooBig is the size check of Manager.validateCommon: the transaction without its
// results, plus two MAX_RESULT_SIZE_IN_TX, must fit TRANSACTION_MAX_BYTE_SIZE.
func tooBig(rec *txRecord) error {
	size := protowire.SizeTag(1) + protowire.SizeBytes(len(rec.Raw))
	for _, sig := range decodeSigs(rec) {
		size += protowire.SizeTag(2) + protowire.SizeBytes(len(sig))
	}
	if total := int64(size) + 2*maxResultSizeInTx; total > transactionMaxByteSize {
		return fmt.Errorf("Too big transaction with result, TxId %s, the size is %d bytes, maxTxSize %d", rec.ID, total, transactionMaxByteSize)
	}
	return nil
}

// chargeMultiSign is Manager.consumeMultiSignFee: a transaction with more than one
// signature burns getMultiSignFee from the owner, or is refused as BANDWITH_ERROR.
func (s *state) chargeMultiSign(owner tron.Address, sigs int) (int64, error) {
	if sigs <= 1 {
		return 0, nil
	}
	a, ok := s.Accounts[owner]
	if !ok {
		return 0, nil
	}
	if a.Balance < multiSignFee {
		return 0, bandwidthError{}
	}
	a.Balance -= multiSignFee
	s.Accounts[owner] = a
	return multiSignFee, nil
}

// ---- HTTP ----

// permissionsJSON renders owner_permission and active_permission as getaccount prints
// them (operations in hex, key addresses per visible).
func permissionsJSON(addr tron.Address, a account, visible bool) (*tron.AccountPermission, []tron.AccountPermission) {
	owner, actives := a.permissions(addr)
	conv := func(p *tron.Permission) tron.AccountPermission {
		var out tron.AccountPermission
		b, _ := json.Marshal(p.JSONValue(visible))
		_ = json.Unmarshal(b, &out)
		return out
	}
	o := conv(&owner)
	out := make([]tron.AccountPermission, len(actives))
	for i := range actives {
		out[i] = conv(&actives[i])
	}
	return &o, out
}

// permissionUpdateRequest is the body of accountpermissionupdate.
type permissionUpdateRequest struct {
	OwnerAddress string            `json:"owner_address"`
	Owner        *tron.Permission  `json:"owner"`
	Witness      *tron.Permission  `json:"witness"`
	Actives      []tron.Permission `json:"actives"`
}

// accountPermissionUpdate is AccountPermissionUpdateServlet: the contract is validated
// (Wallet.createTransactionCapsule) and returned unsigned; Permission_id is applied by
// serveWallet like every builder.
func (s *Sim) accountPermissionUpdate(r *walletReq) (any, error) {
	var q permissionUpdateRequest
	if err := r.decode(&q); err != nil {
		return nil, err
	}
	var owner tron.Address
	if q.OwnerAddress != "" { // absent: an empty owner, which the actuator refuses
		var err error
		if owner, err = parseAddr(q.OwnerAddress, "owner_address"); err != nil {
			return nil, err
		}
	}
	c := &tron.AccountPermissionUpdateContract{OwnerAddress: owner, OwnerPerm: q.Owner, Witness: q.Witness, Actives: q.Actives}
	return s.build(c, 0, r.visible)
}

// applyPermissionID is Util.setTransactionPermissionId, which the building servlets call
// after building: a request's Permission_id above 0 is set on the contract.
func applyPermissionID(r *walletReq, out any) any {
	var q struct {
		PermissionID int32 `json:"Permission_id"`
	}
	if json.Unmarshal(r.body, &q) != nil || q.PermissionID <= 0 {
		return out
	}
	set := func(tx *tron.Transaction) *tron.Transaction {
		raw, err := tron.ParseRawDataJSON(tx.RawData)
		if err != nil {
			return tx
		}
		raw.PermissionID = q.PermissionID
		again, err := tron.NewTransaction(raw, tx.Visible)
		if err != nil {
			return tx
		}
		return again
	}
	switch v := out.(type) {
	case *tron.Transaction:
		return set(v)
	case extention:
		if v.Transaction != nil && v.ConstantResult == nil {
			v.Transaction = set(v.Transaction)
		}
		return v
	}
	return out
}

// getSignWeight is GetTransactionSignWeightServlet (TransactionUtil.getTransactionSignWeight),
// which TronWeb's trx.multiSign asks before adding a signature.
func (s *Sim) getSignWeight(r *walletReq) (any, error) {
	var t tron.Transaction
	if err := r.decode(&t); err != nil {
		return nil, err
	}
	rec, err := newRecord(&t)
	if err != nil {
		return nil, &nodeErr{"org.tron.core.exception.BadItemException", err.Error()}
	}
	type result struct {
		Code    string `json:"code,omitempty"`
		Message string `json:"message,omitempty"`
	}
	out := struct {
		Permission    any      `json:"permission,omitempty"`
		ApprovedList  []string `json:"approved_list,omitempty"`
		CurrentWeight int64    `json:"current_weight,omitempty"`
		Result        result   `json:"result"`
		Transaction   struct {
			Result      tron.Return      `json:"result"`
			TxID        string           `json:"txid"`
			Transaction tron.Transaction `json:"transaction"`
		} `json:"transaction"`
	}{}
	out.Transaction.Result = tron.Return{Result: true}
	out.Transaction.TxID = rec.ID
	out.Transaction.Transaction = txJSON(rec, r.visible)
	out.Transaction.Transaction.Visible = r.visible
	s.mu.Lock()
	defer s.mu.Unlock()
	c := rec.Data.Contract
	id := rec.Data.PermissionID
	st := s.pendLocked()
	if _, ok := st.Accounts[c.Owner()]; !ok {
		out.Result = result{"PERMISSION_ERROR", "Account does not exist!"}
		return out, nil
	}
	p := st.permissionByID(c.Owner(), id)
	if p == nil {
		out.Result = result{"PERMISSION_ERROR", "Permission for this, does not exist!"}
		return out, nil
	}
	switch typeErr, denied := checkPermissionUse(id, p, c.Type()); {
	case typeErr:
		out.Result = result{"PERMISSION_ERROR", "Permission type is wrong!"}
		return out, nil
	case denied:
		out.Result = result{"PERMISSION_ERROR", "Permission denied!"}
		return out, nil
	}
	out.Permission = p.JSONValue(r.visible)
	if len(rec.Sigs) > 0 {
		h := sha256.Sum256(rec.Raw)
		w, approved, err := checkWeight(p, decodeSigs(rec), h[:])
		if err != nil {
			code := "PERMISSION_ERROR"
			var fe signatureFormatError
			var se signatureError
			switch {
			case errors.As(err, &fe):
				code = "SIGNATURE_FORMAT_ERROR"
			case errors.As(err, &se):
				code = "COMPUTE_ADDRESS_ERROR"
			}
			out.Result = result{Code: code, Message: err.Error()}
			return out, nil
		}
		out.CurrentWeight = w
		for _, a := range approved {
			out.ApprovedList = append(out.ApprovedList, tron.FormatAddress(a, r.visible))
		}
	}
	if out.CurrentWeight >= p.Threshold {
		out.Result.Code = "ENOUGH_PERMISSION"
	} else {
		out.Result.Code = "NOT_ENOUGH_PERMISSION"
	}
	return out, nil
}

// ---- Go API (chain set-up of the dev stack, benches and tests) ----

// Submit signs c with key (its owner permission) and queues it for the next block, with
// every broadcast check. It returns the txid.
func (s *Sim) Submit(c tron.Contract, key tron.PrivateKey) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.signAndSubmitLocked(c, 0, key)
}

// ActivePermissions returns addr's active permissions at the head (nil when the account
// does not exist).
func (s *Sim) ActivePermissions(addr tron.Address) []tron.Permission {
	s.mu.RLock()
	defer s.mu.RUnlock()
	a, ok := s.confirmed.Accounts[addr]
	if !ok {
		return nil
	}
	_, actives := a.permissions(addr)
	return actives
}

// GrantDelegates is a chain set-up step: owner (a pool's owner key, held by the set-up
// only) grants signers a delegate-only permission (custody.DelegateOnly) and a block is
// mined so it holds at once. A pool whose active permissions already let every signer
// delegate and reclaim is left as it is (a persistent chain set up before).
func (s *Sim) GrantDelegates(owner tron.PrivateKey, signers ...tron.Address) error {
	pool := owner.Address()
	granted := func() bool {
		for _, sg := range signers {
			ok := false
			for _, p := range s.ActivePermissions(pool) {
				ok = ok || (keyWeight(&p, sg) >= p.Threshold && tron.OperationsAllow(p.Operations, tron.DelegateResourceContractType) &&
					tron.OperationsAllow(p.Operations, tron.UnDelegateResourceContractType))
			}
			if !ok {
				return false
			}
		}
		return true
	}
	if granted() {
		return nil
	}
	if _, err := s.Submit(custody.DelegateOnly(pool, signers...), owner); err != nil {
		return fmt.Errorf("tronsim: grant delegates of %s: %w", pool, err)
	}
	if _, err := s.Mine(1); err != nil {
		return err
	}
	if !granted() {
		return fmt.Errorf("tronsim: grant delegates of %s did not land", pool)
	}
	return nil
}
