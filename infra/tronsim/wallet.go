package tronsim

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"sort"
	"strconv"
	"strings"

	"rental/infra/tron"
)

// walletReq is one /wallet or /walletsolidity call: the JSON body (for GET, the query
// parameters turned into JSON, as java-tron's servlets accept both) and the view.
type walletReq struct {
	body    []byte
	visible bool
	solid   bool
}

func (r *walletReq) decode(v any) error {
	if err := json.Unmarshal(r.body, v); err != nil {
		return &nodeErr{"com.alibaba.fastjson.JSONException", err.Error()}
	}
	return nil
}

// nodeErr renders as java-tron's Util.printErrorMsg: {"Error": "class <cls> : <msg>"}.
type nodeErr struct{ cls, msg string }

func (e *nodeErr) Error() string { return "class " + e.cls + " : " + e.msg }

// argErr renders as the {"Error": "<msg>"} that some servlets write for an
// IllegalArgumentException they catch themselves (no class prefix).
type argErr string

func (e argErr) Error() string { return string(e) }

func validateErr(msg string) error {
	return &nodeErr{"org.tron.core.exception.ContractValidateException", msg}
}

func badAddress(field string) error {
	return &nodeErr{"java.lang.IllegalArgumentException", "Invalid " + field}
}

// rawJSON is a pre-rendered response body.
type rawJSON []byte

type walletFunc func(*walletReq) (any, error)

// walletRoutes lists the java-tron endpoints served; solid marks those also served under
// /walletsolidity/ (reads only).
func (s *Sim) walletRoutes() map[string]struct {
	fn    walletFunc
	solid bool
} {
	type route = struct {
		fn    walletFunc
		solid bool
	}
	return map[string]route{
		"getnowblock":                        {s.getNowBlock, true},
		"getblock":                           {s.getBlock, true},
		"getblockbynum":                      {s.getBlockByNum, true},
		"getblockbyid":                       {s.getBlockByID, true},
		"getblockbylimitnext":                {s.getBlockByLimitNext, true},
		"getblockbylatestnum":                {s.getBlockByLatestNum, true},
		"gettransactionbyid":                 {s.getTransactionByID, true},
		"gettransactioninfobyid":             {s.getTransactionInfoByID, true},
		"gettransactionfrompending":          {s.getTransactionFromPending, false}, // pending.go
		"gettransactioninfobyblocknum":       {s.getTransactionInfoByBlockNum, true},
		"getaccount":                         {s.getAccount, true},
		"getaccountresource":                 {s.getAccountResource, false},
		"getdelegatedresourcev2":             {s.getDelegatedResourceV2, true},
		"getdelegatedresourceaccountindexv2": {s.getDelegatedIndexV2, true},
		"getcandelegatedmaxsize":             {s.getCanDelegatedMaxSize, true},
		"getchainparameters":                 {s.getChainParameters, false},
		"createtransaction":                  {s.createTransaction, false},
		"createaccount":                      {s.createAccount, false},
		"delegateresource":                   {s.delegateResource, false},
		"undelegateresource":                 {s.undelegateResource, false},
		"triggersmartcontract":               {s.triggerSmartContract, false},
		"triggerconstantcontract":            {s.triggerConstantContract, true},
		"estimateenergy":                     {s.estimateEnergy, false},
		"broadcasttransaction":               {s.broadcastTransaction, false},
		"accountpermissionupdate":            {s.accountPermissionUpdate, false}, // permission.go
		"getsignweight":                      {s.getSignWeight, false},
	}
}

// serveWallet adapts a walletFunc to HTTP: node_down, body/query decoding, visible, and
// java-tron's habit of answering errors with 200 and {"Error": ...}.
func (s *Sim) serveWallet(fn walletFunc, solid bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.takeNodeDown() {
			http.Error(w, "tronsim: node_down fault", http.StatusServiceUnavailable)
			return
		}
		if r.Method != http.MethodGet && r.Method != http.MethodPost {
			w.Header().Set("Allow", "GET, POST")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		req := &walletReq{solid: solid}
		if r.Method == http.MethodGet {
			req.body = queryJSON(r)
		} else {
			b, err := io.ReadAll(io.LimitReader(r.Body, 4<<20))
			if err != nil {
				http.Error(w, "read body", http.StatusBadRequest)
				return
			}
			if len(bytes.TrimSpace(b)) == 0 {
				b = []byte("{}")
			}
			req.body = b
		}
		var v struct {
			Visible bool `json:"visible"`
		}
		_ = json.Unmarshal(req.body, &v)
		req.visible = v.Visible
		out, err := fn(req)
		out = applyPermissionID(req, out) // permission.go
		w.Header().Set("Content-Type", "application/json")
		if err != nil {
			var ne *nodeErr
			var ae argErr
			msg := err.Error()
			if !errors.As(err, &ne) && !errors.As(err, &ae) {
				msg = (&nodeErr{"java.lang.Exception", msg}).Error()
			}
			writeJSON(w, http.StatusOK, map[string]string{"Error": msg})
			return
		}
		if raw, ok := out.(rawJSON); ok {
			w.WriteHeader(http.StatusOK)
			w.Write(raw)
			w.Write([]byte("\n"))
			return
		}
		writeJSON(w, http.StatusOK, out)
	})
}

