package tron

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeNode serves canned java-tron answers per endpoint and records request bodies.
type fakeNode struct {
	t        *testing.T
	mu       sync.Mutex
	handlers map[string]func(body map[string]any) (int, string)
	bodies   map[string]map[string]any
	raw      map[string][]byte
}

func newFakeNode(t *testing.T) (*fakeNode, *Client) {
	f := &fakeNode{t: t, handlers: map[string]func(map[string]any) (int, string){}, bodies: map[string]map[string]any{}, raw: map[string][]byte{}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ep := strings.TrimPrefix(r.URL.Path, "/wallet/")
		raw, _ := io.ReadAll(r.Body)
		var body map[string]any
		if r.Method != http.MethodPost || json.Unmarshal(raw, &body) != nil {
			t.Errorf("%s: want a POST with a JSON body, got %s %q", ep, r.Method, raw)
		}
		f.mu.Lock()
		f.bodies[ep] = body
		f.raw[ep] = raw
		h := f.handlers[ep]
		f.mu.Unlock()
		if h == nil {
			http.NotFound(w, r)
			return
		}
		status, out := h(body)
		w.WriteHeader(status)
		io.WriteString(w, out+"\n") // java-tron ends bodies with a newline
	}))
	t.Cleanup(srv.Close)
	return f, NewClient(srv.URL, WithTimeout(2*time.Second))
}

func (f *fakeNode) answer(ep, body string) {
	f.handlers[ep] = func(map[string]any) (int, string) { return http.StatusOK, body }
}

func (f *fakeNode) rawBody(ep string) []byte {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.raw[ep]
}

func (f *fakeNode) body(ep string) map[string]any {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.bodies[ep]
}

const usdtB58 = "TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6t"

func TestClientBlocks(t *testing.T) {
	f, c := newFakeNode(t)
	ctx := context.Background()
	owner, to := testKey(t, 1).Address(), testKey(t, 2).Address()
	tx, err := NewTransaction(&RawData{RefBlockBytes: []byte{0, 1}, RefBlockHash: make([]byte, 8), Expiration: 2, Timestamp: 1,
		Contract: &TransferContract{OwnerAddress: owner, ToAddress: to, Amount: 7}}, false)
	if err != nil {
		t.Fatal(err)
	}
	tx.Ret = []TransactionResult{{ContractRet: "SUCCESS"}}
	txJSON, _ := json.Marshal(tx)
	block := `{"blockID":"0000000000000065aa","block_header":{"raw_data":{"number":101,"txTrieRoot":"00","witness_address":"41928c9af0651632157ef27a2cf17ca72c575a4d21","parentHash":"0000000000000064bb","version":30,"timestamp":1735689603000},"witness_signature":"ab"},"transactions":[` + string(txJSON) + `]}`
	f.answer("getnowblock", block)
	b, err := c.GetNowBlock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if b.Number() != 101 || b.ParentHash() != "0000000000000064bb" || b.Timestamp() != 1735689603000 || len(b.Transactions) != 1 {
		t.Fatalf("block decoded as %+v", b)
	}
	got := b.Transactions[0]
	if !got.Succeeded() || got.TxID != tx.TxID || got.ContractTypeName() != "TransferContract" {
		t.Fatalf("transaction decoded as %+v", got)
	}
	if r, _, err := got.Decode(); err != nil || r.Contract.(*TransferContract).Amount != 7 {
		t.Fatalf("block transaction does not decode: %v", err)
	}
	if w, err := ParseAnyAddress(b.BlockHeader.RawData.WitnessAddress); err != nil || w.IsZero() {
		t.Fatalf("witness address: %v", err)
	}

	f.answer("getblockbynum", "{}")
	if _, err := c.GetBlockByNum(ctx, 10_000); !errors.Is(err, ErrNotFound) {
		t.Fatalf("block above head: err = %v", err)
	}
	if f.body("getblockbynum")["num"] != float64(10_000) {
		t.Fatalf("getblockbynum body %v", f.body("getblockbynum"))
	}

	f.answer("getblockbylimitnext", `{"block":[`+block+`,`+strings.Replace(block, `"number":101`, `"number":102`, 1)+`]}`)
	blocks, err := c.GetBlockByLimitNext(ctx, 101, 103)
	if err != nil || len(blocks) != 2 || blocks[1].Number() != 102 {
		t.Fatalf("range: %v, %d blocks", err, len(blocks))
	}
	if body := f.body("getblockbylimitnext"); body["startNum"] != float64(101) || body["endNum"] != float64(103) {
		t.Fatalf("range body %v", body)
	}
	f.answer("getblockbylimitnext", "{}")
	if blocks, err := c.GetBlockByLimitNext(ctx, 200, 300); err != nil || len(blocks) != 0 {
		t.Fatalf("empty range: %v %v", blocks, err)
	}
	if _, err := c.GetBlockByLimitNext(ctx, 0, MaxBlocksPerRange+1); err == nil {
		t.Fatal("range over java-tron's cap accepted")
	}
}

