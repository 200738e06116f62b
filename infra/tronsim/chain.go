package tronsim

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/protobuf/encoding/protowire"

	"rental/infra/tron"
)

// blockVersion is the block header version java-tron 4.7+ writes.
const blockVersion = 32

// txRecord is one transaction the node knows. Once it sits in a block it is never
// modified (a fork copies it), so readers may use it without the lock.
type txRecord struct {
	ID   string
	Raw  []byte // raw_data protobuf; ID = sha256(Raw)
	Data *tron.RawData
	Sigs []string

	Block     int64 // 0 while pending
	BlockTime int64
	Result    execResult
}

// netBytes approximates java-tron's bandwidth size of the transaction: the serialized
// transaction plus MAX_RESULT_SIZE_IN_TX (64).
func (r *txRecord) netBytes() int64 {
	return int64(len(r.Raw)+3) + int64(len(r.Sigs))*67 + 64
}

// block is one produced block. Immutable after creation apart from the JSON caches.
type block struct {
	Num      int64
	ID       [32]byte
	Parent   [32]byte
	Time     int64
	Witness  tron.Address
	TrieRoot [32]byte
	Sig      []byte
	Txs      []*txRecord

	json    atomic.Pointer[[]byte] // visible=false rendering
	jsonVis atomic.Pointer[[]byte] // visible=true rendering
}

// headerRaw is protocol.BlockHeader.raw: timestamp=1, txTrieRoot=2, parentHash=3,
// number=7, witness_address=9, version=10.
func headerRaw(num, ts int64, root, parent [32]byte, witness tron.Address) []byte {
	var b []byte
	b = protowire.AppendTag(b, 1, protowire.VarintType)
	b = protowire.AppendVarint(b, uint64(ts))
	b = protowire.AppendTag(b, 2, protowire.BytesType)
	b = protowire.AppendBytes(b, root[:])
	b = protowire.AppendTag(b, 3, protowire.BytesType)
	b = protowire.AppendBytes(b, parent[:])
	if num != 0 {
		b = protowire.AppendTag(b, 7, protowire.VarintType)
		b = protowire.AppendVarint(b, uint64(num))
	}
	b = protowire.AppendTag(b, 9, protowire.BytesType)
	b = protowire.AppendBytes(b, witness[:])
	b = protowire.AppendTag(b, 10, protowire.VarintType)
	return protowire.AppendVarint(b, blockVersion)
}

// blockID is java-tron's BlockId: the 8-byte big-endian number followed by the last 24
// bytes of sha256(header raw).
func blockID(num int64, raw []byte) [32]byte {
	id := sha256.Sum256(raw)
	binary.BigEndian.PutUint64(id[:8], uint64(num))
	return id
}

// trieRoot is a binary Merkle root over the transaction ids (sha256 of each pair; an odd
// node moves up unchanged). java-tron hashes whole serialized transactions instead; no
// client recomputes it, so only determinism matters here.
func trieRoot(txs []*txRecord) [32]byte {
	if len(txs) == 0 {
		return [32]byte{}
	}
	level := make([][32]byte, len(txs))
	for i, t := range txs {
		b, _ := hex.DecodeString(t.ID)
		copy(level[i][:], b)
	}
	for len(level) > 1 {
		var next [][32]byte
		for i := 0; i < len(level); i += 2 {
			if i+1 == len(level) {
				next = append(next, level[i])
				continue
			}
			next = append(next, sha256.Sum256(append(level[i][:], level[i+1][:]...)))
		}
		level = next
	}
	return level[0]
}

func newBlock(num, ts int64, parent [32]byte, txs []*txRecord, witness tron.PrivateKey) *block {
	b := &block{Num: num, Time: ts, Parent: parent, Txs: txs, Witness: witness.Address(), TrieRoot: trieRoot(txs)}
	raw := headerRaw(num, ts, b.TrieRoot, parent, b.Witness)
	b.ID = blockID(num, raw)
	h := sha256.Sum256(raw)
	b.Sig, _ = witness.SignHash(h[:])
	return b
}

// heldTx is a transaction a slow_confirm fault keeps out of blocks until Release.
type heldTx struct {
	Rec     *txRecord
	Release int64 // first block number that may include it
}

// FaultKind names an injectable fault.
type FaultKind string

