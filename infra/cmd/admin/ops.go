package main

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"rental/infra/accounts"
	"rental/infra/config"
	"rental/infra/kafka"
	"rental/infra/ledgerstore"
	"rental/infra/orderstore"
	"rental/infra/pg"
	"rental/infra/stages"
	"rental/infra/stages/ledgerstage"
	"rental/infra/webhooks"
	"rental/schemas/topics"
)

// printJSON writes v as indented JSON: the lookups are read by people and by scripts.
func printJSON(out io.Writer, v any) error {
	enc := json.NewEncoder(out)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

type keyView struct {
	ID          string     `json:"id"`
	Label       *string    `json:"label"`
	Scopes      []string   `json:"scopes"`
	Active      bool       `json:"is_active"`
	IPAllowlist []string   `json:"ip_allowlist"`
	ExpiresAt   *time.Time `json:"expires_at"`
	RevokedAt   *time.Time `json:"revoked_at"`
	LastUsedAt  *time.Time `json:"last_used_at"`
	CreatedAt   time.Time  `json:"created_at"`
}

// lookupAccount prints an account: its row, balances, keys (never their secrets), deposit
// addresses and newest audit rows.
func lookupAccount(ctx context.Context, cfg config.Config, pool *pgxpool.Pool, l *ledgerstore.Ledger, id string, out io.Writer) error {
	st, err := accounts.New(pool, accounts.Options{})
	if err != nil {
		return err
	}
	acc, err := st.GetAccount(ctx, id)
	if err != nil {
		return err
	}
	sum, err := l.Summary(ctx, id)
	if err != nil {
		return err
	}
	keys, err := st.ListKeys(ctx, id)
	if err != nil {
		return err
	}
	kv := make([]keyView, 0, len(keys))
	for _, k := range keys {
		allow := make([]string, 0, len(k.IPAllowlist))
		for _, p := range k.IPAllowlist {
			allow = append(allow, p.String())
		}
		kv = append(kv, keyView{k.ID, k.Label, k.Scopes, k.IsActive, allow, k.ExpiresAt, k.RevokedAt, k.LastUsedAt, k.CreatedAt})
	}
	deps, err := ledgerstage.DepositStore(cfg, pool)
	if err != nil {
		return err
	}
	current, err := deps.Existing(ctx, id)
	if err != nil {
		return err
	}
	retired, err := deps.Retired(ctx, id)
	if err != nil {
		return err
	}
	audit, err := st.Audit(ctx, id, 20)
	if err != nil {
		return err
	}
	return printJSON(out, map[string]any{
		"account": map[string]any{"id": acc.ID, "network": acc.Network, "owner_address": acc.Owner.String(), "label": acc.Label,
			"email": acc.Email, "status": acc.Status, "created_at": acc.CreatedAt},
		"balances": map[string]any{"balance_sun": sum.BalanceSun, "balance_usdt": sum.BalanceUSDT, "reserved_sun": sum.ReservedSun,
			"available_sun": sum.AvailableSun, "deposited_sun": sum.DepositedSun, "spent_sun": sum.SpentSun, "refunded_sun": sum.RefundedSun},
		"api_keys":                  kv,
		"deposit_addresses":         current,
		"retired_deposit_addresses": retired,
		"audit":                     audit,
	})
}

type journalView struct {
	TxID       string    `json:"txid"`
	Purpose    string    `json:"purpose"`
	FillSeq    int       `json:"fill_seq"`
	Attempt    int       `json:"attempt"`
	State      string    `json:"state"`
	Result     *string   `json:"result"`
	Expiration time.Time `json:"expiration"`
}

// lookupOrder prints an order's row, fills and signer journal (the signed transactions
// themselves are left out; their ids find them on chain).
func lookupOrder(ctx context.Context, pool *pgxpool.Pool, id string, out io.Writer) error {
	row, err := orderstore.GetAny(ctx, pool, id)
	if err != nil {
		return err
	}
	fills, err := orderstore.Fills(ctx, pool, id)
	if err != nil {
		return err
	}
	js, err := orderstore.Journal(ctx, pool, id)
	if err != nil {
		return err
	}
	jv := make([]journalView, 0, len(js))
	for _, j := range js {
		jv = append(jv, journalView{j.TxID, j.Purpose, j.FillSeq, j.Attempt, j.State, j.Result, time.UnixMilli(j.Expiration).UTC()})
	}
	return printJSON(out, map[string]any{"order": row, "fills": fills, "journal": jv})
}

// oldMasterKey reads the master key being replaced: from the file named by -old-key-file,
// else from API_KEY_MASTER_KEY_OLD; 64 hex characters either way. It is never printed.
func oldMasterKey(file string) ([]byte, error) {
	var h string
	if file != "" {
		b, err := os.ReadFile(file)
		if err != nil {
			return nil, err
		}
		h = string(b)
	} else {
		h = os.Getenv("API_KEY_MASTER_KEY_OLD")
	}
	h = strings.TrimSpace(h)
	if h == "" {
		return nil, errors.New("rotate-master-key: the old master key is required (-old-key-file or API_KEY_MASTER_KEY_OLD)")
	}
	b, err := hex.DecodeString(h)
	if err != nil || len(b) != 32 {
		return nil, errors.New("rotate-master-key: the old master key must be 64 hex characters")
	}
	return b, nil
}

// rotateMasterKey re-encrypts every API key and webhook endpoint secret from the old
// master key to API_KEY_MASTER_KEY in one transaction, with one audit row per account
// touched. Either everything is rotated or nothing is.
func rotateMasterKey(ctx context.Context, cfg config.Config, pool *pgxpool.Pool, oldKey []byte, actor, reason string, out io.Writer) error {
	if cfg.Auth.MasterKey == nil {
		return errors.New("rotate-master-key: API_KEY_MASTER_KEY (the new master key) is required")
	}
	if string(oldKey) == string(cfg.Auth.MasterKey) {
		return errors.New("rotate-master-key: the old and the new master key are the same")
	}
	from, err := accounts.NewSealer(oldKey)
	if err != nil {
		return err
	}
	to, err := accounts.NewSealer(cfg.Auth.MasterKey)
	if err != nil {
		return err
	}
	var nKeys, nHooks int
	err = pg.InTx(ctx, pool, func(tx pgx.Tx) error {
		keys, err := accounts.Rekey(ctx, tx, from, to)
		if err != nil {
			return err
		}
		hooks, err := webhooks.Rekey(ctx, tx, from, to)
		if err != nil {
			return err
		}
		touched := map[string]bool{}
		for a, n := range keys {
			nKeys += n
			touched[a] = true
		}
		for a, n := range hooks {
			nHooks += n
			touched[a] = true
		}
		for a := range touched {
			if err := accounts.WriteAudit(ctx, tx, a, actor, "master_key.rotate", map[string]any{
				"reason": reason, "api_keys": keys[a], "webhook_endpoints": hooks[a]}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "re-encrypted %d API key secrets and %d webhook endpoint secrets under the new master key\n", nKeys, nHooks)
	return nil
}

// deadLetter is one record of webhooks.dead.v1.
type deadLetter struct {
	Item   webhooks.Item
	Reason string
}

// readWebhookDeadLetters reads webhooks.dead.v1 from its start to its end as of now.
func readWebhookDeadLetters(ctx context.Context, cfg config.Config) ([]deadLetter, error) {
	sec, err := stages.KafkaOpts(cfg)
	if err != nil {
		return nil, err
	}
	cl, err := kafka.NewClient(cfg.KafkaBrokers, append(sec, kgo.ConsumeTopics(topics.WebhookDead.Name),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))...)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, topics.WebhookDead.Name)
	if err != nil {
		return nil, err
	}
	left := map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) {
		if o.Err == nil && o.Offset > 0 {
			left[o.Partition] = o.Offset
		}
	})
	var out []deadLetter
	for len(left) > 0 {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if errs := fs.Errors(); len(errs) > 0 {
			return nil, errs[0].Err
		}
		fs.EachRecord(func(r *kgo.Record) {
			if end, ok := left[r.Partition]; ok {
				h := map[string]string{}
				for _, x := range r.Headers {
					h[x.Key] = string(x.Value)
				}
				var env struct {
					Event string `json:"event"`
				}
				_ = json.Unmarshal(r.Value, &env)
				out = append(out, deadLetter{Item: webhooks.Item{AccountID: h["account_id"], OKey: string(r.Key), EventID: h["event_id"],
					EventType: env.Event, Body: r.Value}, Reason: h["reason"]})
				if r.Offset+1 >= end {
					delete(left, r.Partition)
				}
			}
		})
	}
	return out, nil
}

