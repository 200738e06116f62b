package tronsim

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"

	"rental/infra/tron"
)

// Handler serves the java-tron API under /wallet/ and /walletsolidity/ and the control
// API under /sim/:
//
//	POST /sim/trx/transfer  {to, amount_sun, from_key?}          -> {txid}
//	POST /sim/usdt/transfer {to, amount, from_key?, fee_limit?}  -> {txid}
//	POST /sim/blocks        {count}                              -> {head}
//	POST /sim/faults        {kind, count, blocks?}               -> Faults (remaining counts)
//	GET  /sim/faults                                             -> Faults
//	POST /sim/accounts      {address, balance_sun, stake_energy_sun, stake_bandwidth_sun, usdt?}
//	                                                             -> AccountView
//	GET  /sim/accounts/{address}                                 -> AccountView
//	POST /sim/fork          {depth}                              -> ForkResult
//	GET  /sim/head                                               -> Head
//	GET  /sim/info                                               -> {network, faucet, usdt_contract, swap_pool, ...}
//	POST /sim/swap          {trx_per_usdt, liquidity?, observation_cardinality?} -> PoolState (swappool.go)
//	GET  /sim/swap                                               -> PoolState at the head
//
// Transfers are queued for the next block like broadcasts. from_key (hex private key)
// pays from another account; it is used for signing only and never logged or stored.
// Errors are {"error": "..."} with 400 (bad input, refused transaction) or 404.
func (s *Sim) Handler() http.Handler {
	mux := http.NewServeMux()
	for name, rt := range s.walletRoutes() {
		mux.Handle("/wallet/"+name, s.serveWallet(rt.fn, false))
		if rt.solid {
			mux.Handle("/walletsolidity/"+name, s.serveWallet(rt.fn, true))
		}
	}
	mux.HandleFunc("POST /sim/trx/transfer", s.ctlTRX)
	mux.HandleFunc("POST /sim/usdt/transfer", s.ctlUSDT)
	mux.HandleFunc("POST /sim/blocks", s.ctlBlocks)
	mux.HandleFunc("POST /sim/faults", s.ctlFaults)
	mux.HandleFunc("GET /sim/faults", func(w http.ResponseWriter, _ *http.Request) { writeJSON(w, http.StatusOK, s.Faults()) })
	mux.HandleFunc("POST /sim/accounts", s.ctlSeed)
	mux.HandleFunc("GET /sim/accounts/{address}", s.ctlAccount)
	mux.HandleFunc("POST /sim/fork", s.ctlFork)
	mux.HandleFunc("POST /sim/energy/use", s.ctlUseEnergy)
	mux.HandleFunc("GET /sim/head", func(w http.ResponseWriter, _ *http.Request) { writeJSON(w, http.StatusOK, s.Head()) })
	mux.HandleFunc("GET /sim/info", s.ctlInfo)
	s.deepRoutes(mux)
	s.poolRoutes(mux) // swappool.go: GET and POST /sim/swap
	return mux
}

func ctlError(w http.ResponseWriter, status int, err error) {
	writeJSON(w, status, map[string]string{"error": err.Error()})
}

func decodeBody(w http.ResponseWriter, r *http.Request, v any) bool {
	dec := json.NewDecoder(io.LimitReader(r.Body, 1<<20))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		ctlError(w, http.StatusBadRequest, errors.New("body: "+err.Error()))
		return false
	}
	return true
}

func optKey(hexKey string) (*tron.PrivateKey, error) {
	if hexKey == "" {
		return nil, nil
	}
	k, err := tron.ParsePrivateKey(hexKey)
	if err != nil {
		return nil, errors.New("from_key: want 32 bytes of hex")
	}
	return &k, nil
}

func txidReply(w http.ResponseWriter, txid string, err error) {
	if err != nil {
		ctlError(w, http.StatusBadRequest, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"txid": txid})
}

func (s *Sim) ctlTRX(w http.ResponseWriter, r *http.Request) {
	var q struct {
		To        tron.Address `json:"to"`
		AmountSun int64        `json:"amount_sun"`
		FromKey   string       `json:"from_key"`
	}
	if !decodeBody(w, r, &q) {
		return
	}
	key, err := optKey(q.FromKey)
	if err != nil {
		ctlError(w, http.StatusBadRequest, err)
		return
	}
	txid, err := s.TransferTRX(q.To, q.AmountSun, key)
	txidReply(w, txid, err)
}

