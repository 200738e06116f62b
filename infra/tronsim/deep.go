package tronsim

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"math/big"
	"net/http"

	"rental/infra/tron"
)

// The deep reserve is a simulated on-chain energy rental pool: the platform's most expensive
// fallback supply (order book class "deep"). It is read, never written, through
// /wallet/triggerconstantcontract like any TRC contract, so the code reading it works
// against a real rental contract with the same ABI:
//
//	availableEnergy() returns (uint256)                          energy the pool can rent now
//	rentalPrice(uint256 amount, uint256 seconds) returns (uint256) total SUN for renting amount
//	                                                              energy for that many seconds
//
//	rent(address receiver, uint256 amount, uint256 seconds) payable
//	                                                              rent amount energy to receiver
//	                                                              for seconds
//
// rentalPrice = ceil(amount × (BaseMicroSun + RateMicroSunPerSecond × seconds) / 1,000,000):
// a fixed part per unit plus a part growing with the rental period, like the lending-market
// rental contracts on mainnet. The pool's terms live in memory only (not in the state file)
// and are changed with POST /sim/deep or SetDeepReserve.
//
// rent is a real transaction (triggersmartcontract, signed, broadcast, in a block). It
// reverts unless call_value covers rentalPrice(amount, seconds), amount is at most the
// available energy, seconds is between 1 and 30 days and the receiver is an existing
// account; the call costs DeepRentEnergy energy like any contract call (stake first, then
// burned within the fee limit). On success the contract keeps the payment and delegates
// to the receiver, from the contract's address with a lock of seconds, the whole-TRX
// balance that yields amount energy at the block's weights (tron.BalanceForEnergy rounded
// up). When the rental ends the block producer returns the delegation (the contract's own
// bookkeeping, no transaction) and the energy is available again.

// DeepReserveSeed derives the deterministic address of the simulated deep reserve contract.
const DeepReserveSeed = "tronsim deep reserve"

// DeepReserveContract is the address of the simulated deep reserve contract.
func DeepReserveContract() tron.Address {
	h := sha256.Sum256([]byte(DeepReserveSeed))
	a, _ := tron.AddressFromBytes(h[12:])
	return a
}

// DeepReserve are the pool's terms (also the body of POST /sim/deep and GET /sim/deep).
type DeepReserve struct {
	AvailableEnergy       int64 `json:"available_energy"`
	BaseMicroSun          int64 `json:"base_micro_sun"`
	RateMicroSunPerSecond int64 `json:"rate_micro_sun_per_second"`
}

// DefaultDeepReserve is 50 million energy at 40 SUN per unit plus 0.0125 SUN per unit and
// second: 43.75 SUN per unit for 5 minutes, 85 SUN per unit for one hour.
func DefaultDeepReserve() DeepReserve {
	return DeepReserve{AvailableEnergy: 50_000_000, BaseMicroSun: 40_000_000, RateMicroSunPerSecond: 12_500}
}

// Function selectors of the deep reserve ABI.
var (
	SelDeepAvailableEnergy = tron.Keccak256([]byte("availableEnergy()"))[:4]
	SelDeepRentalPrice     = tron.Keccak256([]byte("rentalPrice(uint256,uint256)"))[:4]
	SelDeepRent            = tron.Keccak256([]byte("rent(address,uint256,uint256)"))[:4]
)

// DeepRentEnergy is the energy one rent call costs.
const DeepRentEnergy = 45_000

// maxDeepRentSeconds bounds a rental's period.
const maxDeepRentSeconds = 30 * 24 * 3600

// deepRental is one live rental of the deep reserve.
type deepRental struct {
	To      tron.Address `json:"to"`
	Energy  int64        `json:"energy"`
	Balance int64        `json:"balance"`
	End     int64        `json:"end"` // chain ms
}

func (s *state) deepRented() int64 {
	var n int64
	for _, r := range s.DeepRentals {
		n += r.Energy
	}
	return n
}

// deepPrice is rentalPrice(amount, seconds); ok false when it does not fit an int64.
func deepPrice(d DeepReserve, amount, secs int64) (int64, bool) {
	perUnit := new(big.Int).Mul(big.NewInt(secs), big.NewInt(d.RateMicroSunPerSecond))
	perUnit.Add(perUnit, big.NewInt(d.BaseMicroSun))
	total := new(big.Int).Mul(big.NewInt(amount), perUnit)
	total.Add(total, big.NewInt(999_999))
	total.Quo(total, big.NewInt(1_000_000))
	return total.Int64(), total.IsInt64()
}

