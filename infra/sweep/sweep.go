// Package sweep moves credited deposits from deposit addresses to the treasury address.
//
// Each run is a step of a small state machine kept in the `sweeps` table; nothing waits or
// sleeps for a block inside a run:
//
//  1. Open rows (signed, not yet in a block) are looked up on the node: a landed
//     transaction closes its row (confirmed or failed); one still pending is broadcast again
//     (the same signed bytes, so the same transaction id); one past its expiration without
//     landing is failed, which lets the next run sign a fresh one.
//  2. For every deposit address with a credited deposit newer than its last confirmed sweep:
//     USDT first. An address that only ever received USDT has no account on chain (a
//     TRC-20 transfer creates none): the pool creates it first (kind activate). The
//     transfer needs energy: when the address lacks it and an energy pool
//     key is configured, the pool delegates enough (kind delegate), and a later run, once the
//     delegation landed, signs the USDT transfer (kind usdt); after that transfer lands the
//     delegation is taken back (kind undelegate). Then TRX: the balance minus KeepSun (kind
//     trx), once no USDT is left to move.
//
// Every transaction is built by the node, checked against the intent (tron.CheckBuilt),
// signed with a key derived from the HD seed (m/44'/195'/0'/0/<index>, or the pool key),
// stored with its row in one commit, and only then broadcast. A crash between commit and
// broadcast is healed by step 1. At most one open row exists per address and kind (unique
// index), so concurrent sweepers cannot double-spend.
//
// Sweeps move custody only: customer balances in the ledger are unchanged, and held
// deposits that sit on the same address travel with the balance (support credits them from
// the ledger side).
package sweep

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/big"
	"strings"
	"time"

	"github.com/btcsuite/btcd/btcutil/hdkeychain"
	"github.com/btcsuite/btcd/chaincfg"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"rental/infra/custody"
	"rental/infra/metrics"
	"rental/infra/tron"
	"rental/schemas/events"
)

// Keys derives the private keys of deposit addresses. Only the sweeper holds them.
type Keys struct{ chain *hdkeychain.ExtendedKey }

// NewKeys accepts the private forms of DEPOSIT_HD_KEY: an xprv of the master or of
// m/44'/195'/0'/0, or a hex seed. An xpub cannot sign and is refused.
func NewKeys(key string) (*Keys, error) {
	key = strings.TrimSpace(key)
	var k *hdkeychain.ExtendedKey
	switch {
	case strings.HasPrefix(key, "xpub"):
		return nil, errors.New("sweep: the HD key is public (xpub); sweeping needs the xprv or seed")
	case strings.HasPrefix(key, "xprv"):
		ek, err := hdkeychain.NewKeyFromString(key)
		if err != nil {
			return nil, err
		}
		k = ek
	default:
		seed, err := hex.DecodeString(strings.TrimPrefix(key, "0x"))
		if err != nil {
			return nil, errors.New("sweep: HD key is neither an xprv nor a hex seed")
		}
		if k, err = hdkeychain.NewMaster(seed, &chaincfg.MainNetParams); err != nil {
			return nil, err
		}
	}
	if k.Depth() == 0 {
		for _, i := range []uint32{44 + hdkeychain.HardenedKeyStart, 195 + hdkeychain.HardenedKeyStart, hdkeychain.HardenedKeyStart, 0} {
			child, err := k.Derive(i)
			if err != nil {
				return nil, err
			}
			k = child
		}
	} else if k.Depth() != 4 {
		return nil, fmt.Errorf("sweep: HD key at depth %d: want the master or m/44'/195'/0'/0", k.Depth())
	}
	return &Keys{chain: k}, nil
}

// Key derives the private key of deposit address index i.
func (k *Keys) Key(i uint32) (tron.PrivateKey, error) {
	child, err := k.chain.Derive(i)
	if err != nil {
		return tron.PrivateKey{}, err
	}
	priv, err := child.ECPrivKey()
	if err != nil {
		return tron.PrivateKey{}, err
	}
	return tron.PrivateKeyFromBytes(priv.Serialize()), nil
}

