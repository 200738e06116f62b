// Package ledger holds the ledger's domain rules without SQL or transport: the posting
// model (kinds and the ledger accounts each kind moves money between), amount validation,
// the funds errors of a refused hold, the classification of deposits and the USDT to TRX
// conversion. infra/ledgerstore applies these rules to Postgres; docs/ledger.md describes them.
package ledger

import (
	"errors"
	"fmt"
	"math/big"
	"strings"

	"rental/schemas/apierr"
)

// Kind is the kind of a posting.
type Kind string

const (
	KindDeposit         Kind = "deposit"          // world -> customer: a credited chain deposit
	KindDepositReversal Kind = "deposit_reversal" // customer -> world: a credited deposit orphaned by a fork
	KindCapture         Kind = "capture"          // customer -> revenue: a hold posted at delivery
	KindRefund          Kind = "refund"           // revenue -> customer: money of a captured order given back
	KindAdjustment      Kind = "adjustment"       // equity -> customer: a support credit
	KindReferral        Kind = "referral"         // expense -> customer: a referral reward
	// The transfer account's own kinds (pay by transfer, docs/pricing.md).
	KindPaymentKept   Kind = "payment_kept"   // customer -> revenue:payments: surplus below one unit, dust
	KindPaymentRefund Kind = "payment_refund" // customer -> world:deposits: a transfer sent back to its sender
)

// System ledger accounts. Customer ledger accounts are Customer(accountID).
const (
	WorldDeposits     = "world:deposits"     // the chain: where deposits come from
	RevenueOrders     = "revenue:orders"     // captured order payments
	EquityAdjustments = "equity:adjustments" // support credits
	ExpenseReferrals  = "expense:referrals"  // referral rewards
	RevenuePayments   = "revenue:payments"   // kept parts of transfers to payment addresses
)

// Customer is the ledger account of a customer account.
func Customer(accountID string) string { return "customer:" + accountID }

// Legs returns the debit and credit ledger accounts of a posting of kind k for a customer.
func Legs(k Kind, accountID string) (debit, credit string, err error) {
	c := Customer(accountID)
	switch k {
	case KindDeposit:
		return WorldDeposits, c, nil
	case KindDepositReversal:
		return c, WorldDeposits, nil
	case KindCapture:
		return c, RevenueOrders, nil
	case KindRefund:
		return RevenueOrders, c, nil
	case KindAdjustment:
		return EquityAdjustments, c, nil
	case KindReferral:
		return ExpenseReferrals, c, nil
	case KindPaymentKept:
		return c, RevenuePayments, nil
	case KindPaymentRefund:
		return c, WorldDeposits, nil
	}
	return "", "", fmt.Errorf("ledger: unknown posting kind %q", k)
}

// Credited reports whether a posting of kind k adds to the customer's balance.
func (k Kind) Credited() bool {
	switch k {
	case KindDeposit, KindRefund, KindAdjustment, KindReferral:
		return true
	}
	return false
}

// Reason is the balance.credited reason of a crediting posting kind.
func (k Kind) Reason() string {
	switch k {
	case KindDeposit:
		return "deposit"
	case KindRefund:
		return "refund"
	case KindReferral:
		return "referral"
	}
	return "adjustment"
}

// MaxAmountSun bounds a single movement: 10^15 SUN (a billion TRX), far above any real
// order or deposit, so that sums of many movements cannot overflow int64.
const MaxAmountSun = 1_000_000_000_000_000

// ErrAmount is returned for an amount out of range.
var ErrAmount = errors.New("ledger: amount must be between 1 and 10^15 SUN")

// ValidateAmount checks a movement amount in SUN.
func ValidateAmount(sun int64) error {
	if sun <= 0 || sun > MaxAmountSun {
		return fmt.Errorf("%w (got %d)", ErrAmount, sun)
	}
	return nil
}

// ValidateRef checks an idempotency reference: 1 to 200 printable ASCII characters.
func ValidateRef(ref string) error {
	if ref == "" || len(ref) > 200 {
		return errors.New("ledger: reference must be 1 to 200 characters")
	}
	for i := 0; i < len(ref); i++ {
		if ref[i] < 0x21 || ref[i] > 0x7e {
			return errors.New("ledger: reference must be printable ASCII without spaces")
		}
	}
	return nil
}

// FundsError is the answer to a hold of required SUN that the balance cannot take:
// 4002 balance_reserved when the balance alone would cover it but holds of in-flight orders
// block it, else 4001 insufficient_funds. Both carry required_sun and available_sun.
func FundsError(balanceSun, reservedSun, requiredSun int64) *apierr.Error {
	available := max(balanceSun-reservedSun, 0)
	var e *apierr.Error
	if balanceSun >= requiredSun {
		e = apierr.BalanceReserved.Newf("balance covers %d SUN but %d SUN are reserved by in-flight orders", requiredSun, reservedSun)
	} else {
		e = apierr.InsufficientFunds.Newf("available balance %d SUN is below the required %d SUN", available, requiredSun)
	}
	return e.With("required_sun", requiredSun).With("available_sun", available)
}