// execDeepRent executes a call of the deep reserve contract (see the top of this file).
func (s *state) execDeepRent(ctx execCtx, c *tron.TriggerSmartContract, net int64) (execResult, error) {
	contract := DeepReserveContract()
	owner := s.Accounts[c.OwnerAddress]
	if c.CallValue < 0 || c.CallValue > owner.Balance {
		return execResult{}, invalid("validateForSmartContract failure, not enough balance")
	}
	if ctx.feeLimit < 0 || ctx.feeLimit > ctx.p.MaxFeeLimit {
		return execResult{}, invalid("feeLimit must be >= 0 and <= %d", ctx.p.MaxFeeLimit)
	}
	res := execResult{NetUsage: net, Contract: contract}
	// Decode rent(address, uint256, uint256); anything else reverts.
	var to tron.Address
	var amount, secs int64
	ok := len(c.Data) == 4+96 && bytes.Equal(c.Data[:4], SelDeepRent)
	if ok {
		to, ok = abiAddress(c.Data[4:36])
		a, s2 := new(big.Int).SetBytes(c.Data[36:68]), new(big.Int).SetBytes(c.Data[68:100])
		ok = ok && a.IsInt64() && s2.IsInt64()
		amount, secs = a.Int64(), s2.Int64()
	}
	r := s.totals(ctx.p, ctx.num)
	var price, balance int64
	if ok {
		var fits bool
		price, fits = deepPrice(ctx.deep, amount, secs)
		recv, exists := s.Accounts[to]
		ok = fits && amount > 0 && secs > 0 && secs <= maxDeepRentSeconds && exists && !recv.IsContract &&
			amount <= ctx.deep.AvailableEnergy-s.deepRented() && c.CallValue >= price
	}
	if ok {
		b, err := tron.BalanceForEnergy(amount, r.TotalEnergyLimit, r.TotalEnergyWeight)
		balance = (b + trxPrecision - 1) / trxPrecision * trxPrecision
		ok = err == nil && balance > 0
	}
	// Energy: the call's cost from the caller's stake first, the rest burned within the
	// fee limit, as for the USDT contract.
	need := int64(DeepRentEnergy)
	used := usageAt(owner.EnergyUsage, owner.EnergyTime, ctx.now)
	stake := max(0, energyLimit(owner, r)-used)
	fromStake := min(stake, need)
	burnNeeded := (need - fromStake) * ctx.p.EnergyFee
	payable := min(owner.Balance-c.CallValue, ctx.feeLimit)
	switch {
	case burnNeeded > payable:
		res.ContractRet = "OUT_OF_ENERGY"
		res.EnergyUsage = fromStake
		res.EnergyFee = max(0, payable) / ctx.p.EnergyFee * ctx.p.EnergyFee
		res.EnergyTotal = fromStake + max(0, payable)/ctx.p.EnergyFee
	case !ok:
		res.ContractRet = "REVERT"
		res.EnergyUsage, res.EnergyFee, res.EnergyTotal = fromStake, burnNeeded, need
	default:
		res.ContractRet = "SUCCESS"
		res.EnergyUsage, res.EnergyFee, res.EnergyTotal = fromStake, burnNeeded, need
		res.ContractResult = uint256(balance)
		owner.Balance -= c.CallValue
		ca, had := s.Accounts[contract]
		if !had {
			ca = account{CreateTime: ctx.now, IsContract: true}
		}
		ca.Balance += c.CallValue
		ca.DelegatedOutEnergy += balance
		s.Accounts[contract] = ca
		recv := s.Accounts[to]
		recv.AcquiredEnergy += balance
		s.Accounts[to] = recv
		k := delegKey{contract, to, true}
		d, had := s.Delegations[k]
		if !had {
			d = delegation{From: contract, To: to, Lock: true}
		}
		end := ctx.now + secs*1000
		d.Energy += balance
		d.ExpireEnergy = max(d.ExpireEnergy, end)
		s.Delegations[k] = d
		s.DeepRentals = append(s.DeepRentals, deepRental{To: to, Energy: amount, Balance: balance, End: end})
	}
	res.Fee = res.EnergyFee
	owner.Balance -= res.EnergyFee
	owner.EnergyUsage = used + res.EnergyUsage
	owner.EnergyTime = ctx.now
	s.Accounts[c.OwnerAddress] = owner
	return res, nil
}

