package supply

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"math/big"

	"rental/infra/tron"
	"rental/schemas/pricing"
)

// DeepReserve reads an on-chain energy rental contract with the ABI
//
//	availableEnergy() returns (uint256)
//	rentalPrice(uint256 amount, uint256 seconds) returns (uint256 totalSun)
//	rent(address receiver, uint256 amount, uint256 seconds) payable
//
// through triggerconstantcontract (no transaction, no fee); the order processor rents with
// a signed rent call (RentCall). The simulator deploys one at
// tronsim.DeepReserveContract(). Deep supply is energy only.
type DeepReserve struct {
	node     Node
	contract tron.Address
	caller   tron.Address
	// RefAmount is the amount the per-unit cost is derived from: cost = ceil(rentalPrice(
	// RefAmount, seconds) × 100 / RefAmount) centisun, so a price that is not linear in the
	// amount is sampled at a typical order size.
	RefAmount int64
}

// NewDeepReserve reads contract, calling from caller (any activated address; the platform's
// first pool address in practice).
func NewDeepReserve(node Node, contract, caller tron.Address) *DeepReserve {
	return &DeepReserve{node: node, contract: contract, caller: caller, RefAmount: 1_000_000}
}

var (
	selAvailableEnergy = tron.Keccak256([]byte("availableEnergy()"))[:4]
	selRentalPrice     = tron.Keccak256([]byte("rentalPrice(uint256,uint256)"))[:4]
	selRent            = tron.Keccak256([]byte("rent(address,uint256,uint256)"))[:4]
)

// Offers are the deep offers for the given tiers: the same available energy at each tier's
// price. A pool with no energy gives no offers.
func (d *DeepReserve) Offers(ctx context.Context, tiers []pricing.Tier) ([]pricing.Offer, error) {
	avail, err := d.call(ctx, selAvailableEnergy)
	if err != nil {
		return nil, fmt.Errorf("supply: deep availableEnergy: %w", err)
	}
	if avail.Sign() <= 0 {
		return nil, nil
	}
	amount := avail.Int64()
	if !avail.IsInt64() {
		amount = 1<<62 - 1
	}
	var out []pricing.Offer
	for _, t := range tiers {
		data := append([]byte{}, selRentalPrice...)
		data = append(data, word(d.RefAmount)...)
		data = append(data, word(pricing.TierSeconds(t))...)
		total, err := d.call(ctx, data)
		if err != nil {
			return nil, fmt.Errorf("supply: deep rentalPrice %s: %w", t, err)
		}
		// cost per unit in centisun, rounded up: the platform never books supply below
		// what it pays.
		c := new(big.Int).Mul(total, big.NewInt(pricing.CentisunPerSun))
		c.Add(c, big.NewInt(d.RefAmount-1))
		c.Quo(c, big.NewInt(d.RefAmount))
		if !c.IsInt64() || c.Sign() <= 0 {
			return nil, fmt.Errorf("supply: deep rentalPrice %s: unusable price %s", t, total)
		}
		out = append(out, pricing.Offer{Class: pricing.ClassDeep, Source: "deep:" + d.contract.String(),
			Resource: pricing.Energy, Tier: t, Cost: pricing.Centisun(c.Int64()), Amount: amount})
	}
	return out, nil
}

// Contract is the rental contract's address: the address its delegations come from.
func (d *DeepReserve) Contract() tron.Address { return d.contract }

// Available is the energy the contract can rent now.
func (d *DeepReserve) Available(ctx context.Context) (int64, error) {
	v, err := d.call(ctx, selAvailableEnergy)
	if err != nil {
		return 0, fmt.Errorf("supply: deep availableEnergy: %w", err)
	}
	if !v.IsInt64() {
		return 1<<62 - 1, nil
	}
	return v.Int64(), nil
}

// RentalPrice is what renting amount energy for seconds costs now (SUN).
func (d *DeepReserve) RentalPrice(ctx context.Context, amount, seconds int64) (int64, error) {
	data := append(append(append([]byte{}, selRentalPrice...), word(amount)...), word(seconds)...)
	v, err := d.call(ctx, data)
	if err != nil {
		return 0, fmt.Errorf("supply: deep rentalPrice: %w", err)
	}
	if !v.IsInt64() || v.Sign() <= 0 {
		return 0, fmt.Errorf("supply: deep rentalPrice: unusable price %s", v)
	}
	return v.Int64(), nil
}

// RentCall is the call data of rent(receiver, amount, seconds): the payable call that rents
// amount energy to receiver for seconds (call_value: RentalPrice).
func (d *DeepReserve) RentCall(receiver tron.Address, amount, seconds int64) []byte {
	data := append([]byte{}, selRent...)
	data = append(data, make([]byte, 12)...)
	data = append(data, receiver[1:]...)
	return append(append(data, word(amount)...), word(seconds)...)
}

func (d *DeepReserve) call(ctx context.Context, data []byte) (*big.Int, error) {
	ext, err := d.node.TriggerConstantContract(ctx, &tron.TriggerSmartContract{
		OwnerAddress: d.caller, ContractAddress: d.contract, Data: data,
	})
	if err != nil {
		return nil, err
	}
	if !ext.Result.Result || len(ext.ConstantResult) == 0 {
		msg, _ := hex.DecodeString(ext.Result.Message)
		return nil, fmt.Errorf("call refused: %s %s", ext.Result.Code, msg)
	}
	out, err := hex.DecodeString(ext.ConstantResult[0])
	if err != nil || len(out) != 32 {
		return nil, errors.New("call returned no uint256")
	}
	return new(big.Int).SetBytes(out), nil
}

func word(v int64) []byte {
	b := make([]byte, 32)
	big.NewInt(v).FillBytes(b)
	return b
}