// Fault kinds of POST /sim/faults.
const (
	// FaultRejectDelegation makes the next delegate/undelegate broadcasts fail with
	// CONTRACT_VALIDATE_ERROR.
	FaultRejectDelegation FaultKind = "reject_delegation"
	// FaultDropTx makes the next broadcasts answer result:true while the transaction
	// never lands (a later re-broadcast of the same transaction is accepted normally).
	FaultDropTx FaultKind = "drop_tx"
	// FaultNodeDown makes the next /wallet and /walletsolidity calls answer 503.
	FaultNodeDown FaultKind = "node_down"
	// FaultSlowConfirm holds the next accepted transactions (broadcast or /sim) back for
	// SlowConfirmBlocks extra blocks.
	FaultSlowConfirm FaultKind = "slow_confirm"
	// The broadcast answers of java-tron's Wallet.broadcastTransaction that come before the
	// transaction reaches the pending pool (it is not taken): BLOCK_UNSOLIDIFIED,
	// NO_CONNECTION, NOT_ENOUGH_EFFECTIVE_CONNECTION and SERVER_BUSY.
	FaultBlockUnsolidified FaultKind = "block_unsolidified"
	FaultNoConnection      FaultKind = "no_connection"
	FaultNotEnoughConn     FaultKind = "not_enough_connection"
	FaultServerBusy        FaultKind = "server_busy"
	// FaultP2PFailed takes the transaction (it lands) but answers
	// NOT_ENOUGH_EFFECTIVE_CONNECTION "P2P broadcast failed.", as java-tron does when no
	// peer took a transaction it pushed.
	FaultP2PFailed FaultKind = "p2p_failed"
)

// Faults are the remaining counts of each fault.
type Faults struct {
	RejectDelegation  int64 `json:"reject_delegation"`
	DropTx            int64 `json:"drop_tx"`
	NodeDown          int64 `json:"node_down"`
	SlowConfirm       int64 `json:"slow_confirm"`
	SlowConfirmBlocks int64 `json:"slow_confirm_blocks"`
	BlockUnsolidified int64 `json:"block_unsolidified"`
	NoConnection      int64 `json:"no_connection"`
	NotEnoughConn     int64 `json:"not_enough_connection"`
	ServerBusy        int64 `json:"server_busy"`
	P2PFailed         int64 `json:"p2p_failed"`
}

func (f *Faults) counter(k FaultKind) *int64 {
	switch k {
	case FaultRejectDelegation:
		return &f.RejectDelegation
	case FaultDropTx:
		return &f.DropTx
	case FaultNodeDown:
		return &f.NodeDown
	case FaultSlowConfirm:
		return &f.SlowConfirm
	case FaultBlockUnsolidified:
		return &f.BlockUnsolidified
	case FaultNoConnection:
		return &f.NoConnection
	case FaultNotEnoughConn:
		return &f.NotEnoughConn
	case FaultServerBusy:
		return &f.ServerBusy
	case FaultP2PFailed:
		return &f.P2PFailed
	}
	return nil
}

// take consumes one unit of fault k and reports whether it was armed.
func (f *Faults) take(k FaultKind) bool {
	c := f.counter(k)
	if c == nil || *c <= 0 {
		return false
	}
	*c--
	return true
}

// Sim is a running simulated chain. Its methods are safe for concurrent use.
type Sim struct {
	opts   Options
	log    *slog.Logger
	faucet tron.PrivateKey

	mu        sync.RWMutex
	blocks    []*block
	confirmed *state
	pend      *state // confirmed + pending + held; nil until needed
	pending   []*txRecord
	held      []heldTx
	known     map[string]*txRecord
	faults    Faults
	forkGen   int64
	store     *store
	closed    bool
	deep      *DeepReserve // deep reserve terms (deep.go); nil means DefaultDeepReserve
	pool      swapPool     // the USDT/WTRX swap pool's history (swappool.go)
}

// New creates a simulator, loading the chain from opts.DataFile when it holds one.
func New(opts Options) (*Sim, error) {
	if err := opts.normalize(); err != nil {
		return nil, err
	}
	s := &Sim{
		opts:   opts,
		log:    opts.Logger,
		faucet: *opts.FaucetKey,
		known:  map[string]*txRecord{},
	}
	s.faults.SlowConfirmBlocks = opts.SlowConfirmBlocks
	if opts.DataFile != "" {
		st, loaded, err := openStore(opts.DataFile, s)
		if err != nil {
			return nil, err
		}
		s.store = st
		if loaded {
			s.log.Info("tronsim chain loaded", "file", opts.DataFile, "head", s.head().Num)
			return s, nil
		}
	}
	s.genesis()
	if s.store != nil {
		if err := s.store.rewrite(s); err != nil {
			return nil, err
		}
	}
	return s, nil
}

