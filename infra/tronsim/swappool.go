package tronsim

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"net/http"
	"os"
	"sync"

	"rental/infra/tron"
	"rental/schemas/univ3"
)

// The swap pool is a simulated SunSwap v3 (Uniswap v3) USDT/WTRX pool: the on-chain market
// price of USDT in TRX that the service's sunswap_v3 rate source reads. It answers the view
// functions a v3 pool has, through the node's constant calls like any contract
// (/wallet/triggerconstantcontract, its /walletsolidity/ twin at the solidified block, and
// /wallet/triggersmartcontract, which java-tron's Wallet.triggerContract runs as a
// constant call for a view function):
//
//	slot0() returns (uint160 sqrtPriceX96, int24 tick, uint16 observationIndex,
//	                 uint16 observationCardinality, uint16 observationCardinalityNext,
//	                 uint8 feeProtocol, bool unlocked)
//	observe(uint32[] secondsAgos) returns (int56[] tickCumulatives,
//	                 uint160[] secondsPerLiquidityCumulativeX128s)   reverts "OLD" past the oldest observation
//	liquidity() returns (uint128)
//	token0() returns (address), token1() returns (address)   the lower address is token0
//
// and a simulated WTRX (decimals() 6, symbol(), name()). The price is token1 per token0 in
// base units, as in every v3 pool; both tokens have 6 decimals.
//
// Its history is the list of price changes (POST /sim/swap): each takes effect at a block
// (the next one when it was posted), as a swap in that block would. Reading the pool at
// block N replays the changes up to N into the pool's oracle the way a v3 pool writes it
// (Oracle.initialize, grow, write and observe of v3-core, reimplemented): the pool is
// initialised at the block it was first used with one observation and a cardinality grown
// to DefaultPoolCardinality; a block with a change writes one observation at the block's
// timestamp (seconds: java-tron's TVM sees the block's milliseconds / 1000), accumulating
// the tick and liquidity in force before the change; observe interpolates between
// observations and extrapolates from the newest with the current tick. A constant call
// reads at the view's top block: the head under /wallet/, the solidified block under
// /walletsolidity/, with that block's timestamp as block.timestamp (java-tron's
// Wallet.callConstantContract runs on the newest block of the view it was called on).
//
// The history is kept in <DataFile>.pool.json beside the chain, so the oracle survives a
// restart with the chain.

// SwapPoolSeed and WTRXSeed derive the deterministic addresses of the pool and of WTRX.
const (
	SwapPoolSeed = "tronsim sunswap v3 USDT/WTRX pool"
	WTRXSeed     = "tronsim WTRX"
)

// Defaults of a new pool: 3.4 TRX per USDT, liquidity 2e12 (about 1.1 million USDT and
// 3.7 million TRX of virtual reserves at that price) and room for 1,000 observations.
const (
	DefaultPoolTRXPerUSDT  = "3.4"
	DefaultPoolLiquidity   = 2_000_000_000_000
	DefaultPoolCardinality = 1000
	maxPoolCardinality     = 65535
)

func seededAddress(seed string) tron.Address {
	h := sha256.Sum256([]byte(seed))
	a, _ := tron.AddressFromBytes(h[12:])
	return a
}

// SwapPoolContract is the address of the simulated USDT/WTRX pool.
func SwapPoolContract() tron.Address { return seededAddress(SwapPoolSeed) }

// WTRXContract is the address of the simulated WTRX token.
func WTRXContract() tron.Address { return seededAddress(WTRXSeed) }

// poolChange is one entry of the pool's history: the state from Block on.
type poolChange struct {
	Block        int64  `json:"block"`
	SqrtPriceX96 string `json:"sqrt_price_x96"`
	Tick         int    `json:"tick"` // the tick of SqrtPriceX96
	Liquidity    string `json:"liquidity"`
	Cardinality  int    `json:"cardinality_next"`
}

// swapPool is the pool's history; its own lock, taken after (never while waiting for) s.mu.
type swapPool struct {
	mu      sync.Mutex
	loaded  bool
	changes []poolChange
}

// observation is one oracle slot (Oracle.Observation).
type observation struct {
	ts      uint32
	tickCum int64
	splCum  *big.Int // secondsPerLiquidityCumulativeX128, modulo 2^160
	init    bool
}