func TestClientAccountsAndResources(t *testing.T) {
	f, c := newFakeNode(t)
	ctx := context.Background()
	who := testKey(t, 1).Address()

	// BANDWIDTH is the enum default, so java-tron prints that frozenV2 entry without "type".
	f.answer("getaccount", `{"address":"`+who.String()+`","balance":12000000,"create_time":1735689600000,
		"frozenV2":[{"amount":3000000},{"type":"ENERGY","amount":900000000000},{"type":"TRON_POWER"}],
		"delegated_frozenV2_balance_for_bandwidth":1000000,
		"account_resource":{"energy_window_size":28800,"delegated_frozenV2_balance_for_energy":500000000000,"latest_consume_time_for_energy":1}}`)
	a, err := c.GetAccount(ctx, who)
	if err != nil {
		t.Fatal(err)
	}
	if !a.Exists() || a.Balance != 12_000_000 || a.FrozenV2Amount(ResourceBandwidth) != 3_000_000 ||
		a.FrozenV2Amount(ResourceEnergy) != 900_000_000_000 ||
		a.AccountResource.DelegatedFrozenV2BalanceForEnergy != 500_000_000_000 || a.DelegatedFrozenV2BalanceForBandwidth != 1_000_000 {
		t.Fatalf("account decoded as %+v", a)
	}
	if body := f.body("getaccount"); body["address"] != who.String() || body["visible"] != true {
		t.Fatalf("getaccount body %v", body)
	}
	f.answer("getaccount", "{}")
	if a, err := c.GetAccount(ctx, who); err != nil || a.Exists() {
		t.Fatalf("unactivated account: %+v %v", a, err)
	}

	f.answer("getaccountresource", `{"freeNetLimit":600,"TotalNetLimit":43200000000,"TotalNetWeight":26000000000,
		"EnergyLimit":1200,"TotalEnergyLimit":180000000000,"TotalEnergyWeight":19000000000}`)
	res, err := c.GetAccountResource(ctx, who)
	if err != nil {
		t.Fatal(err)
	}
	energy, err := EnergyForBalance(1_000*SunPerTRX, res.TotalEnergyLimit, res.TotalEnergyWeight)
	if err != nil || energy != 9473 { // 1000 × 180e9 / 19e9 = 9473.68
		t.Fatalf("energy for 1000 TRX = %d, %v", energy, err)
	}

	f.answer("getdelegatedresourcev2", `{"delegatedResource":[{"from":"`+who.String()+`","to":"`+usdtB58+`","frozen_balance_for_energy":5000000000,"expire_time_for_energy":1735776000000}]}`)
	dl, err := c.GetDelegatedResourceV2(ctx, who, MustAddress(usdtB58))
	if err != nil || len(dl) != 1 || dl[0].FrozenBalanceForEnergy != 5_000_000_000 || dl[0].ExpireTimeForEnergy != 1735776000000 {
		t.Fatalf("delegations %+v %v", dl, err)
	}
	if body := f.body("getdelegatedresourcev2"); body["fromAddress"] != who.String() || body["toAddress"] != usdtB58 {
		t.Fatalf("getdelegatedresourcev2 body %v", body)
	}
	f.answer("getdelegatedresourcev2", "{}")
	if dl, err := c.GetDelegatedResourceV2(ctx, who, who); err != nil || len(dl) != 0 {
		t.Fatalf("no delegations: %v %v", dl, err)
	}

	f.answer("getcandelegatedmaxsize", `{"max_size":400000000000}`)
	if n, err := c.GetCanDelegatedMaxSize(ctx, who, Energy); err != nil || n != 400_000_000_000 {
		t.Fatalf("max size %d %v", n, err)
	}
	if body := f.body("getcandelegatedmaxsize"); body["type"] != float64(1) || body["owner_address"] != who.String() {
		t.Fatalf("getcandelegatedmaxsize body %v", body)
	}

	f.answer("getchainparameters", `{"chainParameter":[{"key":"getMaintenanceTimeInterval","value":21600000},{"key":"getEnergyFee","value":100},{"key":"getAllowTvmCompatibleEvm"}]}`)
	p, err := c.GetChainParameters(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if v, ok := p.Get("getEnergyFee"); !ok || v != 100 {
		t.Fatalf("getEnergyFee = %d %v", v, ok)
	}
	if v, ok := p.Get("getAllowTvmCompatibleEvm"); !ok || v != 0 {
		t.Fatalf("zero-valued parameter = %d %v", v, ok)
	}
	if _, ok := p.Get("getNothing"); ok {
		t.Fatal("unknown parameter found")
	}
}

func TestClientTransactionInfo(t *testing.T) {
	f, c := newFakeNode(t)
	ctx := context.Background()
	from, to := testKey(t, 1).Address(), testKey(t, 2).Address()
	usdt := MustAddress(usdtB58)
	lg, err := TransferLog(usdt, from, to, big.NewInt(2_500_000))
	if err != nil {
		t.Fatal(err)
	}
	logJSON, _ := json.Marshal(lg)
	info := `{"id":"` + strings.Repeat("ab", 32) + `","fee":6432900,"blockNumber":70000001,"blockTimeStamp":1735689603000,
		"contractResult":["0000000000000000000000000000000000000000000000000000000000000001"],
		"contract_address":"41a614f803b6fd780986a42c78ec9c7f77e6ded13c",
		"receipt":{"energy_usage_total":64285,"energy_fee":6428500,"net_usage":345,"result":"SUCCESS"},
		"log":[` + string(logJSON) + `]}`
	f.answer("gettransactioninfobyid", info)
	ti, err := c.GetTransactionInfoByID(ctx, strings.Repeat("ab", 32))
	if err != nil {
		t.Fatal(err)
	}
	if ti.Failed() || ti.Receipt.EnergyUsageTotal != 64285 || ti.BlockNumber != 70000001 {
		t.Fatalf("info decoded as %+v", ti)
	}
	ev, ok, err := DecodeTransferLog(ti.Log[0])
	if err != nil || !ok || ev.Token != usdt || ev.From != from || ev.To != to || ev.Amount.Int64() != 2_500_000 {
		t.Fatalf("Transfer log decoded as %+v %v %v", ev, ok, err)
	}
	if f.body("gettransactioninfobyid")["value"] != strings.Repeat("ab", 32) {
		t.Fatalf("gettransactioninfobyid body %v", f.body("gettransactioninfobyid"))
	}

	f.answer("gettransactioninfobyid", "{}")
	if _, err := c.GetTransactionInfoByID(ctx, strings.Repeat("cd", 32)); !errors.Is(err, ErrNotFound) {
		t.Fatalf("pending transaction: err = %v", err)
	}

	failed := `{"id":"` + strings.Repeat("ef", 32) + `","blockNumber":5,"receipt":{"energy_usage_total":100,"result":"OUT_OF_ENERGY"},"result":"FAILED","resMessage":"` + hex.EncodeToString([]byte("Not enough energy")) + `"}`
	f.answer("gettransactioninfobyblocknum", `[`+info+`,`+failed+`]`)
	infos, err := c.GetTransactionInfoByBlockNum(ctx, 5)
	if err != nil || len(infos) != 2 || !infos[1].Failed() || DecodeHexText(infos[1].ResMessage) != "Not enough energy" {
		t.Fatalf("block infos %+v %v", infos, err)
	}
	f.answer("gettransactioninfobyblocknum", "{}")
	if infos, err := c.GetTransactionInfoByBlockNum(ctx, 6); err != nil || len(infos) != 0 {
		t.Fatalf("empty block infos %v %v", infos, err)
	}
}

// The whole flow a processor runs: ask the node to build, check against the intent, sign,
// broadcast the JSON unchanged.
func TestClientBuildCheckSignBroadcast(t *testing.T) {
	f, c := newFakeNode(t)
	ctx := context.Background()
	owner, recv := testKey(t, 1), testKey(t, 2).Address()
	intent := &DelegateResourceContract{OwnerAddress: owner.Address(), ReceiverAddress: recv, Resource: Energy,
		Balance: 3_000_000_000, Lock: true, LockPeriod: 1200}

	f.handlers["delegateresource"] = func(body map[string]any) (int, string) {
		// Build from the request the way java-tron would.
		d := &DelegateResourceContract{Lock: body["lock"] == true}
		d.OwnerAddress, _ = ParseAddress(body["owner_address"].(string))
		d.ReceiverAddress, _ = ParseAddress(body["receiver_address"].(string))
		d.Resource, _ = ParseResourceCode(body["resource"].(string))
		d.Balance = int64(body["balance"].(float64))
		d.LockPeriod = int64(body["lock_period"].(float64))
		tx, err := NewTransaction(&RawData{RefBlockBytes: []byte{1, 2}, RefBlockHash: make([]byte, 8),
			Expiration: time.Now().Add(time.Minute).UnixMilli(), Timestamp: time.Now().UnixMilli(), Contract: d}, true)
		if err != nil {
			t.Error(err)
		}
		b, _ := json.Marshal(tx)
		return http.StatusOK, string(b)
	}
	f.handlers["broadcasttransaction"] = func(map[string]any) (int, string) {
		var tx Transaction
		if err := json.Unmarshal(f.rawBody("broadcasttransaction"), &tx); err != nil {
			t.Error(err)
		}
		if _, err := VerifyTransaction(&tx); err != nil {
			return http.StatusOK, `{"code":"SIGERROR","message":"` + hex.EncodeToString([]byte("validate signature error")) + `","txid":"` + tx.TxID + `"}`
		}
		return http.StatusOK, `{"result":true,"txid":"` + tx.TxID + `"}`
	}

	tx, err := c.DelegateResource(ctx, intent)
	if err != nil {
		t.Fatal(err)
	}
	if body := f.body("delegateresource"); body["resource"] != "ENERGY" || body["lock"] != true || body["visible"] != true {
		t.Fatalf("delegateresource body %v", body)
	}
	if _, err := CheckBuilt(tx, Intent{Contract: intent, Now: time.Now()}); err != nil {
		t.Fatal(err)
	}
	// Broadcasting before signing is refused by the node with a decoded message.
	_, err = c.BroadcastTransaction(ctx, tx)
	var ne *NodeError
	if !errors.As(err, &ne) || ne.Code != CodeSigError || ne.Message != "validate signature error" || errors.Is(err, ErrNodeUnavailable) {
		t.Fatalf("unsigned broadcast: err = %v", err)
	}
	if err := SignTransaction(tx, owner); err != nil {
		t.Fatal(err)
	}
	res, err := c.BroadcastTransaction(ctx, tx)
	if err != nil || res.TxID != tx.TxID {
		t.Fatalf("broadcast: %+v %v", res, err)
	}
	var sent Transaction
	if err := json.Unmarshal(f.rawBody("broadcasttransaction"), &sent); err != nil {
		t.Fatal(err)
	}
	if string(sent.RawData) != string(tx.RawData) || sent.Visible != tx.Visible || len(sent.Signature) != 1 {
		t.Fatalf("transaction was altered on the way:\n sent %s\n built %s", sent.RawData, tx.RawData)
	}
}

func TestClientTriggerConstantContract(t *testing.T) {
	f, c := newFakeNode(t)
	ctx := context.Background()
	owner, to := testKey(t, 1).Address(), testKey(t, 2).Address()
	data, _ := TRC20TransferData(to, big.NewInt(1_000_000))
	call := &TriggerSmartContract{OwnerAddress: owner, ContractAddress: MustAddress(usdtB58), Data: data}

	f.answer("triggerconstantcontract", `{"result":{"result":true},"energy_used":64285,
		"constant_result":["0000000000000000000000000000000000000000000000000000000000000001"],
		"transaction":{"ret":[{}],"visible":true,"txID":"00","raw_data":{},"raw_data_hex":"00"}}`)
	ext, err := c.TriggerConstantContract(ctx, call)
	if err != nil || ext.EnergyUsed != 64285 {
		t.Fatalf("estimate: %+v %v", ext, err)
	}
	if v, err := DecodeUint256(ext.ConstantResult[0]); err != nil || v.Int64() != 1 {
		t.Fatalf("constant result %v %v", v, err)
	}
	if body := f.body("triggerconstantcontract"); body["data"] != hex.EncodeToString(data) || body["contract_address"] != usdtB58 {
		t.Fatalf("triggerconstantcontract body %v", body)
	}

	f.answer("triggerconstantcontract", `{"result":{"code":"CONTRACT_VALIDATE_ERROR","message":"`+
		hex.EncodeToString([]byte("No contract or not a valid smart contract"))+`"}}`)
	_, err = c.TriggerConstantContract(ctx, call)
	var ne *NodeError
	if !errors.As(err, &ne) || ne.Code != CodeContractValidate || ne.Message != "No contract or not a valid smart contract" {
		t.Fatalf("refused call: err = %v", err)
	}
}

func TestClientErrorMapping(t *testing.T) {
	f, c := newFakeNode(t)
	ctx := context.Background()
	who := testKey(t, 1).Address()

	f.answer("createtransaction", `{"Error":"class org.tron.core.exception.ContractValidateException : Validate TransferContract error, balance is not sufficient."}`)
	_, err := c.CreateTransaction(ctx, &TransferContract{OwnerAddress: who, ToAddress: who, Amount: 1})
	var ne *NodeError
	if !errors.As(err, &ne) || !strings.Contains(ne.Message, "balance is not sufficient") || errors.Is(err, ErrNodeUnavailable) {
		t.Fatalf("{Error} body: err = %v", err)
	}

	// node_down as the simulator does it: 503 for a while.
	f.handlers["getnowblock"] = func(map[string]any) (int, string) { return http.StatusServiceUnavailable, `{"Error":"node down"}` }
	if _, err := c.GetNowBlock(ctx); !errors.Is(err, ErrNodeUnavailable) {
		t.Fatalf("503: err = %v", err)
	}
	// A proxy's HTML error page with status 200 is not an answer either.
	f.answer("getchainparameters", "<html>bad gateway</html>")
	if _, err := c.GetChainParameters(ctx); !errors.Is(err, ErrNodeUnavailable) {
		t.Fatalf("HTML body: err = %v", err)
	}
	// An endpoint the node does not serve is a configuration error, not an outage.
	if _, err := c.GetTransactionByID(ctx, "00"); err == nil || errors.Is(err, ErrNodeUnavailable) {
		t.Fatalf("404: err = %v", err)
	}

	// The per-call timeout is an outage; the caller's own cancellation is not.
	release := make(chan struct{})
	f.handlers["getaccount"] = func(map[string]any) (int, string) { <-release; return http.StatusOK, "{}" }
	defer close(release)
	slow := NewClient(c.base, WithTimeout(50*time.Millisecond))
	if _, err := slow.GetAccount(ctx, who); !errors.Is(err, ErrNodeUnavailable) {
		t.Fatalf("timeout: err = %v", err)
	}
	cctx, cancel := context.WithCancel(ctx)
	time.AfterFunc(20*time.Millisecond, cancel)
	if _, err := c.GetAccount(cctx, who); !errors.Is(err, context.Canceled) || errors.Is(err, ErrNodeUnavailable) {
		t.Fatalf("cancelled: err = %v", err)
	}
}

func TestClientConnectionRefused(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // nothing listens there now
	c := NewClient("http://"+addr, WithTimeout(time.Second))
	_, err = c.GetNowBlock(context.Background())
	var ue *UnavailableError
	if !errors.Is(err, ErrNodeUnavailable) || !errors.As(err, &ue) || ue.Endpoint != "getnowblock" {
		t.Fatalf("connection refused: err = %v", err)
	}
}

// GetHead asks getblock without detail; a node that does not serve getblock (404) is asked
// getnowblock, whose transactions are then dropped all the same.
func TestClientHead(t *testing.T) {
	f, c := newFakeNode(t)
	ctx := context.Background()
	header := `{"blockID":"0000000000000065aa","block_header":{"raw_data":{"number":101,"parentHash":"0000000000000064bb","timestamp":1735689603000},"witness_signature":"ab"}}`
	f.answer("getnowblock", `{"blockID":"0000000000000064bb","block_header":{"raw_data":{"number":100}},"transactions":[{"txID":"01"}]}`)

	b, err := c.GetHead(ctx)
	if err != nil || b.Number() != 100 || len(b.Transactions) != 0 {
		t.Fatalf("without getblock: %+v, %v; want getnowblock's block 100 without its transactions", b, err)
	}
	// A node that answered 404 is not asked getblock again.
	f.mu.Lock()
	delete(f.bodies, "getblock")
	f.mu.Unlock()
	f.answer("getblock", header)
	if b, err := c.GetHead(ctx); err != nil || b.Number() != 100 || f.body("getblock") != nil {
		t.Fatalf("after a 404: block %+v, %v; getblock asked again: %v", b, err, f.body("getblock") != nil)
	}
	c = NewClient(c.base, WithTimeout(2*time.Second))
	b, err = c.GetHead(ctx)
	if err != nil || b.Number() != 101 || b.Timestamp() != 1735689603000 || b.BlockID != "0000000000000065aa" {
		t.Fatalf("getblock: %+v, %v", b, err)
	}
	if got := f.body("getblock"); got["detail"] != false || got["visible"] != true || got["id_or_num"] != nil {
		t.Fatalf("getblock body %v: want the head, without detail", got)
	}
	f.answer("getblock", "{}")
	if _, err := c.GetHead(ctx); !errors.Is(err, ErrNotFound) {
		t.Fatalf("{}: err = %v, want ErrNotFound", err)
	}
	f.answer("getblock", `{"blockID":"00","block_header":`) // cut short
	if _, err := c.GetHead(ctx); !errors.Is(err, ErrNodeUnavailable) {
		t.Fatalf("a body cut short: err = %v, want ErrNodeUnavailable", err)
	}
}
