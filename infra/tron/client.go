package tron

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"
)

// ErrNodeUnavailable is matched (errors.Is) by every failure to get an answer from the
// node: connection refused or reset, the per-call timeout, HTTP 5xx and 429, and a body
// that is not JSON (a proxy's error page). The call may be retried later; the edge maps
// it to 5003 chain_unavailable.
var ErrNodeUnavailable = errors.New("tron node unavailable")

// ErrNotFound is returned by lookups whose object the node does not have (a block above
// the head, a transaction id not yet in a block); java-tron answers "{}" for those.
var ErrNotFound = errors.New("tron: not found")

// UnavailableError carries the cause of an ErrNodeUnavailable.
type UnavailableError struct {
	Endpoint string
	Status   int   // HTTP status, 0 when no response came
	Err      error // transport error, if any
}

func (e *UnavailableError) Error() string {
	if e.Status != 0 {
		return fmt.Sprintf("tron node unavailable: %s: HTTP %d", e.Endpoint, e.Status)
	}
	return fmt.Sprintf("tron node unavailable: %s: %v", e.Endpoint, e.Err)
}

// Is makes errors.Is(err, ErrNodeUnavailable) true.
func (e *UnavailableError) Is(target error) bool { return target == ErrNodeUnavailable }

// Unwrap exposes the transport error.
func (e *UnavailableError) Unwrap() error { return e.Err }

// Return codes of api.Return that callers act on.
const (
	CodeSigError           = "SIGERROR"
	CodeContractValidate   = "CONTRACT_VALIDATE_ERROR"
	CodeContractExe        = "CONTRACT_EXE_ERROR"
	CodeBandwidth          = "BANDWITH_ERROR" // java-tron's spelling
	CodeDupTransaction     = "DUP_TRANSACTION_ERROR"
	CodeTaposError         = "TAPOS_ERROR"
	CodeTooBigTransaction  = "TOO_BIG_TRANSACTION_ERROR"
	CodeTransactionExpired = "TRANSACTION_EXPIRATION_ERROR"
	CodeServerBusy         = "SERVER_BUSY"
	CodeNoConnection       = "NO_CONNECTION"
	CodeNotEnoughConn      = "NOT_ENOUGH_EFFECTIVE_CONNECTION"
	CodeOtherError         = "OTHER_ERROR"
)

// NodeError is an answer in which the node refused the request: an {"Error": "..."} body,
// or a Return with result false (broadcast, trigger). Code is the response_code name
// (empty for {"Error"} bodies); Message is decoded text (java-tron hex-encodes it).
type NodeError struct {
	Endpoint string
	Code     string
	Message  string
}

func (e *NodeError) Error() string {
	if e.Code != "" {
		return fmt.Sprintf("tron node: %s: %s: %s", e.Endpoint, e.Code, e.Message)
	}
	return fmt.Sprintf("tron node: %s: %s", e.Endpoint, e.Message)
}

// Temporary reports codes after which the same signed transaction may be broadcast again
// (the node was busy or poorly connected), as opposed to a transaction that is wrong.
func (e *NodeError) Temporary() bool {
	return e.Code != "" && classifyCode(e.Code, e.Message) == Temporary
}

// Client talks to a java-tron full node's HTTP API (/wallet/*), or to the simulator that
// serves the same API. It is safe for concurrent use. Requests are POST with JSON bodies
// and visible=true, so addresses go out in Base58Check; responses are read in either form.
type Client struct {
	base    string
	http    *http.Client
	timeout time.Duration
	headers http.Header
	// noGetBlock holds the API roots ("/wallet/", "/walletsolidity/") that answered 404
	// for getblock: the head is read there with getnowblock without asking again.
	noGetBlock sync.Map
}

// Option configures a Client.
type Option func(*Client)

// WithHTTPClient replaces the HTTP client (transport, proxies, TLS).
func WithHTTPClient(h *http.Client) Option { return func(c *Client) { c.http = h } }

// WithTimeout bounds every call (default 10 s). Hitting it is ErrNodeUnavailable.
func WithTimeout(d time.Duration) Option { return func(c *Client) { c.timeout = d } }

// WithHeader adds a header to every request, such as TronGrid's TRON-PRO-API-KEY. Header
// values are never logged by the client.
func WithHeader(key, value string) Option {
	return func(c *Client) { c.headers.Set(key, value) }
}

// maxIdlePerHost is how many idle connections to the node a client keeps. net/http's
// default of 2 closes a connection after nearly every call once more than two calls run at
// once (a delivery group builds up to 16 transactions concurrently), and dialing again
// cost more CPU than the calls themselves.
const maxIdlePerHost = 64