// poolView is the pool's state at one block.
type poolView struct {
	sqrtP     *big.Int
	tick      int
	liquidity *big.Int
	obs       []observation // len = cardinalityNext; slots past cardinality are not initialised
	index     int
	card      int
	cardNext  int
}

var mod160 = new(big.Int).Lsh(big.NewInt(1), 160)

// transform is the observation ts seconds after last with tick and liquidity in force.
func transform(last observation, ts uint32, tick int, liquidity *big.Int) observation {
	delta := int64(ts) - int64(last.ts)
	l := liquidity
	if l.Sign() == 0 {
		l = big.NewInt(1)
	}
	spl := new(big.Int).Lsh(big.NewInt(delta), 128)
	spl.Quo(spl, l)
	spl.Add(spl, last.splCum).Mod(spl, mod160)
	return observation{ts: ts, tickCum: last.tickCum + int64(tick)*delta, splCum: spl, init: true}
}

// write records an observation at ts unless this block has one already (Oracle.write).
func (v *poolView) write(ts uint32) {
	last := v.obs[v.index]
	if last.ts == ts {
		return
	}
	card := v.card
	if v.cardNext > v.card && v.index == v.card-1 {
		card = v.cardNext
	}
	v.index = (v.index + 1) % card
	v.card = card
	v.obs[v.index] = transform(last, ts, v.tick, v.liquidity)
}

// grow raises the cardinality the ring may reach (Oracle.grow).
func (v *poolView) grow(next int) {
	if next <= v.cardNext {
		return
	}
	v.obs = append(v.obs, make([]observation, next-len(v.obs))...)
	v.cardNext = next
}

var errOld = errors.New("OLD")

// observeOne is the accumulators secondsAgo before now (Oracle.observeSingle).
func (v *poolView) observeOne(now, secondsAgo uint32) (int64, *big.Int, error) {
	newest := v.obs[v.index]
	if secondsAgo == 0 {
		if newest.ts != now {
			newest = transform(newest, now, v.tick, v.liquidity)
		}
		return newest.tickCum, newest.splCum, nil
	}
	if secondsAgo > now {
		return 0, nil, errOld
	}
	target := now - secondsAgo
	if newest.ts <= target {
		if newest.ts != target {
			newest = transform(newest, target, v.tick, v.liquidity)
		}
		return newest.tickCum, newest.splCum, nil
	}
	// Oldest first: the slot after the newest, or slot 0 while the ring has not wrapped.
	start := (v.index + 1) % v.card
	if !v.obs[start].init {
		start = 0
	}
	if target < v.obs[start].ts {
		return 0, nil, errOld
	}
	for i := start; ; i = (i + 1) % v.card {
		before, after := v.obs[i], v.obs[(i+1)%v.card]
		if target > after.ts {
			continue
		}
		if target == before.ts {
			return before.tickCum, before.splCum, nil
		}
		if target == after.ts {
			return after.tickCum, after.splCum, nil
		}
		span, into := int64(after.ts-before.ts), int64(target-before.ts)
		// Solidity's signed division truncates toward zero, as Go's does.
		tc := before.tickCum + (after.tickCum-before.tickCum)/span*into
		d := new(big.Int).Sub(after.splCum, before.splCum)
		d.Mod(d, mod160).Mul(d, big.NewInt(into)).Quo(d, big.NewInt(span))
		return tc, d.Add(d, before.splCum).Mod(d, mod160), nil
	}
}

func (s *Sim) poolFile() string {
	if s.opts.DataFile == "" {
		return ""
	}
	return s.opts.DataFile + ".pool.json"
}

// usdtIsToken0 is v3's token order: the lower 20-byte address is token0.
func (s *Sim) usdtIsToken0() bool {
	u, w := s.opts.USDTContract, WTRXContract()
	return bytes.Compare(u[1:], w[1:]) < 0
}

// poolPrice is the pool's raw price (token1 per token0) of trxPerUSDT.
func (s *Sim) poolPrice(trxPerUSDT *big.Float) *big.Float {
	if s.usdtIsToken0() {
		return trxPerUSDT // WTRX per USDT, both 6 decimals
	}
	return new(big.Float).SetPrec(univ3.Prec).Quo(big.NewFloat(1).SetPrec(univ3.Prec), trxPerUSDT)
}