// queryJSON turns ?num=5&visible=true into {"num":5,"visible":true}.
func queryJSON(r *http.Request) []byte {
	m := map[string]any{}
	for k, vs := range r.URL.Query() {
		if len(vs) == 0 {
			continue
		}
		v := vs[0]
		if n, err := strconv.ParseInt(v, 10, 64); err == nil {
			m[k] = n
		} else if b, err := strconv.ParseBool(v); err == nil {
			m[k] = b
		} else {
			m[k] = v
		}
	}
	b, _ := json.Marshal(m)
	return b
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

var emptyObject = rawJSON("{}")

// ---- blocks ----

// topLocked is the newest block the view may show (head, or head - SolidLag).
func (s *Sim) topLocked(solid bool) int64 {
	n := s.head().Num
	if solid {
		n = max(0, n-s.opts.SolidLag)
	}
	return n
}

func (s *Sim) blockAt(num int64, solid bool) *block {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if num < 0 || num > s.topLocked(solid) {
		return nil
	}
	return s.blocks[num]
}

func (s *Sim) getNowBlock(r *walletReq) (any, error) {
	s.mu.RLock()
	b := s.blocks[s.topLocked(r.solid)]
	s.mu.RUnlock()
	return rawJSON(s.blockJSON(b, r.visible)), nil
}

func (s *Sim) getBlockByNum(r *walletReq) (any, error) {
	var q tron.NumRequest
	if err := r.decode(&q); err != nil {
		return nil, err
	}
	b := s.blockAt(q.Num, r.solid)
	if b == nil {
		return emptyObject, nil
	}
	return rawJSON(s.blockJSON(b, r.visible)), nil
}

// getBlock is java-tron's /wallet/getblock (Wallet.getBlock): id_or_num is a block number
// or a block id, absent for the head; without detail (the default) a block's transactions
// are left out, so that a caller after the head's number and id does not read them all.
func (s *Sim) getBlock(r *walletReq) (any, error) {
	var q struct {
		IDOrNum any  `json:"id_or_num"` // a string; a number when it came as ?id_or_num=5
		Detail  bool `json:"detail"`
	}
	if err := r.decode(&q); err != nil {
		return nil, err
	}
	s.mu.RLock()
	head := s.topLocked(r.solid)
	s.mu.RUnlock()
	ref := ""
	switch v := q.IDOrNum.(type) {
	case string:
		ref = v
	case float64:
		ref = strconv.FormatInt(int64(v), 10)
	}
	var b *block
	switch num, err := strconv.ParseInt(ref, 10, 64); {
	case ref == "":
		b = s.blockAt(head, r.solid)
	case err == nil && num > head:
		return emptyObject, nil
	case err == nil && num < 0:
		return nil, argErr("num must be non-positive number.")
	case err == nil:
		b = s.blockAt(num, r.solid)
	default:
		bad := argErr("id must be legal block hash.")
		id, err := hex.DecodeString(ref)
		if err != nil || len(id) != 32 {
			return nil, bad
		}
		num := int64(binary.BigEndian.Uint64(id[:8]))
		if num > head || num < 0 {
			return nil, bad
		}
		if b = s.blockAt(num, r.solid); b != nil && !bytes.Equal(b.ID[:], id) {
			b = nil
		}
	}
	switch {
	case b == nil:
		return emptyObject, nil
	case q.Detail || len(b.Txs) == 0:
		return rawJSON(s.blockJSON(b, r.visible)), nil
	}
	h := blockHeader(b, r.visible)
	return &h, nil
}

func (s *Sim) getBlockByID(r *walletReq) (any, error) {
	var q tron.ValueRequest
	if err := r.decode(&q); err != nil {
		return nil, err
	}
	id, err := hex.DecodeString(q.Value)
	if err != nil || len(id) != 32 {
		return emptyObject, nil
	}
	num := int64(0)
	for _, c := range id[:8] {
		num = num<<8 | int64(c)
	}
	b := s.blockAt(num, r.solid)
	if b == nil || !bytes.Equal(b.ID[:], id) {
		return emptyObject, nil
	}
	return rawJSON(s.blockJSON(b, r.visible)), nil
}

// blockList renders {"block":[...]} by splicing cached block JSON.
func (s *Sim) blockList(bs []*block, visible bool) rawJSON {
	if len(bs) == 0 {
		return emptyObject
	}
	var buf bytes.Buffer
	buf.WriteString(`{"block":[`)
	for i, b := range bs {
		if i > 0 {
			buf.WriteByte(',')
		}
		buf.Write(s.blockJSON(b, visible))
	}
	buf.WriteString("]}")
	return buf.Bytes()
}

// getBlockByLimitNext serves blocks [startNum, endNum), at most 100, like java-tron
// (anything else is {}).
func (s *Sim) getBlockByLimitNext(r *walletReq) (any, error) {
	var q tron.BlockLimitRequest
	if err := r.decode(&q); err != nil {
		return nil, err
	}
	if q.EndNum <= 0 || q.EndNum <= q.StartNum || q.EndNum-q.StartNum > 100 || q.StartNum < 0 {
		return emptyObject, nil
	}
	s.mu.RLock()
	top := s.topLocked(r.solid)
	var bs []*block
	for n := q.StartNum; n < q.EndNum && n <= top; n++ {
		bs = append(bs, s.blocks[n])
	}
	s.mu.RUnlock()
	if len(bs) == 0 {
		// GetBlockByLimitNextServlet prints the (empty, non-null) BlockList.
		return rawJSON(`{"block":[]}`), nil
	}
	return s.blockList(bs, r.visible), nil
}

func (s *Sim) getBlockByLatestNum(r *walletReq) (any, error) {
	var q tron.NumRequest
	if err := r.decode(&q); err != nil {
		return nil, err
	}
	if q.Num <= 0 || q.Num > 100 {
		return emptyObject, nil
	}
	s.mu.RLock()
	top := s.topLocked(r.solid)
	var bs []*block
	for n := max(0, top-q.Num+1); n <= top; n++ {
		bs = append(bs, s.blocks[n])
	}
	s.mu.RUnlock()
	return s.blockList(bs, r.visible), nil
}

// blockJSON renders java-tron's printBlock once per block and visibility.
func (s *Sim) blockJSON(b *block, visible bool) []byte {
	cache := &b.json
	if visible {
		cache = &b.jsonVis
	}
	if c := cache.Load(); c != nil {
		return *c
	}
	out := blockHeader(b, visible)
	for _, t := range b.Txs {
		out.Transactions = append(out.Transactions, txJSON(t, visible))
	}
	js, _ := json.Marshal(out)
	cache.Store(&js)
	return js
}

// blockHeader is the block without its transactions.
func blockHeader(b *block, visible bool) tron.Block {
	return tron.Block{
		BlockID: hex.EncodeToString(b.ID[:]),
		BlockHeader: tron.BlockHeader{
			RawData: tron.BlockHeaderRaw{
				Number:         b.Num,
				TxTrieRoot:     hex.EncodeToString(b.TrieRoot[:]),
				WitnessAddress: tron.FormatAddress(b.Witness, visible),
				ParentHash:     hex.EncodeToString(b.Parent[:]),
				Version:        blockVersion,
				Timestamp:      b.Time,
			},
			WitnessSignature: hex.EncodeToString(b.Sig),
		},
	}
}

func txJSON(t *txRecord, visible bool) tron.Transaction {
	raw, _ := t.Data.JSON(visible)
	tx := tron.Transaction{TxID: t.ID, RawData: raw, RawDataHex: hex.EncodeToString(t.Raw), Signature: t.Sigs}
	if t.Block > 0 {
		tx.Ret = []tron.TransactionResult{{ContractRet: t.Result.ContractRet}}
	}
	return tx
}

// ---- transactions ----

// includedTx finds a transaction that sits in a block the view may show.
func (s *Sim) includedTx(id string, solid bool) *txRecord {
	s.mu.RLock()
	defer s.mu.RUnlock()
	t, ok := s.known[strings.ToLower(id)]
	if !ok || t.Block == 0 || t.Block > s.topLocked(solid) {
		return nil
	}
	return t
}

func (s *Sim) getTransactionByID(r *walletReq) (any, error) {
	var q tron.ValueRequest
	if err := r.decode(&q); err != nil {
		return nil, err
	}
	t := s.includedTx(q.Value, r.solid)
	if t == nil {
		return emptyObject, nil
	}
	return txJSON(t, r.visible), nil
}

func (s *Sim) getTransactionInfoByID(r *walletReq) (any, error) {
	var q tron.ValueRequest
	if err := r.decode(&q); err != nil {
		return nil, err
	}
	t := s.includedTx(q.Value, r.solid)
	if t == nil {
		return emptyObject, nil
	}
	return s.txInfo(t, r.visible), nil
}

func (s *Sim) getTransactionInfoByBlockNum(r *walletReq) (any, error) {
	var q tron.NumRequest
	if err := r.decode(&q); err != nil {
		return nil, err
	}
	if q.Num <= 0 {
		// GetTransactionInfoByBlockNumServlet answers {} for a number that is not positive.
		return emptyObject, nil
	}
	infos := []tron.TransactionInfo{}
	if b := s.blockAt(q.Num, r.solid); b != nil {
		for _, t := range b.Txs {
			infos = append(infos, s.txInfo(t, r.visible))
		}
	}
	return infos, nil
}

// txInfo is protocol.TransactionInfo of an included transaction.
func (s *Sim) txInfo(t *txRecord, visible bool) tron.TransactionInfo {
	res := t.Result
	info := tron.TransactionInfo{
		ID:             t.ID,
		Fee:            res.Fee,
		BlockNumber:    t.Block,
		BlockTimeStamp: t.BlockTime,
		ContractResult: []string{hex.EncodeToString(res.ContractResult)},
		Receipt: tron.ResourceReceipt{
			EnergyUsage:      res.EnergyUsage,
			EnergyFee:        res.EnergyFee,
			EnergyUsageTotal: res.EnergyTotal,
			NetUsage:         res.NetUsage,
			NetFee:           res.NetFee,
		},
	}
	if !res.Contract.IsZero() {
		info.ContractAddress = tron.FormatAddress(res.Contract, visible)
		info.Receipt.Result = res.ContractRet
		for _, l := range res.Logs {
			info.Log = append(info.Log, logJSON(res.Contract, l, visible))
		}
	}
	if res.failed() {
		info.Result = "FAILED"
		msg := "REVERT opcode executed"
		if res.ContractRet == "OUT_OF_ENERGY" {
			msg = "Not enough energy"
		}
		info.ResMessage = hex.EncodeToString([]byte(msg))
		if visible {
			info.ResMessage = msg
		}
	}
	return info
}

func (s *Sim) broadcastTransaction(r *walletReq) (any, error) {
	var t tron.Transaction
	if err := r.decode(&t); err != nil {
		return nil, err
	}
	rec, err := newRecord(&t)
	if err != nil {
		return nil, &nodeErr{"org.tron.core.exception.BadItemException", err.Error()}
	}
	s.mu.Lock()
	err = s.submitLocked(rec, true)
	s.mu.Unlock()
	if err != nil {
		var se *submitError
		if !errors.As(err, &se) {
			se = &submitError{codeOther, "Error: " + err.Error()}
		}
		return broadcastReply{Result: false, Code: se.Code, Message: returnMessage(se.Msg, r.visible), TxID: rec.ID}, nil
	}
	return broadcastReply{Result: true, TxID: rec.ID}, nil
}

// broadcastReply is api.Return plus txid. Unlike java-tron (whose JsonFormat omits a
// false result) it always carries "result", which every client reads the same way.
type broadcastReply struct {
	Result  bool   `json:"result"`
	Code    string `json:"code,omitempty"`
	Message string `json:"message,omitempty"`
	TxID    string `json:"txid"`
}

// ---- accounts and resources ----

func parseAddr(s, field string) (tron.Address, error) {
	a, err := tron.ParseAddress(s)
	if err != nil {
		return a, badAddress(field)
	}
	return a, nil
}

func (s *Sim) getAccount(r *walletReq) (any, error) {
	var q tron.AddressRequest
	if err := r.decode(&q); err != nil {
		return nil, err
	}
	addr, err := parseAddr(q.Address, "address")
	if err != nil {
		return nil, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	a, ok := s.confirmed.Accounts[addr]
	if !ok {
		return emptyObject, nil
	}
	out := tron.Account{
		Address:    tron.FormatAddress(addr, r.visible),
		Balance:    a.Balance,
		CreateTime: a.CreateTime,
		FrozenV2: []tron.FreezeV2{
			{Amount: a.FrozenBandwidth},
			{Type: tron.ResourceEnergy, Amount: a.FrozenEnergy},
			{Type: "TRON_POWER"},
		},
		DelegatedFrozenV2BalanceForBandwidth:         a.DelegatedOutBandwidth,
		AcquiredDelegatedFrozenV2BalanceForBandwidth: a.AcquiredBandwidth,
		NetWindowSize: 28800,
		AccountResource: tron.AccountResourceState{
			EnergyUsage:                               a.EnergyUsage,
			LatestConsumeTimeForEnergy:                a.EnergyTime,
			EnergyWindowSize:                          28800,
			DelegatedFrozenV2BalanceForEnergy:         a.DelegatedOutEnergy,
			AcquiredDelegatedFrozenV2BalanceForEnergy: a.AcquiredEnergy,
		},
	}
	if a.IsContract {
		out.Type = "Contract"
	} else {
		out.OwnerPermission, out.ActivePermission = permissionsJSON(addr, a, r.visible)
	}
	return out, nil
}

func (s *Sim) getAccountResource(r *walletReq) (any, error) {
	var q tron.AddressRequest
	if err := r.decode(&q); err != nil {
		return nil, err
	}
	addr, err := parseAddr(q.Address, "address")
	if err != nil {
		return nil, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	a, ok := s.confirmed.Accounts[addr]
	if !ok {
		return emptyObject, nil
	}
	h := s.head()
	tot := s.confirmed.totals(s.opts.Params, h.Num)
	return tron.AccountResource{
		FreeNetLimit:      s.opts.Params.FreeNetLimit,
		FreeNetUsed:       usageAt(a.FreeNetUsage, a.FreeNetTime, h.Time),
		NetUsed:           usageAt(a.NetUsage, a.NetTime, h.Time),
		NetLimit:          netLimit(a, tot),
		TotalNetLimit:     tot.TotalNetLimit,
		TotalNetWeight:    tot.TotalNetWeight,
		TronPowerLimit:    (a.FrozenEnergy + a.DelegatedOutEnergy + a.FrozenBandwidth + a.DelegatedOutBandwidth) / trxPrecision,
		EnergyUsed:        usageAt(a.EnergyUsage, a.EnergyTime, h.Time),
		EnergyLimit:       energyLimit(a, tot),
		TotalEnergyLimit:  tot.TotalEnergyLimit,
		TotalEnergyWeight: tot.TotalEnergyWeight,
	}, nil
}

func (s *Sim) getDelegatedResourceV2(r *walletReq) (any, error) {
	var q tron.DelegatedResourceRequest
	if err := r.decode(&q); err != nil {
		return nil, err
	}
	from, err := parseAddr(q.FromAddress, "fromAddress")
	if err != nil {
		return nil, err
	}
	to, err := parseAddr(q.ToAddress, "toAddress")
	if err != nil {
		return nil, err
	}
	s.mu.RLock()
	ds := s.confirmed.delegationsOf(from, to)
	s.mu.RUnlock()
	if len(ds) == 0 {
		return emptyObject, nil
	}
	var out tron.DelegatedResourceList
	for _, d := range ds {
		out.DelegatedResource = append(out.DelegatedResource, tron.DelegatedResource{
			From:                      tron.FormatAddress(d.From, r.visible),
			To:                        tron.FormatAddress(d.To, r.visible),
			FrozenBalanceForBandwidth: d.Bandwidth,
			FrozenBalanceForEnergy:    d.Energy,
			ExpireTimeForBandwidth:    d.ExpireBandwidth,
			ExpireTimeForEnergy:       d.ExpireEnergy,
		})
	}
	return out, nil
}

// getDelegatedIndexV2 is getdelegatedresourceaccountindexv2: who delegated to the
// account (fromAccounts) and to whom it delegated (toAccounts).
func (s *Sim) getDelegatedIndexV2(r *walletReq) (any, error) {
	var q struct {
		Value string `json:"value"`
	}
	if err := r.decode(&q); err != nil {
		return nil, err
	}
	addr, err := parseAddr(q.Value, "value")
	if err != nil {
		return nil, err
	}
	s.mu.RLock()
	fromSet, toSet := map[string]bool{}, map[string]bool{}
	for k := range s.confirmed.Delegations {
		if k.To == addr {
			fromSet[tron.FormatAddress(k.From, r.visible)] = true
		}
		if k.From == addr {
			toSet[tron.FormatAddress(k.To, r.visible)] = true
		}
	}
	s.mu.RUnlock()
	if len(fromSet) == 0 && len(toSet) == 0 {
		return emptyObject, nil
	}
	out := struct {
		Account      string   `json:"account"`
		FromAccounts []string `json:"fromAccounts,omitempty"`
		ToAccounts   []string `json:"toAccounts,omitempty"`
	}{Account: tron.FormatAddress(addr, r.visible), FromAccounts: sortedKeys(fromSet), ToAccounts: sortedKeys(toSet)}
	return out, nil
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func (s *Sim) getCanDelegatedMaxSize(r *walletReq) (any, error) {
	var q tron.CanDelegatedMaxSizeRequest
	if err := r.decode(&q); err != nil {
		return nil, err
	}
	addr, err := parseAddr(q.OwnerAddress, "owner_address")
	if err != nil {
		return nil, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	ctx := s.ctxFor(s.head().Num + 1)
	return tron.CanDelegatedMaxSize{MaxSize: s.confirmed.canDelegate(ctx, addr, tron.ResourceCode(q.Type))}, nil
}

func (s *Sim) getChainParameters(*walletReq) (any, error) {
	p := s.opts.Params
	kv := []tron.ChainParameter{
		{Key: "getMaintenanceTimeInterval", Value: 21_600_000},
		{Key: "getCreateAccountFee", Value: p.CreateAccountFee},
		{Key: "getTransactionFee", Value: p.TransactionFee},
		{Key: "getCreateNewAccountFeeInSystemContract", Value: p.CreateNewAccountFeeInSystemContract},
		{Key: "getCreateNewAccountBandwidthRate", Value: 1},
		{Key: "getEnergyFee", Value: p.EnergyFee},
		{Key: "getMaxCpuTimeOfOneTx", Value: 80},
		{Key: "getAllowDelegateResource", Value: 1},
		{Key: "getTotalEnergyLimit", Value: p.TotalEnergyLimit},
		{Key: "getTotalEnergyCurrentLimit", Value: p.TotalEnergyLimit},
		{Key: "getAllowMultiSign", Value: 1},
		{Key: "getUpdateAccountPermissionFee", Value: updateAccountPermissionFee},
		{Key: "getMultiSignFee", Value: multiSignFee},
		{Key: "getAllowAdaptiveEnergy", Value: 0},
		{Key: "getMaxFeeLimit", Value: p.MaxFeeLimit},
		{Key: "getAllowNewResourceModel", Value: 1},
		{Key: "getFreeNetLimit", Value: p.FreeNetLimit},
		{Key: "getTotalNetLimit", Value: p.TotalNetLimit},
		{Key: "getMemoFee", Value: 1_000_000},
		{Key: "getUnfreezeDelayDays", Value: int64(s.opts.Network.UnfreezeDelayDays())},
		{Key: "getAllowDynamicEnergy", Value: 0},
		{Key: "getMaxDelegateLockPeriod", Value: p.MaxDelegateLockPeriod},
	}
	return tron.ChainParameters{ChainParameter: kv}, nil
}

// ---- transaction builders ----

// build validates c against the pending view and returns the unsigned transaction java-tron
// would print: reference block = head, expiration = head time + 60 s (chain time).
func (s *Sim) build(c tron.Contract, feeLimit int64, visible bool) (*tron.Transaction, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	ctx := s.ctxFor(s.head().Num + 1)
	ctx.feeLimit = feeLimit
	view := s.viewLocked()
	if validatesInPlace(c) {
		ctx.validateOnly = true // under the read lock: nothing may change
	} else {
		view = view.clone()
	}
	if _, err := view.execute(ctx, c, 0); err != nil {
		return nil, validateErr(err.Error())
	}
	r := &tron.RawData{Contract: c, FeeLimit: feeLimit}
	s.refBlockLocked(r)
	return tron.NewTransaction(r, visible)
}

// buildTrigger is Wallet.triggerContract for a non-constant call: the contract must exist,
// and the transaction is returned without running it (a call that would revert is built,
// lands as REVERT and burns its fee). The owner is not looked up: createTransactionCapsule
// runs no actuator validation for TriggerSmartContract, so a never-activated owner's call
// builds and is refused at broadcast (BandwidthProcessor.consume: "account [...] does not
// exist", CONTRACT_VALIDATE_ERROR).
func (s *Sim) buildTrigger(c *tron.TriggerSmartContract, feeLimit int64, visible bool) (*tron.Transaction, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if c.ContractAddress != s.opts.USDTContract && c.ContractAddress != DeepReserveContract() {
		return nil, validateErr("No contract or not a valid smart contract")
	}
	r := &tron.RawData{Contract: c, FeeLimit: feeLimit}
	s.refBlockLocked(r)
	return tron.NewTransaction(r, visible)
}

func (s *Sim) createTransaction(r *walletReq) (any, error) {
	var q tron.CreateTransactionRequest
	if err := r.decode(&q); err != nil {
		return nil, err
	}
	owner, err := parseAddr(q.OwnerAddress, "owner_address")
	if err != nil {
		return nil, err
	}
	to, err := parseAddr(q.ToAddress, "to_address")
	if err != nil {
		return nil, err
	}
	return s.build(&tron.TransferContract{OwnerAddress: owner, ToAddress: to, Amount: q.Amount}, 0, r.visible)
}

func (s *Sim) createAccount(r *walletReq) (any, error) {
	var q tron.CreateAccountRequest
	if err := r.decode(&q); err != nil {
		return nil, err
	}
	owner, err := parseAddr(q.OwnerAddress, "owner_address")
	if err != nil {
		return nil, err
	}
	acc, err := parseAddr(q.AccountAddress, "account_address")
	if err != nil {
		return nil, err
	}
	return s.build(&tron.AccountCreateContract{OwnerAddress: owner, AccountAddress: acc}, 0, r.visible)
}

func parseResource(s string) (tron.ResourceCode, error) {
	if s == "" {
		return tron.Bandwidth, nil // the enum default, as java-tron reads an absent field
	}
	rc, err := tron.ParseResourceCode(s)
	if err != nil || rc == tron.TronPower {
		return 0, validateErr("ResourceCode error, valid ResourceCode[BANDWIDTH、ENERGY]")
	}
	return rc, nil
}

func (s *Sim) delegateResource(r *walletReq) (any, error) {
	var q tron.DelegateResourceRequest
	if err := r.decode(&q); err != nil {
		return nil, err
	}
	owner, err := parseAddr(q.OwnerAddress, "owner_address")
	if err != nil {
		return nil, err
	}
	recv, err := parseAddr(q.ReceiverAddress, "receiver_address")
	if err != nil {
		return nil, err
	}
	res, err := parseResource(q.Resource)
	if err != nil {
		return nil, err
	}
	c := &tron.DelegateResourceContract{OwnerAddress: owner, Resource: res, Balance: q.Balance,
		ReceiverAddress: recv, Lock: q.Lock, LockPeriod: q.LockPeriod}
	return s.build(c, 0, r.visible)
}

func (s *Sim) undelegateResource(r *walletReq) (any, error) {
	var q tron.UnDelegateResourceRequest
	if err := r.decode(&q); err != nil {
		return nil, err
	}
	owner, err := parseAddr(q.OwnerAddress, "owner_address")
	if err != nil {
		return nil, err
	}
	recv, err := parseAddr(q.ReceiverAddress, "receiver_address")
	if err != nil {
		return nil, err
	}
	res, err := parseResource(q.Resource)
	if err != nil {
		return nil, err
	}
	c := &tron.UnDelegateResourceContract{OwnerAddress: owner, Resource: res, Balance: q.Balance, ReceiverAddress: recv}
	return s.build(c, 0, r.visible)
}

// triggerContract decodes a trigger request into the contract (function_selector plus
// parameter, or data).
func triggerContract(q *tron.TriggerSmartContractRequest, constant bool) (*tron.TriggerSmartContract, error) {
	var owner tron.Address
	var err error
	if q.OwnerAddress != "" || !constant {
		if owner, err = parseAddr(q.OwnerAddress, "owner_address"); err != nil {
			return nil, err
		}
	}
	contract, err := parseAddr(q.ContractAddress, "contract_address")
	if err != nil {
		return nil, err
	}
	var data []byte
	if q.FunctionSelector != "" {
		param, err := hex.DecodeString(trimHex(q.Parameter))
		if err != nil {
			return nil, &nodeErr{"java.lang.IllegalArgumentException", "parameter is not hex"}
		}
		data = append(selector(strings.ReplaceAll(q.FunctionSelector, " ", "")), param...)
	} else if q.Data != "" {
		if data, err = hex.DecodeString(trimHex(q.Data)); err != nil {
			return nil, &nodeErr{"java.lang.IllegalArgumentException", "data is not hex"}
		}
	}
	return &tron.TriggerSmartContract{OwnerAddress: owner, ContractAddress: contract, CallValue: q.CallValue, Data: data}, nil
}

// extention is api.TransactionExtention as the trigger servlets print it.
type extention struct {
	Result         tron.Return       `json:"result"`
	EnergyUsed     int64             `json:"energy_used,omitempty"`
	EnergyRequired int64             `json:"energy_required,omitempty"`
	ConstantResult []string          `json:"constant_result,omitempty"`
	Transaction    *tron.Transaction `json:"transaction,omitempty"`
}

func extError(code, msg string, visible bool) extention {
	return extention{Result: tron.Return{Code: code, Message: returnMessage(msg, visible)}}
}

// returnMessage renders api.Return.message (bytes): java-tron's JsonFormat prints bytes as
// text under visible=true and as hex otherwise.
func returnMessage(msg string, visible bool) string {
	if visible {
		return msg
	}
	return hex.EncodeToString([]byte(msg))
}

func (s *Sim) triggerSmartContract(r *walletReq) (any, error) {
	var q tron.TriggerSmartContractRequest
	if err := r.decode(&q); err != nil {
		return nil, err
	}
	c, err := triggerContract(&q, false)
	if err != nil {
		return nil, err
	}
	if poolHosted(c.ContractAddress) {
		// The pool's functions are all views: java-tron's Wallet.triggerContract runs a view
		// as a constant call (isConstant on the contract's ABI) instead of building a
		// transaction.
		return s.constant(&q, r.visible, false)
	}
	tx, err := s.buildTrigger(c, q.FeeLimit, r.visible)
	if err != nil {
		var ne *nodeErr
		if errors.As(err, &ne) {
			return extError(codeValidate, ne.msg, r.visible), nil
		}
		return nil, err
	}
	return extention{Result: tron.Return{Result: true}, Transaction: tx}, nil
}

// constant runs a read-only call of a simulated contract on the view's top block (the
// solidified one when solid).
func (s *Sim) constant(q *tron.TriggerSmartContractRequest, visible, solid bool) (extention, error) {
	c, err := triggerContract(q, true)
	if err != nil {
		return extention{}, err
	}
	var out []byte
	var energy int64
	var ok bool
	pool := poolHosted(c.ContractAddress)
	if pool { // swappool.go; it takes the lock itself
		var exists bool
		if out, energy, ok, exists = s.poolCall(c.ContractAddress, c.Data, solid); !exists {
			return extError(codeValidate, "Smart contract is not exist.", visible), nil
		}
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	switch c.ContractAddress {
	case s.opts.USDTContract:
		out, energy, ok = s.viewLocked().constantCall(c.OwnerAddress, c.Data)
	case DeepReserveContract(): // deep.go
		if len(c.Data) >= 4 && bytes.Equal(c.Data[:4], SelDeepRent) {
			// A constant call of rent runs it on a scratch copy of the pending state.
			ctx := s.ctxFor(s.head().Num + 1)
			ctx.feeLimit = s.opts.Params.MaxFeeLimit
			res, err := s.viewLocked().clone().execute(ctx, c, 0)
			if err != nil {
				return extError(codeValidate, err.Error(), visible), nil
			}
			out, energy, ok = res.ContractResult, res.EnergyTotal, res.ContractRet == "SUCCESS"
			break
		}
		out, energy, ok = s.deepCallLocked(c.Data)
	default:
		if !pool {
			return extError(codeValidate, "Smart contract is not exist.", visible), nil
		}
	}
	r := &tron.RawData{Contract: c, FeeLimit: q.FeeLimit}
	s.refBlockLocked(r)
	tx, err := tron.NewTransaction(r, visible)
	if err != nil {
		return extention{}, err
	}
	ext := extention{Result: tron.Return{Result: true}, EnergyUsed: energy, Transaction: tx,
		ConstantResult: []string{hex.EncodeToString(out)}}
	if !ok {
		ext.Result.Message = returnMessage("REVERT opcode executed", visible)
		tx.Ret = []tron.TransactionResult{{Ret: "FAILED", ContractRet: "REVERT"}}
	} else {
		tx.Ret = []tron.TransactionResult{{ContractRet: "SUCCESS"}}
	}
	return ext, nil
}

func (s *Sim) triggerConstantContract(r *walletReq) (any, error) {
	var q tron.TriggerSmartContractRequest
	if err := r.decode(&q); err != nil {
		return nil, err
	}
	return s.constant(&q, r.visible, r.solid)
}

// estimateEnergy is /wallet/estimateenergy: {"result":{"result":true},"energy_required":N}.
func (s *Sim) estimateEnergy(r *walletReq) (any, error) {
	var q tron.TriggerSmartContractRequest
	if err := r.decode(&q); err != nil {
		return nil, err
	}
	ext, err := s.constant(&q, r.visible, false)
	if err != nil || !ext.Result.Result {
		return ext, err
	}
	if ext.Result.Message != "" {
		return extError("CONTRACT_EXE_ERROR", "REVERT opcode executed", r.visible), nil
	}
	return extention{Result: tron.Return{Result: true}, EnergyRequired: ext.EnergyUsed}, nil
}