func (s *Sim) genesis() {
	st := newState()
	t0 := s.opts.GenesisTime.UnixMilli()
	st.seed(GenesisAccount{Address: s.faucet.Address(), BalanceSun: s.opts.FaucetBalanceSun, USDT: s.opts.FaucetUSDT}, t0)
	st.Accounts[s.opts.USDTContract] = account{CreateTime: t0, IsContract: true}
	for _, g := range s.opts.Genesis {
		st.seed(g, t0)
	}
	s.confirmed = st
	s.blocks = []*block{newBlock(0, t0, [32]byte{}, nil, witnessKey(0))}
}

func (s *Sim) head() *block { return s.blocks[len(s.blocks)-1] }

// chainTime is the timestamp of block num.
func (s *Sim) chainTime(num int64) int64 {
	return s.opts.GenesisTime.UnixMilli() + num*BlockTimeMs
}

func (s *Sim) ctxFor(num int64) execCtx {
	return execCtx{now: s.chainTime(num - 1), num: num, p: s.opts.Params, usdt: s.opts.USDTContract, deep: s.deepLocked()}
}

// view is the state validations read: pending effects included. Do not mutate it.
func (s *Sim) viewLocked() *state {
	if s.pend != nil {
		return s.pend
	}
	return s.confirmed
}

// pendLocked returns the mutable pending state, rebuilding it from the confirmed state
// and the held transactions after a block.
func (s *Sim) pendLocked() *state {
	if s.pend != nil {
		return s.pend
	}
	s.pend = s.confirmed.clone()
	ctx := s.ctxFor(s.head().Num + 1)
	s.pend.endDeepRentals(ctx.now)
	for _, list := range [][]*txRecord{s.heldRecs(), s.pending} {
		for _, r := range list {
			ctx.feeLimit, ctx.sigs = r.Data.FeeLimit, len(r.Sigs)
			_, _ = s.pend.execute(ctx, r.Data.Contract, r.netBytes())
		}
	}
	return s.pend
}

func (s *Sim) heldRecs() []*txRecord {
	out := make([]*txRecord, len(s.held))
	for i, h := range s.held {
		out[i] = h.Rec
	}
	return out
}

// Run produces a block every BlockInterval until ctx is cancelled (with interval 0 it
// only waits). It returns nil on cancellation or the first persistence error.
func (s *Sim) Run(ctx context.Context) error {
	if s.opts.BlockInterval <= 0 {
		<-ctx.Done()
		return nil
	}
	t := time.NewTicker(s.opts.BlockInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			if _, err := s.Mine(1); err != nil {
				if errors.Is(err, ErrClosed) {
					return nil
				}
				return err
			}
		}
	}
}

// ErrClosed is returned by calls after Close.
var ErrClosed = errors.New("tronsim: closed")

// Close writes the state a last time and releases the data files. The simulator refuses
// further changes.
func (s *Sim) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	if s.store == nil {
		return nil
	}
	err := s.store.saveState(s)
	return errors.Join(err, s.store.close())
}

// Mine produces n blocks at once and returns the new head number.
func (s *Sim) Mine(n int) (int64, error) {
	if n < 1 {
		return 0, errors.New("tronsim: count must be at least 1")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return 0, ErrClosed
	}
	from := len(s.blocks)
	for range n {
		s.mineOneLocked()
	}
	if s.store != nil {
		if err := s.store.appendBlocks(s, s.blocks[from:]); err != nil {
			return 0, err
		}
	}
	return s.head().Num, nil
}

