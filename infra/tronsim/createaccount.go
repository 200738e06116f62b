package tronsim

import "rental/infra/tron"

// createNewAccountBandwidthRatio is java-tron's getCreateNewAccountBandwidthRate (1 on
// mainnet and nile): the staked bandwidth a new account's creation takes per byte.
const createNewAccountBandwidthRatio = 1

// chargeCreateAccount is BandwidthProcessor.consumeForCreateNewAccount, which java-tron runs
// for a transaction creating an account (a TRX transfer to a new address, an
// AccountCreateContract) before the contract is validated: the owner's staked bandwidth
// pays bytes × createNewAccountBandwidthRatio when it has that much left
// (consumeBandwidthForCreateNewAccount; the free allowance never does), else
// CreateAccountFee is burned (consumeFeeForCreateNewAccount), else the transaction is
// refused with AccountResourceInsufficientException (BANDWITH_ERROR), before the
// actuator's own balance check. Building the transaction (createtransaction,
// createaccount) runs only the actuator's validation.
func (s *state) chargeCreateAccount(ctx execCtx, owner tron.Address, bytes int64) (bandwidthCharge, error) {
	a := s.Accounts[owner]
	r := s.totals(ctx.p, ctx.num)
	cost := bytes * createNewAccountBandwidthRatio
	used := usageAt(a.NetUsage, a.NetTime, ctx.now)
	if cost <= netLimit(a, r)-used {
		a.NetUsage, a.NetTime = used+cost, ctx.now
		s.Accounts[owner] = a
		return bandwidthCharge{fromStakeOrFree: cost}, nil
	}
	if fee := ctx.p.CreateAccountFee; a.Balance >= fee {
		a.Balance -= fee
		s.Accounts[owner] = a
		return bandwidthCharge{burned: fee}, nil
	}
	return bandwidthCharge{}, bandwidthError{}
}