// NewClient returns a client for the node at baseURL, e.g. "http://127.0.0.1:8090".
func NewClient(baseURL string, opts ...Option) *Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConns, t.MaxIdleConnsPerHost = maxIdlePerHost, maxIdlePerHost
	c := &Client{
		base:    strings.TrimRight(baseURL, "/"),
		http:    &http.Client{Transport: t},
		timeout: 10 * time.Second,
		headers: http.Header{},
	}
	for _, o := range opts {
		o(c)
	}
	return c
}

// maxBody bounds a response; getblockbylimitnext over 100 full blocks stays far below.
const maxBody = 256 << 20

// post sends body to /wallet/<endpoint> and returns the raw JSON answer after mapping
// transport failures and {"Error": ...} bodies.
func (c *Client) post(ctx context.Context, endpoint string, body any) ([]byte, error) {
	return c.postAt(ctx, "/wallet/", endpoint, body)
}

// postAt is post under another API root (/walletsolidity/ serves the solidified view).
func (c *Client) postAt(ctx context.Context, root, endpoint string, body any) ([]byte, error) {
	reqBody, err := json.Marshal(body)
	if err != nil {
		return nil, fmt.Errorf("tron: %s: encode request: %w", endpoint, err)
	}
	callCtx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(callCtx, http.MethodPost, c.base+root+endpoint, bytes.NewReader(reqBody))
	if err != nil {
		return nil, fmt.Errorf("tron: %s: %w", endpoint, err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	for k, v := range c.headers {
		req.Header[k] = v
	}
	resp, err := c.http.Do(req)
	if err != nil {
		// The caller's own cancellation is not the node's fault.
		if ctx.Err() != nil {
			return nil, fmt.Errorf("tron: %s: %w", endpoint, ctx.Err())
		}
		return nil, &UnavailableError{Endpoint: endpoint, Err: err}
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("tron: %s: %w", endpoint, ctx.Err())
		}
		return nil, &UnavailableError{Endpoint: endpoint, Status: 0, Err: err}
	}
	if resp.StatusCode >= 500 || resp.StatusCode == http.StatusTooManyRequests {
		return nil, &UnavailableError{Endpoint: endpoint, Status: resp.StatusCode}
	}
	if resp.StatusCode != http.StatusOK {
		return nil, &statusError{endpoint: endpoint, status: resp.StatusCode, body: snippet(data)}
	}
	data = bytes.TrimSpace(data)
	// Only the first byte is looked at here: the decoder reads the whole answer anyway, and
	// decode maps what it finds malformed to ErrNodeUnavailable the same way (validating a
	// block list twice was a measurable part of following the chain).
	if len(data) == 0 || (data[0] != '{' && data[0] != '[') {
		return nil, notJSON(endpoint, data)
	}
	if bytes.HasPrefix(data, []byte("{")) && bytes.Contains(data, []byte(`"Error"`)) {
		var ne nodeError
		if json.Unmarshal(data, &ne) == nil && ne.Error != "" {
			return nil, &NodeError{Endpoint: endpoint, Message: ne.Error}
		}
	}
	return data, nil
}

// statusError is an answer with an HTTP status other than 200 that is not an outage (a
// 404 for an endpoint the node does not serve).
type statusError struct {
	endpoint string
	status   int
	body     string
}

func (e *statusError) Error() string {
	return fmt.Sprintf("tron: %s: HTTP %d: %s", e.endpoint, e.status, e.body)
}

func notJSON(endpoint string, data []byte) error {
	return &UnavailableError{Endpoint: endpoint, Status: http.StatusOK, Err: fmt.Errorf("answer is not JSON: %s", snippet(data))}
}

// decode reads an answer of postAt into out. An answer that is not well-formed JSON (a
// proxy's page, a body cut short) is ErrNodeUnavailable; one that is JSON of another shape
// is a plain error.
func decode(endpoint string, data []byte, out any) error {
	err := json.Unmarshal(data, out)
	var se *json.SyntaxError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &se):
		return notJSON(endpoint, data)
	}
	return fmt.Errorf("tron: %s: decode answer: %w", endpoint, err)
}

func snippet(b []byte) string {
	if len(b) > 200 {
		b = b[:200]
	}
	return string(b)
}

func (c *Client) call(ctx context.Context, endpoint string, body, out any) error {
	data, err := c.post(ctx, endpoint, body)
	if err != nil {
		return err
	}
	return decode(endpoint, data, out)
}

type visibleOnly struct {
	Visible bool `json:"visible"`
}