func (s *Sim) mineOneLocked() {
	head := s.head()
	num := head.Num + 1
	ts := s.chainTime(num)
	candidates := s.pending
	s.pending = nil
	keep := s.held[:0]
	for _, h := range s.held {
		if h.Release <= num {
			candidates = append(candidates, h.Rec)
		} else {
			keep = append(keep, h)
		}
	}
	s.held = keep
	ctx := s.ctxFor(num)
	s.confirmed.endDeepRentals(ctx.now)
	var txs []*txRecord
	for _, r := range candidates {
		if r.Data.Expiration <= ts {
			// java-tron never packs an expired transaction: one held back past its
			// expiration (slow_confirm) is gone for good, as on the real network.
			delete(s.known, r.ID)
			s.log.Info("tronsim dropped an expired transaction at packing", "txid", r.ID)
			continue
		}
		ctx.feeLimit, ctx.sigs = r.Data.FeeLimit, len(r.Sigs)
		res, err := s.confirmed.execute(ctx, r.Data.Contract, r.netBytes())
		if err != nil {
			// Valid against the pending state but not any more (an earlier transaction in
			// this block spent the same funds): java-tron drops it when packing.
			delete(s.known, r.ID)
			s.log.Info("tronsim dropped a transaction at packing", "txid", r.ID, "reason", err.Error())
			continue
		}
		r.Result, r.Block, r.BlockTime = res, num, ts
		txs = append(txs, r)
	}
	s.blocks = append(s.blocks, newBlock(num, ts, head.ID, txs, witnessKey(s.forkGen)))
	s.pend = nil
}

// Head describes the newest block.
type Head struct {
	Number     int64  `json:"number"`
	BlockID    string `json:"block_id"`
	ParentHash string `json:"parent_hash"`
	Timestamp  int64  `json:"timestamp"`
	Solid      int64  `json:"solid_number"`
}

// Head returns the newest block.
func (s *Sim) Head() Head {
	s.mu.RLock()
	defer s.mu.RUnlock()
	h := s.head()
	return Head{Number: h.Num, BlockID: hex.EncodeToString(h.ID[:]), ParentHash: hex.EncodeToString(h.Parent[:]),
		Timestamp: h.Time, Solid: max(0, h.Num-s.opts.SolidLag)}
}

// FaucetAddress is the address /sim transfers pay from.
func (s *Sim) FaucetAddress() tron.Address { return s.faucet.Address() }

// USDTContract is the simulated TRC-20 USDT address.
func (s *Sim) USDTContract() tron.Address { return s.opts.USDTContract }

// InjectFault arms count occurrences of kind (count 0 disarms it). For slow_confirm,
// blocks > 0 sets how many extra blocks later transactions are held.
func (s *Sim) InjectFault(kind FaultKind, count, blocks int64) (Faults, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.faults.counter(kind)
	if c == nil {
		return s.faults, fmt.Errorf("unknown fault kind %q (want reject_delegation, drop_tx, node_down, slow_confirm, block_unsolidified, no_connection, not_enough_connection, server_busy or p2p_failed)", kind)
	}
	if count < 0 {
		return s.faults, errors.New("count must not be negative")
	}
	*c = count
	if kind == FaultSlowConfirm && blocks > 0 {
		s.faults.SlowConfirmBlocks = blocks
	}
	return s.faults, nil
}

// Faults returns the remaining fault counts.
func (s *Sim) Faults() Faults {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.faults
}

// takeNodeDown consumes one node_down unit.
func (s *Sim) takeNodeDown() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.faults.take(FaultNodeDown)
}

// Return codes of broadcasttransaction (api.Return.response_code names).
const (
	codeSigError       = "SIGERROR"
	codeValidate       = "CONTRACT_VALIDATE_ERROR"
	codeDup            = "DUP_TRANSACTION_ERROR"
	codeTapos          = "TAPOS_ERROR"
	codeExpired        = "TRANSACTION_EXPIRATION_ERROR"
	codeTooBig         = "TOO_BIG_TRANSACTION_ERROR"
	codeExe            = "CONTRACT_EXE_ERROR"
	codeOther          = "OTHER_ERROR"
	maxExpirationAhead = 24 * 3600 * 1000 // java-tron's MAXIMUM_TIME_UNTIL_EXPIRATION
)

// submitError is a refused transaction: Code is the api.Return code, Msg java-tron's text.
type submitError struct {
	Code string
	Msg  string
}

func (e *submitError) Error() string { return e.Code + ": " + e.Msg }

