// Package crediting credits deposits: it consumes chainwatch's chain facts (topic
// chain.facts.v1) and turns TRX transfers and USDT Transfer logs to deposit addresses into
// ledger credits, exactly once per (transaction, log index).
//
// Exactly once. Each transfer to a deposit address gets one row in `deposits`, unique on
// (tx_hash, log_index); the row, the ledger posting (ref deposit:<fact_id>), the balance, the
// account activation and balance.credited commit in one transaction. A re-read fact (Kafka
// redelivery after a crash, a relay republish) finds its row and does nothing. A revert fact
// (fork) finds the row by the cancelled fact_id, reverses a credit that happened
// (deposit_reversal) and marks the row reverted; the same transfer included again on the new
// branch arrives with a new fact_id and takes the row up again. Offsets are committed only
// after the handler returned (infra/kafka.Runner), so a SIGKILL loses nothing either.
//
// Confirmations. chainwatch emits facts only from blocks Options.FactDepth (its
// CONFIRMATIONS) below the head. When the deposit rule asks for more
// (DEPOSIT_CONFIRMATIONS > CONFIRMATIONS), the handler waits until the node's head is
// ConfirmationsRequired above the fact's block and the node still has the fact's block at
// that height; a block that left the chain meanwhile is recorded as orphaned, never
// credited, and its revert fact follows. When FactDepth already covers the requirement no
// node call is made.
package crediting

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/big"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kgo"

	"rental/infra/deposits"
	"rental/infra/kafka"
	"rental/infra/ledgerstore"
	"rental/infra/tron"
	"rental/schemas/events"
	"rental/schemas/ledger"
	"rental/schemas/topics"
)

// Chain is the node view the confirmation wait needs (*tron.Client implements it).
type Chain interface {
	GetHead(ctx context.Context) (*tron.Block, error)
	GetBlockByNum(ctx context.Context, num int64) (*tron.Block, error)
}

// Options configure a Consumer.
type Options struct {
	Pool   *pgxpool.Pool
	Ledger *ledgerstore.Ledger
	// Rates gives the USDT rate at credit time; nil or no rate holds USDT deposits
	// (held_no_rate) until support credits them.
	Rates        deposits.RateSource
	USDTContract tron.Address // Transfer logs of other tokens are ignored
	// OwnAddresses are the service's own addresses (stake pools, treasury): a transfer from
	// one of them to a deposit address is an internal move (for example TRX sent to pay a
	// sweep's fees), never a customer deposit.
	OwnAddresses []tron.Address

	ConfirmationsRequired int   // DEPOSIT_CONFIRMATIONS
	FactDepth             int   // chainwatch's CONFIRMATIONS
	Chain                 Chain // required when ConfirmationsRequired > FactDepth

	SpreadBps        int    // USDT_SPREAD_BPS
	USDTMin, USDTMax string // decimal USDT, inclusive auto-credit range
	MinDepositSun    int64  // TRX below it is an unclaimed residual

	// WaitStep bounds one handler call's wait for confirmations (default 10 s); after it the
	// handler returns an error and the runner retries the same record with backoff, which
	// keeps a rebalance from waiting on a long confirmation.
	WaitStep time.Duration
	// PollEvery is the head poll interval while waiting (default 500 ms).
	PollEvery time.Duration
	Logger    *slog.Logger
}

// Consumer credits deposits from chain facts.
type Consumer struct {
	o      Options
	limits ledger.USDTLimits
	own    map[string]bool
	log    *slog.Logger
}

// ErrNotConfirmed is returned while a fact's block lacks confirmations; the runner retries.
var ErrNotConfirmed = errors.New("crediting: deposit not yet confirmed")