// poolAt is the pool's state at block num with that block's timestamp in seconds.
func (s *Sim) poolAt(num int64) (poolView, uint32) {
	s.mu.RLock()
	head := s.head().Num
	s.mu.RUnlock()
	s.pool.mu.Lock()
	defer s.pool.mu.Unlock()
	s.poolEnsureLocked(head)
	var v poolView
	for i, c := range s.pool.changes {
		if c.Block > num && i > 0 { // a read below the creation block is refused by poolCall
			break
		}
		ts := uint32(s.chainTime(c.Block) / 1000)
		sqrtP, _ := new(big.Int).SetString(c.SqrtPriceX96, 10)
		liq, _ := new(big.Int).SetString(c.Liquidity, 10)
		tick := c.Tick
		if i == 0 { // Oracle.initialize, then grow
			v = poolView{obs: []observation{{ts: ts, splCum: new(big.Int), init: true}}, card: 1, cardNext: 1}
		} else if tick != v.tick || liq.Cmp(v.liquidity) != 0 {
			v.write(ts)
		}
		v.grow(c.Cardinality)
		v.sqrtP, v.tick, v.liquidity = sqrtP, tick, liq
	}
	return v, uint32(s.chainTime(num) / 1000)
}

// poolEnsureLocked loads the pool's history, or starts it at block head with the default
// pool (s.pool.mu held).
func (s *Sim) poolEnsureLocked(head int64) {
	if s.pool.loaded {
		return
	}
	s.pool.loaded = true
	if f := s.poolFile(); f != "" {
		if b, err := os.ReadFile(f); err == nil && json.Unmarshal(b, &s.pool.changes) == nil && len(s.pool.changes) > 0 {
			return
		}
	}
	price, _, _ := big.ParseFloat(DefaultPoolTRXPerUSDT, 10, univ3.Prec, big.ToNearestEven)
	sqrtP := univ3.SqrtPriceX96(s.poolPrice(price))
	tick, _ := univ3.TickAtPrice(univ3.PriceFromSqrtX96(sqrtP))
	s.pool.changes = []poolChange{{Block: head, SqrtPriceX96: sqrtP.String(), Tick: tick,
		Liquidity: big.NewInt(DefaultPoolLiquidity).String(), Cardinality: DefaultPoolCardinality}}
}

// poolCreated is the block the pool was created at (its first use: the simulator's
// Handler, or the first read).
func (s *Sim) poolCreated() int64 {
	s.mu.RLock()
	head := s.head().Num
	s.mu.RUnlock()
	s.pool.mu.Lock()
	defer s.pool.mu.Unlock()
	s.poolEnsureLocked(head)
	return s.pool.changes[0].Block
}

// PoolChange is the body of POST /sim/swap: the new price and, optionally, the pool's
// in-range liquidity and a larger observation cardinality (increaseObservationCardinalityNext).
type PoolChange struct {
	TRXPerUSDT  string `json:"trx_per_usdt"`
	Liquidity   string `json:"liquidity,omitempty"`
	Cardinality int    `json:"observation_cardinality,omitempty"`
}

// PoolState is the answer of POST and GET /sim/swap.
type PoolState struct {
	Pool         string `json:"pool"`
	Token0       string `json:"token0"`
	Token1       string `json:"token1"`
	Block        int64  `json:"block"` // the block the state holds from (POST) or is read at (GET)
	TRXPerUSDT   string `json:"trx_per_usdt"`
	SqrtPriceX96 string `json:"sqrt_price_x96"`
	Tick         int    `json:"tick"`
	Liquidity    string `json:"liquidity"`
	Cardinality  int    `json:"observation_cardinality_next"`
}