// GetNowBlock returns the head block.
func (c *Client) GetNowBlock(ctx context.Context) (*Block, error) {
	var b Block
	if err := c.call(ctx, "getnowblock", visibleOnly{true}, &b); err != nil {
		return nil, err
	}
	if b.BlockID == "" {
		return nil, fmt.Errorf("tron: getnowblock: %w", ErrNotFound)
	}
	return &b, nil
}

// GetSolidBlock returns the newest solidified block (/walletsolidity/getnowblock): the
// deepest block the network can no longer reverse.
func (c *Client) GetSolidBlock(ctx context.Context) (*Block, error) {
	data, err := c.postAt(ctx, "/walletsolidity/", "getnowblock", visibleOnly{true})
	if err != nil {
		return nil, err
	}
	var b Block
	if err := decode("walletsolidity/getnowblock", data, &b); err != nil {
		return nil, err
	}
	if b.BlockID == "" {
		return nil, fmt.Errorf("tron: walletsolidity/getnowblock: %w", ErrNotFound)
	}
	return &b, nil
}

// GetHead returns the head block without its transactions: its number, id, parent and
// time, for callers that need no more. It asks /wallet/getblock with detail false, which
// answers in a few hundred bytes where getnowblock sends every transaction of the block
// (hundreds under load); a node that does not serve getblock (a java-tron older than the
// endpoint) is asked getnowblock instead.
func (c *Client) GetHead(ctx context.Context) (*Block, error) {
	return c.head(ctx, "/wallet/", c.GetNowBlock)
}

// GetSolidHead is GetHead for the newest solidified block (/walletsolidity/getblock).
func (c *Client) GetSolidHead(ctx context.Context) (*Block, error) {
	return c.head(ctx, "/walletsolidity/", c.GetSolidBlock)
}

func (c *Client) head(ctx context.Context, root string, whole func(context.Context) (*Block, error)) (*Block, error) {
	if _, missing := c.noGetBlock.Load(root); missing {
		return withoutTxs(whole(ctx))
	}
	data, err := c.postAt(ctx, root, "getblock", blockRequest{Detail: false, Visible: true})
	if se := (*statusError)(nil); errors.As(err, &se) && se.status == http.StatusNotFound {
		c.noGetBlock.Store(root, true)
		return withoutTxs(whole(ctx))
	}
	if err != nil {
		return nil, err
	}
	var b Block
	if err := decode(root[1:]+"getblock", data, &b); err != nil {
		return nil, err
	}
	if b.BlockID == "" {
		return nil, fmt.Errorf("tron: %sgetblock: %w", root[1:], ErrNotFound)
	}
	return withoutTxs(&b, nil)
}

func withoutTxs(b *Block, err error) (*Block, error) {
	if err != nil {
		return nil, err
	}
	b.Transactions = nil
	return b, nil
}

// blockRequest is /wallet/getblock's body; an absent id_or_num means the head.
type blockRequest struct {
	IDOrNum string `json:"id_or_num,omitempty"`
	Detail  bool   `json:"detail"`
	Visible bool   `json:"visible"`
}

// GetBlockByNum returns block num, or ErrNotFound above the head.
func (c *Client) GetBlockByNum(ctx context.Context, num int64) (*Block, error) {
	var b Block
	if err := c.call(ctx, "getblockbynum", NumRequest{Num: num, Visible: true}, &b); err != nil {
		return nil, err
	}
	if b.BlockID == "" {
		return nil, fmt.Errorf("tron: getblockbynum %d: %w", num, ErrNotFound)
	}
	return &b, nil
}

// MaxBlocksPerRange is java-tron's cap on getblockbylimitnext (BLOCK_LIMIT_NUM); larger
// ranges are refused.
const MaxBlocksPerRange = 100

// GetBlockByLimitNext returns the blocks numbered [start, end) that exist, in order; it
// is how chainwatch catches up. end-start must not exceed MaxBlocksPerRange.
func (c *Client) GetBlockByLimitNext(ctx context.Context, start, end int64) ([]Block, error) {
	if end <= start || end-start > MaxBlocksPerRange {
		return nil, fmt.Errorf("tron: getblockbylimitnext: range [%d, %d) must hold 1..%d blocks", start, end, MaxBlocksPerRange)
	}
	var l BlockList
	if err := c.call(ctx, "getblockbylimitnext", BlockLimitRequest{StartNum: start, EndNum: end, Visible: true}, &l); err != nil {
		return nil, err
	}
	return l.Block, nil
}