// endDeepRentals returns every rental that ended by now: the delegation goes back to the
// contract and its energy is available again.
func (s *state) endDeepRentals(now int64) {
	contract := DeepReserveContract()
	keep := s.DeepRentals[:0]
	for _, r := range s.DeepRentals {
		if r.End > now {
			keep = append(keep, r)
			continue
		}
		s.unlockExpired(contract, r.To, now)
		left := r.Balance
		for _, lock := range []bool{false, true} {
			k := delegKey{contract, r.To, lock}
			d, ok := s.Delegations[k]
			if !ok || left == 0 {
				continue
			}
			take := min(d.Energy, left)
			d.Energy -= take
			left -= take
			if d.Energy == 0 {
				d.ExpireEnergy = 0
			}
			if d.Energy == 0 && d.Bandwidth == 0 {
				delete(s.Delegations, k)
			} else {
				s.Delegations[k] = d
			}
		}
		recv := s.Accounts[r.To]
		recv.AcquiredEnergy = max(0, recv.AcquiredEnergy-r.Balance)
		s.Accounts[r.To] = recv
		ca := s.Accounts[contract]
		ca.DelegatedOutEnergy = max(0, ca.DelegatedOutEnergy-r.Balance)
		s.Accounts[contract] = ca
	}
	s.DeepRentals = keep
}

// abiAddress reads an ABI address word (12 zero bytes and the 20-byte account).
func abiAddress(w []byte) (tron.Address, bool) {
	for _, b := range w[:12] {
		if b != 0 {
			return tron.Address{}, false
		}
	}
	a, err := tron.AddressFromBytes(w[12:])
	return a, err == nil
}

// DeepReserve returns the pool's current terms.
func (s *Sim) DeepReserve() DeepReserve {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.deepLocked()
}

func (s *Sim) deepLocked() DeepReserve {
	if s.deep == nil {
		return DefaultDeepReserve()
	}
	return *s.deep
}

// SetDeepReserve replaces the pool's terms.
func (s *Sim) SetDeepReserve(d DeepReserve) error {
	if d.AvailableEnergy < 0 || d.BaseMicroSun < 0 || d.RateMicroSunPerSecond < 0 {
		return errors.New("deep reserve: values must not be negative")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.deep = &d
	return nil
}

// deepCallLocked answers a constant call to the deep reserve; ok false means revert.
func (s *Sim) deepCallLocked(data []byte) (out []byte, energy int64, ok bool) {
	const readEnergy = 800
	d := s.deepLocked()
	switch {
	case len(data) == 4 && bytes.Equal(data, SelDeepAvailableEnergy):
		return uint256(max(0, d.AvailableEnergy-s.viewLocked().deepRented())), readEnergy, true
	case len(data) == 4+64 && bytes.Equal(data[:4], SelDeepRentalPrice):
		amount := new(big.Int).SetBytes(data[4:36])
		secs := new(big.Int).SetBytes(data[36:68])
		if !amount.IsInt64() || !secs.IsInt64() {
			return nil, readEnergy, false
		}
		total, fits := deepPrice(d, amount.Int64(), secs.Int64())
		if !fits {
			return nil, readEnergy, false
		}
		return uint256(total), readEnergy, true
	}
	return nil, readEnergy, false
}

func (s *Sim) deepRoutes(mux *http.ServeMux) {
	mux.HandleFunc("GET /sim/deep", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, struct {
			Contract string `json:"contract"`
			DeepReserve
		}{DeepReserveContract().String(), s.DeepReserve()})
	})
	mux.HandleFunc("POST /sim/deep", func(w http.ResponseWriter, r *http.Request) {
		d := s.DeepReserve()
		if err := json.NewDecoder(r.Body).Decode(&d); err != nil {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": err.Error()})
			return
		}
		if err := s.SetDeepReserve(d); err != nil {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": err.Error()})
			return
		}
		writeJSON(w, http.StatusOK, d)
	})
}