// replayWebhooks queues the dead letters (of one account or event when given) for delivery
// again, each at most once (webhooks.Store.Replay remembers them).
func replayWebhooks(ctx context.Context, cfg config.Config, pool *pgxpool.Pool, account, event, actor, reason string, dryRun bool, out io.Writer) error {
	dls, err := readWebhookDeadLetters(ctx, cfg)
	if err != nil {
		return err
	}
	var store *webhooks.Store
	if !dryRun {
		if cfg.Auth.MasterKey == nil {
			return errors.New("replay-webhooks: API_KEY_MASTER_KEY is required")
		}
		if store, err = webhooks.NewStore(pool, cfg.Auth.MasterKey); err != nil {
			return err
		}
	}
	var replayed, before, failed int
	for _, d := range dls {
		it := d.Item
		if it.EventID == "" || it.AccountID == "" || (account != "" && it.AccountID != account) || (event != "" && it.EventID != event) {
			continue
		}
		if dryRun {
			fmt.Fprintf(out, "would replay %s (%s, account %s)\n", it.EventID, it.EventType, it.AccountID)
			continue
		}
		ok, err := store.Replay(ctx, it, actor, reason)
		switch {
		case err != nil:
			failed++
			fmt.Fprintf(out, "%s: not replayed: %v\n", it.EventID, err)
		case ok:
			replayed++
			fmt.Fprintf(out, "replayed %s (%s, account %s)\n", it.EventID, it.EventType, it.AccountID)
		default:
			before++
		}
	}
	fmt.Fprintf(out, "%d replayed, %d replayed before, %d failed\n", replayed, before, failed)
	if failed > 0 {
		return fmt.Errorf("replay-webhooks: %d dead letters not replayed", failed)
	}
	return nil
}