// Options configure a Sweeper.
type Options struct {
	Pool         *pgxpool.Pool
	Node         *tron.Client
	Keys         *Keys
	Treasury     tron.Address
	USDTContract tron.Address
	// EnergyPool is the own stake pool that delegates energy for USDT sweeps, signed for by
	// a key holding its delegate permission (infra/custody, the first of Signers' pools);
	// the signer's own account pays deposit-address activations. Nil means a USDT sweep
	// needs the address to have the energy already (it is skipped otherwise).
	EnergyPool *custody.Signers
	MinTRXSun  int64         // smallest TRX amount worth a sweep (default 1 TRX)
	KeepSun    int64         // TRX left on the address for bandwidth (default 0.5 TRX)
	FeeLimit   int64         // fee_limit of USDT transfers (default 30 TRX)
	Every      time.Duration // Run's interval (default 10 min)
	Limit      int           // addresses looked at per run (default 200)
	Logger     *slog.Logger
	Registerer prometheus.Registerer
	Now        func() time.Time
}

// Sweeper is the sweeping job.
type Sweeper struct {
	o    Options
	log  *slog.Logger
	sent *prometheus.CounterVec
}

// New checks the options.
func New(o Options) (*Sweeper, error) {
	if o.Pool == nil || o.Node == nil || o.Keys == nil || o.Treasury.IsZero() || o.USDTContract.IsZero() {
		return nil, errors.New("sweep: Pool, Node, Keys, Treasury and USDTContract are required")
	}
	if o.MinTRXSun <= 0 {
		o.MinTRXSun = 1_000_000
	}
	if o.KeepSun <= 0 {
		o.KeepSun = 500_000
	}
	if o.FeeLimit <= 0 {
		o.FeeLimit = 30_000_000
	}
	if o.Every <= 0 {
		o.Every = 10 * time.Minute
	}
	if o.Limit <= 0 {
		o.Limit = 200
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Sweeper{o: o, log: o.Logger.With("stage", "sweep"),
		sent: metrics.Register(o.Registerer, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "rental_sweep_transactions_total", Help: "Sweep transactions signed and stored, by kind.",
		}, []string{"kind"}))}, nil
}