// Swap changes the pool from the next block on, as a swap (and a liquidity change) in that
// block would. A second change before that block replaces the first.
func (s *Sim) Swap(c PoolChange) (PoolState, error) {
	price, _, err := big.ParseFloat(c.TRXPerUSDT, 10, univ3.Prec, big.ToNearestEven)
	if err != nil || price.Sign() <= 0 || price.IsInf() {
		return PoolState{}, fmt.Errorf("trx_per_usdt: want a positive decimal, got %q", c.TRXPerUSDT)
	}
	raw := s.poolPrice(price)
	sqrtP := univ3.SqrtPriceX96(raw)
	tick, err := univ3.TickAtPrice(univ3.PriceFromSqrtX96(sqrtP))
	if err != nil {
		return PoolState{}, fmt.Errorf("trx_per_usdt %s: %w", c.TRXPerUSDT, err)
	}
	if c.Cardinality < 0 || c.Cardinality > maxPoolCardinality {
		return PoolState{}, fmt.Errorf("observation_cardinality: want 1 to %d", maxPoolCardinality)
	}
	s.mu.RLock()
	head, closed := s.head().Num, s.closed
	s.mu.RUnlock()
	if closed {
		return PoolState{}, ErrClosed
	}
	s.pool.mu.Lock()
	defer s.pool.mu.Unlock()
	s.poolEnsureLocked(head)
	last := s.pool.changes[len(s.pool.changes)-1]
	liq := last.Liquidity
	if c.Liquidity != "" {
		l, ok := new(big.Int).SetString(c.Liquidity, 10)
		if !ok || l.Sign() < 0 || l.BitLen() > 128 {
			return PoolState{}, fmt.Errorf("liquidity: want a uint128 decimal, got %q", c.Liquidity)
		}
		liq = l.String()
	}
	ch := poolChange{Block: head + 1, SqrtPriceX96: sqrtP.String(), Tick: tick, Liquidity: liq, Cardinality: max(c.Cardinality, last.Cardinality)}
	if last.Block == ch.Block && len(s.pool.changes) > 1 {
		s.pool.changes[len(s.pool.changes)-1] = ch
	} else {
		s.pool.changes = append(s.pool.changes, ch)
	}
	if f := s.poolFile(); f != "" {
		b, _ := json.Marshal(s.pool.changes)
		if err := os.WriteFile(f+".tmp", b, 0o644); err != nil {
			return PoolState{}, err
		}
		if err := os.Rename(f+".tmp", f); err != nil {
			return PoolState{}, err
		}
	}
	s.log.Info("tronsim swap pool price set", "trx_per_usdt", c.TRXPerUSDT, "tick", tick, "from_block", ch.Block)
	return s.poolState(ch.Block, sqrtP, tick, liq, ch.Cardinality), nil
}

func (s *Sim) poolState(block int64, sqrtP *big.Int, tick int, liq string, card int) PoolState {
	t0, t1 := s.opts.USDTContract, WTRXContract()
	raw := univ3.PriceFromSqrtX96(sqrtP)
	if !s.usdtIsToken0() {
		t0, t1 = t1, t0
		raw.Quo(big.NewFloat(1).SetPrec(univ3.Prec), raw)
	}
	return PoolState{Pool: SwapPoolContract().String(), Token0: t0.String(), Token1: t1.String(), Block: block,
		TRXPerUSDT: raw.Text('f', 6), SqrtPriceX96: sqrtP.String(), Tick: tick, Liquidity: liq, Cardinality: card}
}

// SwapPool is the pool's state at the head block.
func (s *Sim) SwapPool() PoolState {
	s.mu.RLock()
	head := s.head().Num
	s.mu.RUnlock()
	v, _ := s.poolAt(head)
	return s.poolState(head, v.sqrtP, v.tick, v.liquidity.String(), v.cardNext)
}

func (s *Sim) poolRoutes(mux *http.ServeMux) {
	s.poolCreated() // the pool exists from the block the simulator starts serving at
	mux.HandleFunc("GET /sim/swap", func(w http.ResponseWriter, _ *http.Request) { writeJSON(w, http.StatusOK, s.SwapPool()) })
	mux.HandleFunc("POST /sim/swap", func(w http.ResponseWriter, r *http.Request) {
		var c PoolChange
		if !decodeBody(w, r, &c) {
			return
		}
		st, err := s.Swap(c)
		if err != nil {
			ctlError(w, http.StatusBadRequest, err)
			return
		}
		writeJSON(w, http.StatusOK, st)
	})
}

// Energy a read of the pool costs in a constant call (what java-tron reports as
// energy_used; only its order matters).
const poolReadEnergy = 2_500

// poolHosted reports whether contract is the pool or WTRX.
func poolHosted(contract tron.Address) bool {
	return contract == SwapPoolContract() || contract == WTRXContract()
}

