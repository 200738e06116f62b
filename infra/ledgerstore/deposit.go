package ledgerstore

import (
	"context"
	"errors"
	"math/big"
	"time"

	"github.com/jackc/pgx/v5"

	"rental/infra/deposits"
	"rental/schemas/ledger"
)

// Rate is a USDT rate before the spread, as a deposit is credited at: SUN per 1 USDT and
// where it came from (fixed_env, <swap>_v3@<block>).
type Rate struct {
	SunPerUSDT int64
	Source     string
	At         time.Time
}

// DepositCredit is a deposit row to credit (by the consumer or by support).
type DepositCredit struct {
	ID, FactID, AccountID, TxHash, Sender string
	BlockNum                              int64
	Asset                                 string
	Amount                                *big.Int       // SUN for TRX, token units for USDT
	Rate                                  Rate           // USDT: rate before the spread
	SpreadBps                             int            // USDT
	Actor                                 string         // "crediting" or "support:<who>"
	Details                               map[string]any // extra posting details
}

// CreditDeposit credits a deposit row in tx: the ledger credit (posting ref
// deposit:<fact_id>, balance.credited with the TRX or USDT fields, unless an earlier
// inclusion of the same transfer announced it already) and the row's status.
func (l *Ledger) CreditDeposit(ctx context.Context, tx pgx.Tx, d DepositCredit) error {
	info := &DepositInfo{TxHash: d.TxHash, Sender: d.Sender, BlockNumber: d.BlockNum}
	var sun int64
	var rateAfter *int64
	var source *string
	var spread *int
	if d.Asset == "USDT" {
		after := ledger.RateAfterSpread(d.Rate.SunPerUSDT, d.SpreadBps)
		v, err := ledger.USDTToSun(d.Amount, after)
		if err != nil {
			return err
		}
		sun = v
		usdt, src, sp := ledger.FormatUSDT(d.Amount), d.Rate.Source, d.SpreadBps
		rateAfter, source, spread = &after, &src, &sp
		info.USDTAmount, info.RateSun, info.RateSource, info.SpreadBps = &usdt, &after, &src, &sp
	} else {
		if !d.Amount.IsInt64() {
			return errors.New("ledger: TRX amount out of range")
		}
		sun = d.Amount.Int64()
	}
	if sun <= 0 {
		// A USDT dust amount worth less than one SUN: nothing to credit.
		return deposits.SetStatus(ctx, tx, d.ID, ledger.StatusResidual)
	}
	details := map[string]any{"deposit_id": d.ID, "tx_hash": d.TxHash, "asset": d.Asset, "amount": d.Amount.String(), "by": d.Actor}
	for k, v := range d.Details {
		details[k] = v
	}
	announced, err := deposits.Announced(ctx, tx, d.ID)
	if err != nil {
		return err
	}
	if _, err := l.Credit(ctx, tx, Credit{AccountID: d.AccountID, Kind: ledger.KindDeposit, Ref: d.FactID, AmountSun: sun,
		ReferenceID: d.ID, Deposit: info, Details: details, Quiet: announced}); err != nil {
		return err
	}
	return deposits.MarkCredited(ctx, tx, deposits.Credited{ID: d.ID, Sun: sun, RateSun: rateAfter, RateSource: source,
		SpreadBps: spread, PostingRef: "deposit:" + d.FactID, By: d.Actor})
}