// Run sweeps every Every until ctx ends. A failed run is logged and retried next time.
func (s *Sweeper) Run(ctx context.Context) error {
	s.log.Info("sweeper up", "treasury", s.o.Treasury.String(), "every", s.o.Every)
	if s.o.EnergyPool != nil {
		go s.o.EnergyPool.Run(ctx) // the energy pool's permission, every minute
	}
	t := time.NewTicker(s.o.Every)
	defer t.Stop()
	for {
		if _, err := s.RunOnce(ctx); err != nil && ctx.Err() == nil {
			s.log.Warn("sweep run failed", "err", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// Report counts what a run did.
type Report struct {
	Confirmed, Failed, Rebroadcast int
	Signed                         map[string]int // by kind
}

// RunOnce is one step for every open row and candidate address.
func (s *Sweeper) RunOnce(ctx context.Context) (Report, error) {
	rep := Report{Signed: map[string]int{}}
	if err := s.finishOpen(ctx, &rep); err != nil {
		return rep, err
	}
	cands, err := s.candidates(ctx)
	if err != nil {
		return rep, err
	}
	var errs []error
	for _, c := range cands {
		if err := s.sweepAddress(ctx, c, &rep); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", c.addr, err))
		}
	}
	if err := s.sweepPayments(ctx, &rep); err != nil { // payments.go
		errs = append(errs, fmt.Errorf("payment addresses: %w", err))
	}
	return rep, errors.Join(errs...)
}

type openRow struct {
	id, address, kind, txid string
	amount                  string
	tx                      tron.Transaction
	expires                 time.Time
}

func (s *Sweeper) finishOpen(ctx context.Context, rep *Report) error {
	rows, err := s.o.Pool.Query(ctx, `SELECT id, address, kind, txid, amount::text, signed_tx, expires_at FROM sweeps WHERE status = 'signed' ORDER BY created_at`)
	if err != nil {
		return err
	}
	open, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (openRow, error) {
		var o openRow
		var raw []byte
		err := r.Scan(&o.id, &o.address, &o.kind, &o.txid, &o.amount, &raw, &o.expires)
		if err == nil {
			err = json.Unmarshal(raw, &o.tx)
		}
		return o, err
	})
	if err != nil {
		return err
	}
	for _, o := range open {
		info, err := s.o.Node.GetTransactionInfoByID(ctx, o.txid)
		switch {
		case err == nil:
			status, result := "confirmed", "SUCCESS"
			if info.Failed() {
				status, result = "failed", info.Receipt.Result+" "+info.Result
				rep.Failed++
			} else {
				rep.Confirmed++
			}
			if err := s.close(ctx, o.id, status, strings.TrimSpace(result)); err != nil {
				return err
			}
			s.log.Info("sweep transaction landed", "kind", o.kind, "address", o.address, "txid", o.txid, "status", status)
		case errors.Is(err, tron.ErrNotFound):
			if !s.o.Now().Before(o.expires) {
				if err := s.close(ctx, o.id, "failed", "expired"); err != nil {
					return err
				}
				rep.Failed++
				continue
			}
			if _, err := s.o.Node.BroadcastTransaction(ctx, &o.tx); err != nil && !isDup(err) {
				s.log.Warn("re-broadcast refused", "txid", o.txid, "err", err)
			}
			rep.Rebroadcast++
		default:
			return err
		}
	}
	return nil
}

func isDup(err error) bool {
	var ne *tron.NodeError
	return errors.As(err, &ne) && ne.Code == tron.CodeDupTransaction
}

func (s *Sweeper) close(ctx context.Context, id, status, result string) error {
	_, err := s.o.Pool.Exec(ctx, `UPDATE sweeps SET status = $2, result = $3, finished_at = now() WHERE id = $1 AND status = 'signed'`, id, status, result)
	return err
}

type candidate struct {
	addr  tron.Address
	index uint32
	trx   bool // a credited TRX deposit is newer than the last confirmed TRX sweep
	usdt  bool // same for USDT
}

func (s *Sweeper) candidates(ctx context.Context) ([]candidate, error) {
	rows, err := s.o.Pool.Query(ctx, `
		SELECT da.address, da.derivation_index,
			bool_or(d.asset = 'TRX' AND d.credited_at > coalesce(
				(SELECT max(finished_at) FROM sweeps w WHERE w.address = da.address AND w.kind = 'trx' AND w.status = 'confirmed'), '-infinity')),
			bool_or(d.asset = 'USDT' AND d.credited_at > coalesce(
				(SELECT max(finished_at) FROM sweeps w WHERE w.address = da.address AND w.kind = 'usdt' AND w.status = 'confirmed'), '-infinity'))
		FROM deposits d JOIN deposit_addresses da ON da.address = d.address
		WHERE d.status = 'credited'
		GROUP BY da.address, da.derivation_index
		ORDER BY max(d.credited_at) DESC LIMIT $1`, s.o.Limit)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (candidate, error) {
		var c candidate
		var a string
		var idx int64
		if err := r.Scan(&a, &idx, &c.trx, &c.usdt); err != nil {
			return c, err
		}
		addr, err := tron.ParseAddress(a)
		c.addr, c.index = addr, uint32(idx)
		return c, err
	})
}

func (s *Sweeper) openKinds(ctx context.Context, addr tron.Address) (map[string]bool, error) {
	rows, err := s.o.Pool.Query(ctx, `SELECT kind FROM sweeps WHERE address = $1 AND status = 'signed'`, addr.String())
	if err != nil {
		return nil, err
	}
	kinds, err := pgx.CollectRows(rows, pgx.RowTo[string])
	out := map[string]bool{}
	for _, k := range kinds {
		out[k] = true
	}
	return out, err
}

func (s *Sweeper) usdtBalance(ctx context.Context, addr tron.Address) (*big.Int, error) {
	ext, err := s.o.Node.TriggerConstantContract(ctx, &tron.TriggerSmartContract{
		OwnerAddress: addr, ContractAddress: s.o.USDTContract, Data: tron.TRC20BalanceOfData(addr)})
	if err != nil {
		return nil, err
	}
	if len(ext.ConstantResult) == 0 {
		return nil, errors.New("sweep: balanceOf returned nothing")
	}
	return tron.DecodeUint256(ext.ConstantResult[0])
}

func (s *Sweeper) sweepAddress(ctx context.Context, c candidate, rep *Report) error {
	open, err := s.openKinds(ctx, c.addr)
	if err != nil {
		return err
	}
	usdtLeft := false
	if c.usdt || open["usdt"] || open["delegate"] {
		bal, err := s.usdtBalance(ctx, c.addr)
		if err != nil {
			return err
		}
		usdtLeft = bal.Sign() > 0
		if usdtLeft && !open["usdt"] && !open["delegate"] && !open["undelegate"] && !open["activate"] {
			acct, err := s.o.Node.GetAccount(ctx, c.addr)
			if err != nil {
				return err
			}
			if !acct.Exists() {
				// Receiving USDT does not create the account; without it the chain
				// refuses a delegation to the address and any transaction from it.
				return s.activate(ctx, c, rep)
			}
			if err := s.sweepUSDT(ctx, c, bal, rep); err != nil {
				return err
			}
		}
	}
	if open["activate"] {
		return nil
	}
	if err := s.takeBackEnergy(ctx, c, open, usdtLeft, rep); err != nil {
		return err
	}
	if c.trx && !usdtLeft && !open["trx"] && !open["usdt"] {
		acct, err := s.o.Node.GetAccount(ctx, c.addr)
		if err != nil && !errors.Is(err, tron.ErrNotFound) {
			return err
		}
		if acct != nil && acct.Balance-s.o.KeepSun >= s.o.MinTRXSun {
			key, err := s.o.Keys.Key(c.index)
			if err != nil {
				return err
			}
			amount := acct.Balance - s.o.KeepSun
			contract := &tron.TransferContract{OwnerAddress: c.addr, ToAddress: s.o.Treasury, Amount: amount}
			tx, err := s.o.Node.CreateTransaction(ctx, contract)
			if err != nil {
				return err
			}
			if err := s.signStoreBroadcast(ctx, c.addr, "trx", big.NewInt(amount), tx, tron.Intent{Contract: contract}, key, 0, rep); err != nil {
				return err
			}
		}
	}
	return nil
}

// sweepUSDT signs the USDT transfer when the address has the energy, or asks the pool to
// delegate it first.
func (s *Sweeper) sweepUSDT(ctx context.Context, c candidate, bal *big.Int, rep *Report) error {
	data, err := tron.TRC20TransferData(s.o.Treasury, bal)
	if err != nil {
		return err
	}
	call := &tron.TriggerSmartContract{OwnerAddress: c.addr, ContractAddress: s.o.USDTContract, Data: data}
	est, err := s.o.Node.TriggerConstantContract(ctx, call)
	if err != nil {
		return err
	}
	need := est.EnergyUsed
	res, err := s.o.Node.GetAccountResource(ctx, c.addr)
	if err != nil && !errors.Is(err, tron.ErrNotFound) {
		return err
	}
	have := int64(0)
	if res != nil {
		have = res.EnergyLimit - res.EnergyUsed
	}
	if have >= need {
		key, err := s.o.Keys.Key(c.index)
		if err != nil {
			return err
		}
		tx, err := s.o.Node.TriggerSmartContract(ctx, call, s.o.FeeLimit)
		if err != nil {
			return err
		}
		return s.signStoreBroadcast(ctx, c.addr, "usdt", bal, tx, tron.Intent{Contract: call, FeeLimit: s.o.FeeLimit}, key, 0, rep)
	}
	pool, ok := s.energyGrant("USDT to sweep but the address lacks energy", c)
	if !ok {
		return nil
	}
	pr, err := s.o.Node.GetAccountResource(ctx, pool.Pool)
	if err != nil {
		return err
	}
	sun, err := tron.BalanceForEnergy((need-have)*12/10, pr.TotalEnergyLimit, pr.TotalEnergyWeight)
	if err != nil {
		return err
	}
	sun = max((sun+tron.SunPerTRX-1)/tron.SunPerTRX*tron.SunPerTRX, tron.SunPerTRX) // whole TRX, at least 1
	d := &tron.DelegateResourceContract{OwnerAddress: pool.Pool, Resource: tron.Energy, Balance: sun, ReceiverAddress: c.addr}
	tx, err := s.o.Node.DelegateResource(ctx, d)
	if err != nil {
		return err
	}
	return s.signStoreBroadcast(ctx, c.addr, "delegate", big.NewInt(sun), tx, tron.Intent{Contract: d}, pool.Key, pool.PermissionID, rep)
}

// activate has the energy pool create the deposit address's account (kind activate).
func (s *Sweeper) activate(ctx context.Context, c candidate, rep *Report) error {
	if s.o.EnergyPool == nil {
		s.log.Warn("USDT to sweep from an address with no account on chain and no SWEEP_SIGNER_KEY to create it", "address", c.addr.String())
		return nil
	}
	payer := s.o.EnergyPool.Payer()
	a := &tron.AccountCreateContract{OwnerAddress: payer.Address(), AccountAddress: c.addr}
	tx, err := s.o.Node.CreateAccount(ctx, a)
	if err != nil {
		return err
	}
	return s.signStoreBroadcast(ctx, c.addr, "activate", big.NewInt(1), tx, tron.Intent{Contract: a}, payer, 0, rep)
}

// takeBackEnergy undelegates the pool's energy once the USDT it was lent for has moved.
func (s *Sweeper) takeBackEnergy(ctx context.Context, c candidate, open map[string]bool, usdtLeft bool, rep *Report) error {
	if s.o.EnergyPool == nil || len(s.o.EnergyPool.Pools()) == 0 || usdtLeft || open["usdt"] || open["delegate"] || open["undelegate"] {
		return nil
	}
	// Delegated minus undelegated, over confirmed rows.
	var lent int64
	err := s.o.Pool.QueryRow(ctx, `SELECT coalesce(sum(CASE kind WHEN 'delegate' THEN amount ELSE -amount END), 0)::bigint
		FROM sweeps WHERE address = $1 AND kind IN ('delegate', 'undelegate') AND status = 'confirmed'`, c.addr.String()).Scan(&lent)
	if err != nil || lent <= 0 {
		return err
	}
	pool, ok := s.energyGrant("energy to take back", c)
	if !ok {
		return nil // taken back once the permission is back
	}
	u := &tron.UnDelegateResourceContract{OwnerAddress: pool.Pool, Resource: tron.Energy, Balance: lent, ReceiverAddress: c.addr}
	tx, err := s.o.Node.UnDelegateResource(ctx, u)
	if err != nil {
		return err
	}
	return s.signStoreBroadcast(ctx, c.addr, "undelegate", big.NewInt(lent), tx, tron.Intent{Contract: u}, pool.Key, pool.PermissionID, rep)
}

// signStoreBroadcast checks the node-built tx against the intent, signs it, stores it with
// its row and broadcasts it after the commit.
func (s *Sweeper) signStoreBroadcast(ctx context.Context, addr tron.Address, kind string, amount *big.Int, tx *tron.Transaction,
	intent tron.Intent, key tron.PrivateKey, permissionID int32, rep *Report) error {
	intent.Now = s.o.Now()
	raw, err := tron.CheckBuilt(tx, intent)
	if err != nil {
		return err
	}
	// The node builds with Permission_id 0; a pool's signer signs under its permission.
	raw.PermissionID = permissionID
	signed, err := tron.NewSignedTransaction(raw, tx.Visible, key)
	if err != nil {
		return err
	}
	*tx = *signed
	b, err := json.Marshal(tx)
	if err != nil {
		return err
	}
	tag, err := s.o.Pool.Exec(ctx, `INSERT INTO sweeps (id, address, kind, amount, txid, signed_tx, expires_at, status)
		VALUES ($1, $2, $3, $4, $5, $6, $7, 'signed') ON CONFLICT DO NOTHING`,
		events.NewID("swp"), addr.String(), kind, amount.String(), tx.TxID, b, time.UnixMilli(raw.Expiration).UTC())
	if err != nil {
		return err
	}
	if tag.RowsAffected() == 0 {
		return nil // another sweeper holds the open row for this address and kind
	}
	rep.Signed[kind]++
	s.sent.WithLabelValues(kind).Inc()
	if _, err := s.o.Node.BroadcastTransaction(ctx, tx); err != nil && !isDup(err) {
		// Stored: the next run re-broadcasts it, or fails it once it expired.
		s.log.Warn("broadcast refused; the next run retries", "kind", kind, "txid", tx.TxID, "err", err)
	}
	s.log.Info("sweep transaction sent", "kind", kind, "address", addr.String(), "amount", amount.String(), "txid", tx.TxID)
	return nil
}

// energyGrant is the energy pool's usable grant; without one the step is skipped (with a
// log line) and tried again on a later run.
func (s *Sweeper) energyGrant(what string, c candidate) (custody.Grant, bool) {
	if s.o.EnergyPool == nil || len(s.o.EnergyPool.Pools()) == 0 {
		s.log.Warn(what+" and no SWEEP_POOL_ADDRESS is set", "address", c.addr.String())
		return custody.Grant{}, false
	}
	pool := s.o.EnergyPool.Pools()[0]
	g, ok := s.o.EnergyPool.Grant(pool)
	if !ok {
		s.log.Warn(what+" but no signer holds the energy pool's delegate permission now", "address", c.addr.String(), "pool", pool.String())
	}
	return g, ok
}