// New validates the options.
func New(o Options) (*Consumer, error) {
	if o.Pool == nil || o.Ledger == nil {
		return nil, errors.New("crediting: Pool and Ledger are required")
	}
	if o.USDTContract.IsZero() {
		return nil, errors.New("crediting: USDTContract is required")
	}
	if o.ConfirmationsRequired <= 0 {
		o.ConfirmationsRequired = deposits.DefaultConfirmations
	}
	if o.ConfirmationsRequired > o.FactDepth && o.Chain == nil {
		return nil, fmt.Errorf("crediting: %d confirmations required but facts arrive %d deep: a Chain is needed to wait",
			o.ConfirmationsRequired, o.FactDepth)
	}
	if o.SpreadBps < 0 || o.SpreadBps >= 10_000 {
		return nil, fmt.Errorf("crediting: spread %d bps out of range", o.SpreadBps)
	}
	if o.USDTMin == "" {
		o.USDTMin = deposits.DefaultMinUSDT
	}
	if o.USDTMax == "" {
		o.USDTMax = deposits.DefaultMaxUSDT
	}
	lo, err := ledger.ParseUSDT(o.USDTMin)
	if err != nil {
		return nil, err
	}
	hi, err := ledger.ParseUSDT(o.USDTMax)
	if err != nil {
		return nil, err
	}
	if o.MinDepositSun <= 0 {
		o.MinDepositSun = 1_000_000
	}
	if o.WaitStep <= 0 {
		o.WaitStep = 10 * time.Second
	}
	if o.PollEvery <= 0 {
		o.PollEvery = 500 * time.Millisecond
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	own := map[string]bool{}
	for _, a := range o.OwnAddresses {
		own[a.String()] = true
	}
	return &Consumer{o: o, limits: ledger.USDTLimits{Min: lo, Max: hi}, own: own, log: o.Logger.With("stage", "crediting")}, nil
}

// Handle is the kafka.Handler of chain.facts.v1.
func (c *Consumer) Handle(ctx context.Context, r *kgo.Record) error {
	var f events.ChainFact
	if err := json.Unmarshal(r.Value, &f); err != nil {
		// A record that is not a fact can never become one: the runner dead-letters it.
		return kafka.Unprocessable(fmt.Errorf("not a chain fact: %w", err))
	}
	return c.HandleFact(ctx, f)
}

// HandleFact applies one chain fact. It is idempotent.
func (c *Consumer) HandleFact(ctx context.Context, f events.ChainFact) error {
	switch f.Kind {
	case events.FactTRXTransfer:
		return c.transfer(ctx, f)
	case events.FactTRC20Transfer:
		if f.Token != c.o.USDTContract.String() {
			return nil
		}
		return c.transfer(ctx, f)
	case events.FactRevert:
		if f.RevertedKind == events.FactTRXTransfer || f.RevertedKind == events.FactTRC20Transfer {
			return c.revert(ctx, f)
		}
	}
	return nil
}

func logIndex(f events.ChainFact) int {
	if f.LogIndex == nil {
		return -1
	}
	return *f.LogIndex
}

func (c *Consumer) transfer(ctx context.Context, f events.ChainFact) error {
	if c.own[f.From] {
		return nil
	}
	info, ok, err := deposits.Lookup(ctx, c.o.Pool, f.To)
	if err != nil || !ok {
		return err // not a deposit address: nothing to do
	}
	// Already applied (a re-read)? Then skip the confirmation wait too.
	status, factID, found, err := deposits.Recorded(ctx, c.o.Pool, f.TxID, logIndex(f))
	if err != nil {
		return err
	}
	if found && (factID == f.FactID || (status != ledger.StatusReverted && status != ledger.StatusOrphaned)) {
		return nil
	}
	onChain, err := c.confirmed(ctx, f)
	if err != nil {
		return err
	}
	return pgx.BeginFunc(ctx, c.o.Pool, func(tx pgx.Tx) error { return c.apply(ctx, tx, f, info, onChain) })
}

// confirmed waits until f's block has the required confirmations; false means the block
// left the chain (its revert fact follows).
func (c *Consumer) confirmed(ctx context.Context, f events.ChainFact) (bool, error) {
	if c.o.ConfirmationsRequired <= c.o.FactDepth {
		return true, nil
	}
	deadline := time.Now().Add(c.o.WaitStep)
	for {
		head, err := c.o.Chain.GetHead(ctx)
		if err != nil {
			return false, fmt.Errorf("crediting: read head: %w", err)
		}
		if head.Number()-f.BlockNum >= int64(c.o.ConfirmationsRequired) {
			b, err := c.o.Chain.GetBlockByNum(ctx, f.BlockNum)
			if err != nil {
				return false, fmt.Errorf("crediting: read block %d: %w", f.BlockNum, err)
			}
			return b.BlockID == f.BlockID, nil
		}
		if time.Now().After(deadline) {
			return false, fmt.Errorf("%w: block %d, head %d, %d confirmations required", ErrNotConfirmed, f.BlockNum, head.Number(), c.o.ConfirmationsRequired)
		}
		t := time.NewTimer(c.o.PollEvery)
		select {
		case <-ctx.Done():
			t.Stop()
			return false, ctx.Err()
		case <-t.C:
		}
	}
}

// apply records the deposit and credits or holds it, in tx.
func (c *Consumer) apply(ctx context.Context, tx pgx.Tx, f events.ChainFact, info deposits.AddressInfo, onChain bool) error {
	asset, amount := "TRX", big.NewInt(f.AmountSun)
	if f.Kind == events.FactTRC20Transfer {
		asset = "USDT"
		v, ok := new(big.Int).SetString(f.Amount, 10)
		if !ok {
			return kafka.Unprocessable(fmt.Errorf("USDT fact %s with a malformed amount %q", f.FactID, f.Amount)) // dead-lettered
		}
		amount = v
	}
	if amount.Sign() <= 0 {
		return nil
	}
	// Insert, or take up a row whose earlier inclusion was reverted or orphaned. No row back
	// means a concurrent or earlier handler applied this transfer already.
	id, recorded, err := deposits.Record(ctx, tx, deposits.Transfer{TxHash: f.TxID, LogIndex: logIndex(f), FactID: f.FactID,
		BlockNum: f.BlockNum, BlockID: f.BlockID, BlockTime: time.Time(f.BlockTime), AccountID: info.AccountID,
		Address: f.To, Sender: f.From, Asset: asset, Amount: amount.String()})
	if err != nil || !recorded {
		return err
	}
	if !onChain {
		return deposits.SetStatus(ctx, tx, id, ledger.StatusOrphaned)
	}

	var status string
	var rate deposits.Rate
	haveRate := false
	switch {
	case !info.Credits(time.Time(f.BlockTime)):
		status = ledger.StatusHeldRetired
	case asset == "TRX":
		status = ledger.ClassifyTRX(f.AmountSun, c.o.MinDepositSun)
	default:
		if c.o.Rates != nil {
			if rate, haveRate, err = c.o.Rates.Rate(ctx); err != nil {
				return fmt.Errorf("crediting: USDT rate: %w", err)
			}
		}
		status = ledger.ClassifyUSDT(amount, c.limits, haveRate)
	}
	if status != ledger.StatusCredited {
		err := deposits.SetStatus(ctx, tx, id, status)
		if err == nil {
			c.log.Info("deposit held", "deposit", id, "account", info.AccountID, "asset", asset, "amount", amount.String(), "status", status)
		}
		return err
	}
	return c.o.Ledger.CreditDeposit(ctx, tx, ledgerstore.DepositCredit{
		ID: id, FactID: f.FactID, AccountID: info.AccountID, TxHash: f.TxID, Sender: f.From, BlockNum: f.BlockNum,
		Asset: asset, Amount: amount, Rate: ledgerstore.Rate(rate), SpreadBps: c.o.SpreadBps, Actor: "crediting",
	})
}

// revert undoes what the cancelled fact did.
func (c *Consumer) revert(ctx context.Context, f events.ChainFact) error {
	return pgx.BeginFunc(ctx, c.o.Pool, func(tx pgx.Tx) error {
		d, found, err := deposits.LockByFact(ctx, tx, f.Reverts)
		if err != nil || !found {
			return err // not found: not a deposit, or the transfer was taken up by a later inclusion already
		}
		id, account, status, credited := d.ID, d.AccountID, d.Status, d.CreditedSun
		if status == ledger.StatusReverted {
			return nil
		}
		if status == ledger.StatusCredited && credited != nil {
			if err := c.o.Ledger.ReverseDeposit(ctx, tx, account, f.Reverts, *credited, map[string]any{
				"deposit_id": id, "tx_hash": f.TxID, "revert_fact": f.FactID,
			}); err != nil {
				return err
			}
			c.log.Warn("credited deposit reverted by a fork", "deposit", id, "account", account, "sun", *credited)
		}
		return deposits.SetStatus(ctx, tx, id, ledger.StatusReverted)
	})
}

// Group is the consumer group of the crediting stage.
const Group = "crediting"

// NewRunner is the stage: c's handler on chain.facts.v1 in consumer group Group. o carries
// the brokers and any tuning; Topics and Handler are set here, Group when empty.
func NewRunner(c *Consumer, o kafka.RunnerOptions) (*kafka.Runner, error) {
	if o.Group == "" {
		o.Group = Group
	}
	o.Topics, o.Handler = []string{topics.ChainFacts.Name}, c.Handle
	return kafka.NewRunner(o)
}