// GetTransactionInfoByBlockNum returns the execution results of every transaction of
// block num (an empty list for an empty or unknown block).
func (c *Client) GetTransactionInfoByBlockNum(ctx context.Context, num int64) ([]TransactionInfo, error) {
	data, err := c.post(ctx, "gettransactioninfobyblocknum", NumRequest{Num: num, Visible: true})
	if err != nil {
		return nil, err
	}
	if bytes.HasPrefix(data, []byte("{")) { // "{}": nothing there
		return nil, nil
	}
	var infos []TransactionInfo
	if err := decode("gettransactioninfobyblocknum", data, &infos); err != nil {
		return nil, err
	}
	return infos, nil
}

// GetAccount returns the account; a never-activated address gives an Account whose
// Exists is false, not an error.
func (c *Client) GetAccount(ctx context.Context, addr Address) (*Account, error) {
	var a Account
	if err := c.call(ctx, "getaccount", AddressRequest{Address: addr.String(), Visible: true}, &a); err != nil {
		return nil, err
	}
	return &a, nil
}

// GetAccountResource returns the account's resource view, including the network totals
// (TotalEnergyLimit, TotalEnergyWeight) that EnergyForBalance needs.
func (c *Client) GetAccountResource(ctx context.Context, addr Address) (*AccountResource, error) {
	var r AccountResource
	if err := c.call(ctx, "getaccountresource", AddressRequest{Address: addr.String(), Visible: true}, &r); err != nil {
		return nil, err
	}
	return &r, nil
}

// GetDelegatedResourceV2 returns the stake-2.0 delegations from one account to another
// (empty when there is none).
func (c *Client) GetDelegatedResourceV2(ctx context.Context, from, to Address) ([]DelegatedResource, error) {
	var l DelegatedResourceList
	req := DelegatedResourceRequest{FromAddress: from.String(), ToAddress: to.String(), Visible: true}
	if err := c.call(ctx, "getdelegatedresourcev2", req, &l); err != nil {
		return nil, err
	}
	return l.DelegatedResource, nil
}

// GetCanDelegatedMaxSize returns how much staked balance (SUN) owner can still delegate
// for resource.
func (c *Client) GetCanDelegatedMaxSize(ctx context.Context, owner Address, resource ResourceCode) (int64, error) {
	var r CanDelegatedMaxSize
	req := CanDelegatedMaxSizeRequest{OwnerAddress: owner.String(), Type: int32(resource), Visible: true}
	if err := c.call(ctx, "getcandelegatedmaxsize", req, &r); err != nil {
		return 0, err
	}
	return r.MaxSize, nil
}

// The create calls return an unsigned transaction built by the node. Check it with
// CheckBuilt against the same contract before signing, then broadcast it unchanged.

func (c *Client) create(ctx context.Context, endpoint string, req any) (*Transaction, error) {
	var tx Transaction
	if err := c.call(ctx, endpoint, req, &tx); err != nil {
		return nil, err
	}
	if tx.TxID == "" || tx.RawDataHex == "" {
		return nil, fmt.Errorf("tron: %s: answer holds no transaction", endpoint)
	}
	return &tx, nil
}

// DelegateResource asks the node to build a DelegateResourceContract transaction.
func (c *Client) DelegateResource(ctx context.Context, d *DelegateResourceContract) (*Transaction, error) {
	return c.create(ctx, "delegateresource", DelegateResourceRequest{
		OwnerAddress:    d.OwnerAddress.String(),
		ReceiverAddress: d.ReceiverAddress.String(),
		Balance:         d.Balance,
		Resource:        d.Resource.String(),
		Lock:            d.Lock,
		LockPeriod:      d.LockPeriod,
		Visible:         true,
	})
}

// UnDelegateResource asks the node to build an UnDelegateResourceContract transaction.
func (c *Client) UnDelegateResource(ctx context.Context, u *UnDelegateResourceContract) (*Transaction, error) {
	return c.create(ctx, "undelegateresource", UnDelegateResourceRequest{
		OwnerAddress:    u.OwnerAddress.String(),
		ReceiverAddress: u.ReceiverAddress.String(),
		Balance:         u.Balance,
		Resource:        u.Resource.String(),
		Visible:         true,
	})
}

// CreateTransaction asks the node to build a TRX transfer (which also activates To).
func (c *Client) CreateTransaction(ctx context.Context, t *TransferContract) (*Transaction, error) {
	return c.create(ctx, "createtransaction", CreateTransactionRequest{
		OwnerAddress: t.OwnerAddress.String(),
		ToAddress:    t.ToAddress.String(),
		Amount:       t.Amount,
		Visible:      true,
	})
}

