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
// rentalPrice = ceil(amount × (BaseMicroSun + RateMicroSunPerSecond × seconds) / 1,000,000):
// a fixed part per unit plus a part growing with the rental period, like the lending-market
// rental contracts on mainnet. The pool's terms live in memory only (not in the state file)
// and are changed with POST /sim/deep or SetDeepReserve; renting from it is not simulated.

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
)

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
		return uint256(d.AvailableEnergy), readEnergy, true
	case len(data) == 4+64 && bytes.Equal(data[:4], SelDeepRentalPrice):
		amount := new(big.Int).SetBytes(data[4:36])
		secs := new(big.Int).SetBytes(data[36:68])
		perUnit := new(big.Int).Mul(secs, big.NewInt(d.RateMicroSunPerSecond))
		perUnit.Add(perUnit, big.NewInt(d.BaseMicroSun))
		total := new(big.Int).Mul(amount, perUnit)
		total.Add(total, big.NewInt(999_999))
		total.Quo(total, big.NewInt(1_000_000))
		if !total.IsInt64() {
			return nil, readEnergy, false
		}
		return uint256(total.Int64()), readEnergy, true
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