// poolCall answers a constant call to the pool or to WTRX (poolHosted) at the top block of
// the view (the solidified block when solid). exists is false when the pool was created
// after that block; ok false is a revert with out as its revert data.
func (s *Sim) poolCall(contract tron.Address, data []byte, solid bool) (out []byte, energy int64, ok, exists bool) {
	if contract == WTRXContract() {
		out, ok = wtrxCall(data)
		return out, energyUSDTRead, ok, true
	}
	s.mu.RLock()
	num := s.topLocked(solid)
	s.mu.RUnlock()
	if num < s.poolCreated() {
		return nil, 0, false, false
	}
	if len(data) < 4 {
		return nil, poolReadEnergy, false, true
	}
	v, now := s.poolAt(num)
	sel, args := data[:4], data[4:]
	switch {
	case bytes.Equal(sel, tron.SelectorSlot0):
		out = append(uint256Big(v.sqrtP), int256(int64(v.tick))...)
		for _, n := range []int64{int64(v.index), int64(v.card), int64(v.cardNext), 0, 1} {
			out = append(out, uint256(n)...)
		}
		return out, poolReadEnergy, true, true
	case bytes.Equal(sel, tron.SelectorLiquidity):
		return uint256Big(v.liquidity), poolReadEnergy, true, true
	case bytes.Equal(sel, tron.SelectorToken0), bytes.Equal(sel, tron.SelectorToken1):
		t0, t1 := s.opts.USDTContract, WTRXContract()
		if !s.usdtIsToken0() {
			t0, t1 = t1, t0
		}
		t := t0
		if bytes.Equal(sel, tron.SelectorToken1) {
			t = t1
		}
		return append(make([]byte, 12), t[1:]...), poolReadEnergy, true, true
	case bytes.Equal(sel, tron.SelectorObserve):
		agos, valid := decodeUint32Array(args)
		if !valid {
			return nil, poolReadEnergy, false, true // the ABI decoder reverts without data
		}
		ticks, spls := make([][]byte, len(agos)), make([][]byte, len(agos))
		for i, ago := range agos {
			tc, spl, err := v.observeOne(now, ago)
			if err != nil {
				return revertData(err.Error()), poolReadEnergy, false, true
			}
			ticks[i], spls[i] = int256(tc), uint256Big(spl)
		}
		n := int64(len(agos))
		out = append(uint256(64), uint256(64+32*(1+n))...)
		out = append(out, uint256(n)...)
		for _, w := range ticks {
			out = append(out, w...)
		}
		out = append(out, uint256(n)...)
		for _, w := range spls {
			out = append(out, w...)
		}
		return out, poolReadEnergy + 500*n, true, true
	}
	return nil, poolReadEnergy, false, true // no such function: a v3 pool has no fallback
}

// wtrxCall answers WTRX's TRC-20 metadata.
func wtrxCall(data []byte) ([]byte, bool) {
	switch {
	case len(data) < 4:
		return nil, false
	case bytes.Equal(data[:4], selDecimals):
		return uint256(6), true
	case bytes.Equal(data[:4], selSymbol):
		return abiString("WTRX"), true
	case bytes.Equal(data[:4], selName):
		return abiString("Wrapped TRX"), true
	}
	return nil, false
}

// decodeUint32Array reads the ABI arguments (uint32[]).
func decodeUint32Array(args []byte) ([]uint32, bool) {
	if len(args) < 64 {
		return nil, false
	}
	off := new(big.Int).SetBytes(args[:32])
	if !off.IsInt64() || off.Int64() > int64(len(args)-32) {
		return nil, false
	}
	o := int(off.Int64())
	n := new(big.Int).SetBytes(args[o : o+32])
	if !n.IsInt64() || n.Int64() > int64((len(args)-o-32)/32) {
		return nil, false
	}
	out := make([]uint32, n.Int64())
	for i := range out {
		w := args[o+32+32*i : o+64+32*i]
		if !allZero(w[:28]) {
			return nil, false
		}
		out[i] = uint32(w[28])<<24 | uint32(w[29])<<16 | uint32(w[30])<<8 | uint32(w[31])
	}
	return out, true
}

func uint256Big(v *big.Int) []byte { return v.FillBytes(make([]byte, 32)) }

// int256 is a signed ABI word (two's complement).
func int256(v int64) []byte {
	w := uint256(0)
	b := new(big.Int).SetInt64(v)
	if v < 0 {
		b.Add(b, new(big.Int).Lsh(big.NewInt(1), 256))
	}
	return b.FillBytes(w)
}

// revertData is Error(string) with reason, the data a Solidity require(…, reason) reverts with.
func revertData(reason string) []byte {
	out := append([]byte(nil), selector("Error(string)")...)
	return append(out, abiString(reason)...)
}