// CreateAccount asks the node to build an AccountCreateContract transaction.
func (c *Client) CreateAccount(ctx context.Context, a *AccountCreateContract) (*Transaction, error) {
	return c.create(ctx, "createaccount", CreateAccountRequest{
		OwnerAddress:   a.OwnerAddress.String(),
		AccountAddress: a.AccountAddress.String(),
		Visible:        true,
	})
}

func triggerRequest(t *TriggerSmartContract, feeLimit int64) TriggerSmartContractRequest {
	return TriggerSmartContractRequest{
		OwnerAddress:    t.OwnerAddress.String(),
		ContractAddress: t.ContractAddress.String(),
		Data:            hex.EncodeToString(t.Data),
		FeeLimit:        feeLimit,
		CallValue:       t.CallValue,
		Visible:         true,
	}
}

func (c *Client) trigger(ctx context.Context, endpoint string, req TriggerSmartContractRequest) (*TransactionExtention, error) {
	var ext TransactionExtention
	if err := c.call(ctx, endpoint, req, &ext); err != nil {
		return nil, err
	}
	if !ext.Result.Result {
		return nil, &NodeError{Endpoint: endpoint, Code: ext.Result.Code, Message: ext.Result.MessageText()}
	}
	return &ext, nil
}

// TriggerSmartContract asks the node to build a contract call with the whole call data in
// t.Data (for example TRC20TransferData) and fee_limit in SUN. The node also runs the call
// to check it; a refusal is a NodeError.
func (c *Client) TriggerSmartContract(ctx context.Context, t *TriggerSmartContract, feeLimit int64) (*Transaction, error) {
	ext, err := c.trigger(ctx, "triggersmartcontract", triggerRequest(t, feeLimit))
	if err != nil {
		return nil, err
	}
	if ext.Transaction == nil || ext.Transaction.RawDataHex == "" {
		return nil, errors.New("tron: triggersmartcontract: answer holds no transaction")
	}
	return ext.Transaction, nil
}

// TriggerConstantContract runs a call without a transaction: balanceOf reads, and energy
// estimates (EnergyUsed) for a transfer(address,uint256). ConstantResult holds the return
// words; a revert shows in Transaction.Ret and ConstantResult, not as an error.
func (c *Client) TriggerConstantContract(ctx context.Context, t *TriggerSmartContract) (*TransactionExtention, error) {
	return c.trigger(ctx, "triggerconstantcontract", triggerRequest(t, 0))
}

// BroadcastTransaction sends a signed transaction exactly as the node built it. A refusal
// is a NodeError with the Return code (DUP_TRANSACTION_ERROR means the network already has
// it). The txid the node computed must equal the transaction's.
func (c *Client) BroadcastTransaction(ctx context.Context, tx *Transaction) (*BroadcastResult, error) {
	var r BroadcastResult
	if err := c.call(ctx, "broadcasttransaction", tx, &r); err != nil {
		return nil, err
	}
	if !r.Result {
		return &r, &NodeError{Endpoint: "broadcasttransaction", Code: r.Code, Message: r.MessageText()}
	}
	if r.TxID != "" && !strings.EqualFold(r.TxID, tx.TxID) {
		return &r, fmt.Errorf("%w: node computed txid %s for %s", ErrTxMismatch, r.TxID, tx.TxID)
	}
	return &r, nil
}

// GetTransactionByID returns a transaction known to the node (pending or in a block).
func (c *Client) GetTransactionByID(ctx context.Context, txid string) (*Transaction, error) {
	var tx Transaction
	if err := c.call(ctx, "gettransactionbyid", ValueRequest{Value: txid, Visible: true}, &tx); err != nil {
		return nil, err
	}
	if tx.TxID == "" {
		return nil, fmt.Errorf("tron: gettransactionbyid %s: %w", txid, ErrNotFound)
	}
	return &tx, nil
}

// GetTransactionInfoByID returns the execution result of a transaction once it is in a
// block; before that, ErrNotFound.
func (c *Client) GetTransactionInfoByID(ctx context.Context, txid string) (*TransactionInfo, error) {
	var ti TransactionInfo
	if err := c.call(ctx, "gettransactioninfobyid", ValueRequest{Value: txid, Visible: true}, &ti); err != nil {
		return nil, err
	}
	if ti.ID == "" {
		return nil, fmt.Errorf("tron: gettransactioninfobyid %s: %w", txid, ErrNotFound)
	}
	return &ti, nil
}

// GetChainParameters returns the network's parameters (getEnergyFee, ...).
func (c *Client) GetChainParameters(ctx context.Context) (*ChainParameters, error) {
	var p ChainParameters
	if err := c.call(ctx, "getchainparameters", visibleOnly{true}, &p); err != nil {
		return nil, err
	}
	return &p, nil
}