// Deposit statuses (deposits.status).
const (
	StatusPending       = "pending"         // seen, waiting for confirmations
	StatusCredited      = "credited"        // credited to the balance
	StatusHeldBelowMin  = "held_below_min"  // USDT below the auto-credit minimum
	StatusHeldForReview = "held_for_review" // USDT above the auto-credit maximum
	StatusHeldNoRate    = "held_no_rate"    // USDT while no rate is available
	StatusHeldRetired   = "held_retired"    // sent to a retired address after credited_until
	StatusResidual      = "residual"        // TRX below min_deposit_sun: unclaimed residual
	StatusOrphaned      = "orphaned"        // its block left the chain before it was confirmed
	StatusReverted      = "reverted"        // cancelled by a revert fact
)

// Held reports whether a deposit status waits for support (admin credit-held).
func Held(status string) bool {
	switch status {
	case StatusHeldBelowMin, StatusHeldForReview, StatusHeldNoRate, StatusHeldRetired, StatusResidual:
		return true
	}
	return false
}

// USDTDecimals is the number of decimals of TRC-20 USDT.
const USDTDecimals = 6

var usdtUnit = big.NewInt(1_000_000)

// ParseUSDT reads a decimal USDT string ("5", "2000", "12.5") into token units.
func ParseUSDT(s string) (*big.Int, error) {
	whole, frac, _ := strings.Cut(s, ".")
	if whole == "" || len(frac) > USDTDecimals || strings.ContainsAny(s, "+- ") {
		return nil, fmt.Errorf("ledger: USDT amount %q: want a decimal with at most 6 decimals", s)
	}
	v, ok := new(big.Int).SetString(whole+frac+strings.Repeat("0", USDTDecimals-len(frac)), 10)
	if !ok || v.Sign() < 0 {
		return nil, fmt.Errorf("ledger: USDT amount %q is not a decimal", s)
	}
	return v, nil
}

// FormatUSDT renders token units as a decimal string without trailing zeros ("12.5").
func FormatUSDT(units *big.Int) string {
	q, r := new(big.Int).QuoRem(units, usdtUnit, new(big.Int))
	if r.Sign() == 0 {
		return q.String()
	}
	frac := fmt.Sprintf("%06s", r.String())
	return q.String() + "." + strings.TrimRight(frac, "0")
}

// FormatTRX renders SUN as a decimal TRX string ("3.4" for 3,400,000 SUN).
func FormatTRX(sun int64) string { return FormatUSDT(big.NewInt(sun)) } // both have 6 decimals

// RateAfterSpread is the SUN credited per 1 USDT: the rate (SUN per USDT) minus spreadBps
// basis points, rounded down.
func RateAfterSpread(rateSun int64, spreadBps int) int64 {
	return new(big.Int).Div(new(big.Int).Mul(big.NewInt(rateSun), big.NewInt(int64(10_000-spreadBps))), big.NewInt(10_000)).Int64()
}

// USDTToSun converts token units at rateAfterSun (SUN per 1 USDT), rounding down.
func USDTToSun(units *big.Int, rateAfterSun int64) (int64, error) {
	v := new(big.Int).Mul(units, big.NewInt(rateAfterSun))
	v.Quo(v, usdtUnit)
	if !v.IsInt64() || v.Int64() > MaxAmountSun {
		return 0, fmt.Errorf("ledger: %s USDT at %d SUN is out of range", FormatUSDT(units), rateAfterSun)
	}
	return v.Int64(), nil
}

// USDTLimits are the auto-credit bounds of USDT deposits, in token units (inclusive).
type USDTLimits struct{ Min, Max *big.Int }

// ClassifyUSDT decides what happens to a confirmed USDT deposit of units.
func ClassifyUSDT(units *big.Int, l USDTLimits, haveRate bool) string {
	switch {
	case units.Cmp(l.Min) < 0:
		return StatusHeldBelowMin
	case units.Cmp(l.Max) > 0:
		return StatusHeldForReview
	case !haveRate:
		return StatusHeldNoRate
	}
	return StatusCredited
}

// ClassifyTRX decides what happens to a confirmed TRX deposit of sun.
func ClassifyTRX(sun, minDepositSun int64) string {
	if sun < minDepositSun {
		return StatusResidual
	}
	return StatusCredited
}

// EstimatedOrders is how many orders of orderSun the available balance still pays for.
func EstimatedOrders(availableSun, orderSun int64) int64 {
	if orderSun <= 0 || availableSun <= 0 {
		return 0
	}
	return availableSun / orderSun
}