// submitLocked runs java-tron's broadcast checks in its order and queues the transaction
// for the next block: Wallet.broadcastTransaction's checkExpiration against the next
// block slot; Manager.pushTransaction's signature and permission check; then
// processTransaction's TaPoS, validateCommon (size, expiration), validateDup, bandwidth,
// the multi-signature fee and the contract.
// fromBroadcast enables the broadcast-only faults (reject_delegation, drop_tx).
func (s *Sim) submitLocked(rec *txRecord, fromBroadcast bool) error {
	if s.closed {
		return &submitError{codeOther, "Error: node is closed"}
	}
	if fromBroadcast {
		// Wallet.broadcastTransaction's answers before the push, in its order.
		switch {
		case s.faults.take(FaultBlockUnsolidified):
			return &submitError{"BLOCK_UNSOLIDIFIED", "Block unsolidified."}
		case s.faults.take(FaultNoConnection):
			return &submitError{"NO_CONNECTION", "No connection."}
		case s.faults.take(FaultNotEnoughConn):
			return &submitError{"NOT_ENOUGH_EFFECTIVE_CONNECTION", "Effective connection:0 lt minEffectiveConnection:1"}
		case s.faults.take(FaultServerBusy):
			return &submitError{"SERVER_BUSY", "Server busy."}
		}
	}
	head := s.head()
	if rec.Data.Expiration < head.Time+BlockTimeMs {
		// TransactionCapsule.checkExpiration(getNextBlockSlotTime()), before the push.
		return &submitError{codeExpired, "Transaction expired"}
	}
	if err := s.validateSignatureLocked(rec); err != nil {
		return &submitError{codeSigError, "Validate signature error: " + err.Error()}
	}
	if !s.taposOK(rec.Data) {
		return &submitError{codeTapos, "Tapos check error."}
	}
	if err := tooBig(rec); err != nil {
		return &submitError{codeTooBig, err.Error()}
	}
	if exp := rec.Data.Expiration; exp <= head.Time || exp > head.Time+maxExpirationAhead {
		return &submitError{codeExpired, "Transaction expired"}
	}
	if _, ok := s.known[rec.ID]; ok {
		// validateDup: the transaction store holds pending and landed transactions alike
		// (processTransaction writes it inside the pending session).
		return &submitError{codeDup, "Dup transaction."}
	}
	typ := rec.Data.Contract.Type()
	if fromBroadcast && (typ == tron.DelegateResourceContractType || typ == tron.UnDelegateResourceContractType) &&
		s.faults.take(FaultRejectDelegation) {
		msg := "delegateBalance must be less than or equal to available FreezeEnergyV2 balance"
		if typ == tron.UnDelegateResourceContractType {
			msg = "delegated Resource does not exist"
		}
		return &submitError{codeValidate, "Contract validate error : " + msg}
	}
	ctx := s.ctxFor(head.Num + 1)
	ctx.feeLimit, ctx.sigs = rec.Data.FeeLimit, len(rec.Sigs)
	if fromBroadcast && s.faults.DropTx > 0 {
		// Validate on a scratch copy: a dropped transaction must not change anything.
		if _, err := s.viewLocked().clone().execute(ctx, rec.Data.Contract, rec.netBytes()); err != nil {
			return executeRefusal(err)
		}
		s.faults.take(FaultDropTx)
		s.log.Info("tronsim fault drop_tx swallowed a transaction", "txid", rec.ID)
		return nil
	}
	if _, err := s.pendLocked().execute(ctx, rec.Data.Contract, rec.netBytes()); err != nil {
		return executeRefusal(err)
	}
	s.known[rec.ID] = rec
	p2pFailed := fromBroadcast && s.faults.take(FaultP2PFailed)
	if s.faults.take(FaultSlowConfirm) {
		s.held = append(s.held, heldTx{Rec: rec, Release: head.Num + 1 + s.faults.SlowConfirmBlocks})
	} else {
		s.pending = append(s.pending, rec)
	}
	if s.store != nil {
		if err := s.store.saveState(s); err != nil {
			s.log.Error("tronsim could not save state", "err", err)
		}
	}
	if p2pFailed {
		// Pushed (it will land), then no peer took it.
		return &submitError{"NOT_ENOUGH_EFFECTIVE_CONNECTION", "P2P broadcast failed."}
	}
	return nil
}