func (s *Sim) ctlUSDT(w http.ResponseWriter, r *http.Request) {
	var q struct {
		To       tron.Address `json:"to"`
		Amount   int64        `json:"amount"`
		FromKey  string       `json:"from_key"`
		FeeLimit int64        `json:"fee_limit"`
	}
	if !decodeBody(w, r, &q) {
		return
	}
	key, err := optKey(q.FromKey)
	if err != nil {
		ctlError(w, http.StatusBadRequest, err)
		return
	}
	if q.Amount <= 0 {
		ctlError(w, http.StatusBadRequest, errors.New("amount must be positive"))
		return
	}
	txid, err := s.TransferUSDT(q.To, q.Amount, key, q.FeeLimit)
	txidReply(w, txid, err)
}

// maxMineBatch bounds POST /sim/blocks so one call cannot stall the node for minutes.
const maxMineBatch = 100_000

func (s *Sim) ctlBlocks(w http.ResponseWriter, r *http.Request) {
	var q struct {
		Count int `json:"count"`
	}
	if !decodeBody(w, r, &q) {
		return
	}
	if q.Count < 1 || q.Count > maxMineBatch {
		ctlError(w, http.StatusBadRequest, errors.New("count must be between 1 and 100000"))
		return
	}
	head, err := s.Mine(q.Count)
	if err != nil {
		ctlError(w, http.StatusInternalServerError, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]int64{"head": head})
}

func (s *Sim) ctlFaults(w http.ResponseWriter, r *http.Request) {
	var q struct {
		Kind   FaultKind `json:"kind"`
		Count  int64     `json:"count"`
		Blocks int64     `json:"blocks"`
	}
	if !decodeBody(w, r, &q) {
		return
	}
	f, err := s.InjectFault(q.Kind, q.Count, q.Blocks)
	if err != nil {
		ctlError(w, http.StatusBadRequest, err)
		return
	}
	s.log.Info("tronsim fault armed", "kind", q.Kind, "count", q.Count)
	writeJSON(w, http.StatusOK, f)
}

func (s *Sim) ctlSeed(w http.ResponseWriter, r *http.Request) {
	var q GenesisAccount
	if !decodeBody(w, r, &q) {
		return
	}
	if err := s.SeedAccount(q); err != nil {
		ctlError(w, http.StatusBadRequest, err)
		return
	}
	v, _ := s.Account(q.Address)
	writeJSON(w, http.StatusOK, v)
}

// ctlUseEnergy spends energy of an address as its own contract calls would:
// {"address": "T...", "energy": 50000}; it answers the account view.
func (s *Sim) ctlUseEnergy(w http.ResponseWriter, r *http.Request) {
	var q struct {
		Address tron.Address `json:"address"`
		Energy  int64        `json:"energy"`
	}
	if !decodeBody(w, r, &q) {
		return
	}
	if err := s.UseEnergy(q.Address, q.Energy); err != nil {
		ctlError(w, http.StatusBadRequest, err)
		return
	}
	v, _ := s.Account(q.Address)
	writeJSON(w, http.StatusOK, v)
}

func (s *Sim) ctlAccount(w http.ResponseWriter, r *http.Request) {
	a, err := tron.ParseAddress(r.PathValue("address"))
	if err != nil {
		ctlError(w, http.StatusBadRequest, err)
		return
	}
	v, _ := s.Account(a)
	writeJSON(w, http.StatusOK, v)
}

func (s *Sim) ctlFork(w http.ResponseWriter, r *http.Request) {
	var q struct {
		Depth int `json:"depth"`
	}
	if !decodeBody(w, r, &q) {
		return
	}
	res, err := s.Fork(q.Depth)
	if err != nil {
		ctlError(w, http.StatusBadRequest, err)
		return
	}
	writeJSON(w, http.StatusOK, res)
}

func (s *Sim) ctlInfo(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{
		"network":                  s.opts.Network,
		"faucet":                   s.FaucetAddress().String(),
		"usdt_contract":            s.opts.USDTContract.String(),
		"block_interval_ms":        s.opts.BlockInterval.Milliseconds(),
		"max_delegate_lock_period": s.opts.Params.MaxDelegateLockPeriod,
		"solid_lag":                s.opts.SolidLag,
		"swap_pool":                SwapPoolContract().String(), // swappool.go
		"wtrx_contract":            WTRXContract().String(),
	})
}