// taposOK is java-tron's TaPoS check: ref_block_bytes are bytes 6..8 of a recent block's
// number and ref_block_hash bytes 8..16 of that block's id.
func (s *Sim) taposOK(r *tron.RawData) bool {
	if len(r.RefBlockBytes) != 2 || len(r.RefBlockHash) != 8 {
		return false
	}
	low := int64(binary.BigEndian.Uint16(r.RefBlockBytes))
	headNum := s.head().Num
	n := headNum - ((headNum - low) & 0xffff) // the newest block whose low 16 bits are low
	if n < 0 || n > headNum {
		return false
	}
	return bytes.Equal(s.blocks[n].ID[8:16], r.RefBlockHash)
}

// executeRefusal is Wallet.broadcastTransaction's answer to an execution error.
func executeRefusal(err error) *submitError {
	var ee *execError
	switch {
	case errors.As(err, &bandwidthError{}):
		return &submitError{"BANDWITH_ERROR", err.Error()}
	case errors.As(err, &ee):
		return &submitError{codeExe, "Contract execute error : " + ee.Msg}
	}
	return &submitError{codeValidate, "Contract validate error : " + err.Error()}
}

// refBlockLocked fills TaPoS and expiration for a transaction built on the current head:
// expiration is head time + 60 s of chain time; timestamp is the wall clock in
// milliseconds, as java-tron stamps it (System.currentTimeMillis), so two identical
// contracts built within one block are different transactions unless built in the same
// millisecond (Options.StampHeadTime stamps the head's time instead).
func (s *Sim) refBlockLocked(r *tron.RawData) {
	h := s.head()
	r.RefBlockBytes = append([]byte(nil), byte(h.Num>>8), byte(h.Num))
	r.RefBlockHash = append([]byte(nil), h.ID[8:16]...)
	r.Expiration = h.Time + 60_000
	r.Timestamp = time.Now().UnixMilli()
	if s.opts.StampHeadTime {
		r.Timestamp = h.Time
	}
}

// newRecord decodes a transaction as java-tron's broadcast does: the raw_data JSON is
// re-packed (raw_data_hex is ignored) and the id is sha256 of those bytes.
func newRecord(t *tron.Transaction) (*txRecord, error) {
	r, err := tron.ParseRawDataJSON(t.RawData)
	if err != nil {
		return nil, err
	}
	raw, err := r.Marshal()
	if err != nil {
		return nil, err
	}
	sigs := make([]string, len(t.Signature))
	for i, sg := range t.Signature {
		sigs[i] = trimHex(sg)
	}
	return &txRecord{ID: tron.TxID(raw), Raw: raw, Data: r, Sigs: sigs}, nil
}

func trimHex(s string) string {
	if len(s) >= 2 && (s[:2] == "0x" || s[:2] == "0X") {
		return s[2:]
	}
	return s
}

// signAndSubmitLocked builds, signs and queues a contract owned by key (the /sim
// transfers).
func (s *Sim) signAndSubmitLocked(c tron.Contract, feeLimit int64, key tron.PrivateKey) (string, error) {
	r := &tron.RawData{Contract: c, FeeLimit: feeLimit}
	s.refBlockLocked(r)
	raw, err := r.Marshal()
	if err != nil {
		return "", err
	}
	h := sha256.Sum256(raw)
	sig, err := key.SignHash(h[:])
	if err != nil {
		return "", err
	}
	rec := &txRecord{ID: tron.TxID(raw), Raw: raw, Data: r, Sigs: []string{hex.EncodeToString(sig)}}
	if err := s.submitLocked(rec, false); err != nil {
		return "", err
	}
	return rec.ID, nil
}

// TransferTRX sends amount SUN from key (the faucet when nil) to `to`, activating it if
// needed. It returns the txid; the transfer lands in the next block.
func (s *Sim) TransferTRX(to tron.Address, amount int64, key *tron.PrivateKey) (string, error) {
	k := s.faucet
	if key != nil {
		k = *key
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.signAndSubmitLocked(&tron.TransferContract{OwnerAddress: k.Address(), ToAddress: to, Amount: amount}, 0, k)
}

// DefaultUSDTFeeLimit is the fee_limit of /sim USDT transfers (100 TRX).
const DefaultUSDTFeeLimit = 100_000_000

// TransferUSDT sends amount (smallest unit) of USDT from key (the faucet when nil) with a
// real TriggerSmartContract, so energy is charged and a Transfer log is emitted.
func (s *Sim) TransferUSDT(to tron.Address, amount int64, key *tron.PrivateKey, feeLimit int64) (string, error) {
	k := s.faucet
	if key != nil {
		k = *key
	}
	if feeLimit <= 0 {
		feeLimit = DefaultUSDTFeeLimit
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	data := append(append(append([]byte(nil), selTransfer...), append(make([]byte, 12), to[1:]...)...), uint256(amount)...)
	c := &tron.TriggerSmartContract{OwnerAddress: k.Address(), ContractAddress: s.opts.USDTContract, Data: data}
	return s.signAndSubmitLocked(c, feeLimit, k)
}

// SeedAccount sets an account's TRX balance and total stakes directly (no transaction),
// activating it; USDT > 0 also sets its USDT balance. It takes effect immediately.
func (s *Sim) SeedAccount(g GenesisAccount) error {
	if g.Address.IsZero() || g.BalanceSun < 0 || g.StakeEnergySun < 0 || g.StakeBandwidthSun < 0 || g.USDT < 0 {
		return errors.New("seed: address required and amounts must not be negative")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	s.confirmed.seed(g, s.head().Time)
	s.pend = nil
	if s.store != nil {
		return s.store.saveState(s)
	}
	return nil
}

// UseEnergy consumes energy of addr at the head's time, as if its own transactions had
// burnt it from its stake (delegated energy included), capped at its energy limit; it
// recovers over 24 h like any usage. Tests use it to make a watched address run low.
func (s *Sim) UseEnergy(addr tron.Address, energy int64) error {
	if addr.IsZero() || energy <= 0 {
		return errors.New("use energy: address required and energy must be positive")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	a, ok := s.confirmed.Accounts[addr]
	if !ok {
		return errors.New("use energy: account does not exist")
	}
	h := s.head()
	limit := energyLimit(a, s.confirmed.totals(s.opts.Params, h.Num))
	a.EnergyUsage = min(usageAt(a.EnergyUsage, a.EnergyTime, h.Time)+energy, limit)
	a.EnergyTime = h.Time
	s.confirmed.Accounts[addr] = a
	s.pend = nil
	if s.store != nil {
		return s.store.saveState(s)
	}
	return nil
}

// ForkResult reports what a fork replaced.
type ForkResult struct {
	Head       int64    `json:"head"`
	Orphaned   []string `json:"orphaned"`    // ids of the replaced blocks, lowest first
	Replaced   []string `json:"replaced"`    // ids of the new blocks at the same heights
	ReIncluded []string `json:"re_included"` // txids moved to the block after the branch
}

// Fork replaces the last depth blocks with a new branch signed by another witness (same
// heights and timestamps, new ids, linked to the block below). Transactions of the
// orphaned blocks are re-included in one new block on top of the branch, so followers see
// them move to a later height; their effects on state are unchanged.
func (s *Sim) Fork(depth int) (ForkResult, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ForkResult{}, ErrClosed
	}
	headNum := s.head().Num
	if depth < 1 || int64(depth) > headNum {
		return ForkResult{}, fmt.Errorf("fork depth must be between 1 and %d (the genesis block stays)", headNum)
	}
	s.forkGen++
	w := witnessKey(s.forkGen)
	var res ForkResult
	var moved []*txRecord
	base := len(s.blocks) - depth
	for i := base; i < len(s.blocks); i++ {
		old := s.blocks[i]
		res.Orphaned = append(res.Orphaned, hex.EncodeToString(old.ID[:]))
		moved = append(moved, old.Txs...)
		nb := newBlock(old.Num, old.Time, s.blocks[i-1].ID, nil, w)
		s.blocks[i] = nb
		res.Replaced = append(res.Replaced, hex.EncodeToString(nb.ID[:]))
	}
	if len(moved) > 0 {
		num := headNum + 1
		ts := s.chainTime(num)
		txs := make([]*txRecord, len(moved))
		for i, r := range moved {
			c := *r
			c.Block, c.BlockTime = num, ts
			txs[i] = &c
			s.known[c.ID] = &c
			res.ReIncluded = append(res.ReIncluded, c.ID)
		}
		s.blocks = append(s.blocks, newBlock(num, ts, s.head().ID, txs, w))
	}
	res.Head = s.head().Num
	s.log.Info("tronsim fork", "depth", depth, "head", res.Head, "re_included", len(moved))
	if s.store != nil {
		if err := s.store.rewrite(s); err != nil {
			return res, err
		}
	}
	return res, nil
}