// DelegationView is one delegation record in AccountView.
type DelegationView struct {
	From            string `json:"from"`
	To              string `json:"to"`
	Lock            bool   `json:"lock"`
	EnergySun       int64  `json:"energy_sun"`
	BandwidthSun    int64  `json:"bandwidth_sun"`
	ExpireEnergy    int64  `json:"expire_time_for_energy"`
	ExpireBandwidth int64  `json:"expire_time_for_bandwidth"`
}

// AccountView is the whole simulated account (GET /sim/accounts/{address}), read from the
// confirmed state at the head block.
type AccountView struct {
	Address    string `json:"address"`
	Activated  bool   `json:"activated"`
	BalanceSun int64  `json:"balance_sun"`
	CreateTime int64  `json:"create_time"`
	// Stake totals include what is delegated out; *_available is what may still be
	// delegated (frozenV2 in java-tron's terms).
	StakeEnergySun           int64            `json:"stake_energy_sun"`
	StakeBandwidthSun        int64            `json:"stake_bandwidth_sun"`
	StakeEnergyAvailableSun  int64            `json:"stake_energy_available_sun"`
	StakeBandwidthAvailable  int64            `json:"stake_bandwidth_available_sun"`
	DelegatedOutEnergySun    int64            `json:"delegated_out_energy_sun"`
	DelegatedOutBandwidthSun int64            `json:"delegated_out_bandwidth_sun"`
	AcquiredEnergySun        int64            `json:"acquired_energy_sun"`
	AcquiredBandwidthSun     int64            `json:"acquired_bandwidth_sun"`
	DelegationsOut           []DelegationView `json:"delegations_out"`
	DelegationsIn            []DelegationView `json:"delegations_in"`
	USDT                     int64            `json:"usdt"`
	EnergyLimit              int64            `json:"energy_limit"`
	EnergyUsed               int64            `json:"energy_used"`
	NetLimit                 int64            `json:"net_limit"`
	FreeNetLimit             int64            `json:"free_net_limit"`
	TotalEnergyWeight        int64            `json:"total_energy_weight"`
	TotalEnergyLimit         int64            `json:"total_energy_limit"`
	HeadBlock                int64            `json:"head_block"`
}

// Account returns the simulated account; ok is false when it was never activated (the
// view still carries its USDT balance and incoming delegations, which need no activation).
func (s *Sim) Account(addr tron.Address) (AccountView, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	st := s.confirmed
	a, ok := st.Accounts[addr]
	h := s.head()
	tot := st.totals(s.opts.Params, h.Num)
	v := AccountView{
		Address:                  addr.String(),
		Activated:                ok,
		BalanceSun:               a.Balance,
		CreateTime:               a.CreateTime,
		StakeEnergySun:           a.FrozenEnergy + a.DelegatedOutEnergy,
		StakeBandwidthSun:        a.FrozenBandwidth + a.DelegatedOutBandwidth,
		StakeEnergyAvailableSun:  a.FrozenEnergy,
		StakeBandwidthAvailable:  a.FrozenBandwidth,
		DelegatedOutEnergySun:    a.DelegatedOutEnergy,
		DelegatedOutBandwidthSun: a.DelegatedOutBandwidth,
		AcquiredEnergySun:        a.AcquiredEnergy,
		AcquiredBandwidthSun:     a.AcquiredBandwidth,
		DelegationsOut:           []DelegationView{},
		DelegationsIn:            []DelegationView{},
		USDT:                     st.USDT[addr],
		EnergyLimit:              energyLimit(a, tot),
		EnergyUsed:               usageAt(a.EnergyUsage, a.EnergyTime, h.Time),
		NetLimit:                 netLimit(a, tot),
		TotalEnergyWeight:        tot.TotalEnergyWeight,
		TotalEnergyLimit:         tot.TotalEnergyLimit,
		HeadBlock:                h.Num,
	}
	if ok {
		v.FreeNetLimit = s.opts.Params.FreeNetLimit
	}
	view := func(d delegation) DelegationView {
		return DelegationView{From: d.From.String(), To: d.To.String(), Lock: d.Lock, EnergySun: d.Energy,
			BandwidthSun: d.Bandwidth, ExpireEnergy: d.ExpireEnergy, ExpireBandwidth: d.ExpireBandwidth}
	}
	for _, d := range st.delegationsOf(addr, tron.Address{}) {
		v.DelegationsOut = append(v.DelegationsOut, view(d))
	}
	for _, d := range st.delegationsOf(tron.Address{}, addr) {
		v.DelegationsIn = append(v.DelegationsIn, view(d))
	}
	return v, ok
}
