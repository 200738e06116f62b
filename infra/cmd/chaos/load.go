package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"golang.org/x/sync/errgroup"

	"rental/infra/accounts"
	"rental/infra/client"
	"rental/infra/ledgerstore"
	"rental/infra/stages/ledgerstage"
	"rental/infra/tron"
	"rental/infra/tronsim"
	"rental/schemas/ledger"
	"rental/schemas/scopes"
)

// fundSun is what each load account is credited before the load.
const fundSun = 1_000_000 * 1_000_000

// orderEnergy is the size of every order.
const orderEnergy = 65_000

// shortTierMargin is, beyond the short rental itself, how long before the end of the load
// 5m-tier orders stop: their delivery and the undelegation's confirmations, so that the
// rentals end while faults are still injected.
const shortTierMargin = 20 * time.Second

type account struct {
	id string
	cl *client.Client
}

// attempt is one answer (or its absence) to POST /v1/orders, as the client's transport saw it.
type attempt struct {
	at     time.Time
	status int    // 0: no answer (connection refused, reset, timeout)
	code   int    // the envelope's code, 0 for 2xx or no answer
	reason string // the envelope's details.reason, else its field, when it has one
}

// recorder is the clients' transport: it forwards and records every order attempt.
type recorder struct {
	next http.RoundTripper
	mu   sync.Mutex
	log  []attempt
}

var (
	codeRE   = regexp.MustCompile(`"code"\s*:\s*([0-9]+)`)
	reasonRE = regexp.MustCompile(`"reason"\s*:\s*"([a-z_]+)"`)
	fieldRE  = regexp.MustCompile(`"field"\s*:\s*"([a-z_.]+)"`)
)

func (r *recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := r.next.RoundTrip(req)
	if req.Method != http.MethodPost || req.URL.Path != "/v1/orders" {
		return resp, err
	}
	a := attempt{at: time.Now()}
	if err == nil {
		a.status = resp.StatusCode
		if resp.StatusCode >= 300 {
			b, rerr := io.ReadAll(resp.Body)
			resp.Body.Close()
			resp.Body = io.NopCloser(bytes.NewReader(b))
			if rerr == nil {
				if m := codeRE.FindSubmatch(b); m != nil {
					a.code, _ = strconv.Atoi(string(m[1]))
				}
				if m := reasonRE.FindSubmatch(b); m != nil {
					a.reason = string(m[1])
				} else if m := fieldRE.FindSubmatch(b); m != nil {
					a.reason = "field " + string(m[1])
				}
			}
		}
	}
	r.mu.Lock()
	r.log = append(r.log, a)
	r.mu.Unlock()
	return resp, err
}

func (r *recorder) attempts() []attempt {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]attempt(nil), r.log...)
}

// setupAccounts creates the load accounts with a signed key each (orders and account
// scopes) and credits each through the ledger, as support would.
func (e *env) setupAccounts(ctx context.Context, rec *recorder) ([]account, error) {
	store, err := accounts.New(e.db, accounts.Options{MasterKey: e.cfg.Auth.MasterKey})
	if err != nil {
		return nil, err
	}
	led, err := ledgerstage.Ledger(e.cfg, e.db)
	if err != nil {
		return nil, err
	}
	t := &http.Transport{MaxIdleConnsPerHost: 256, IdleConnTimeout: 30 * time.Second}
	hc := &http.Client{Timeout: 15 * time.Second, Transport: rec}
	rec.next = t
	out := make([]account, e.st.accounts)
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(4)
	for i := range out {
		g.Go(func() error {
			k, err := tron.GenerateKey()
			if err != nil {
				return err
			}
			a, _, err := store.CreateOrGetByOwner(gctx, e.cfg.Network, k.Address(), nil, nil)
			if err != nil {
				return err
			}
			key, err := store.CreateKey(gctx, a.ID, accounts.NewKey{Scopes: []string{scopes.OrdersWrite, scopes.OrdersRead, scopes.AccountRead}}, "chaos")
			if err != nil {
				return err
			}
			err = pgx.BeginFunc(gctx, e.db, func(tx pgx.Tx) error {
				_, err := led.Credit(gctx, tx, ledgerstore.Credit{AccountID: a.ID, Kind: ledger.KindAdjustment,
					Ref: "chaos-fund-" + a.ID, AmountSun: fundSun})
				return err
			})
			if err != nil {
				return err
			}
			out[i] = account{id: a.ID, cl: client.New("http://"+e.api, key.ID, key.Secret, client.WithHTTPClient(hc), client.WithUserAgent("rental-chaos/1"))}
			return nil
		})
	}
	return out, g.Wait()
}

// seedReceivers activates n fresh receivers on the simulator.
func (e *env) seedReceivers(ctx context.Context, n int) ([]string, error) {
	out := make([]string, n)
	for i := range out {
		k, err := tron.GenerateKey()
		if err != nil {
			return nil, err
		}
		if err := e.simCall(ctx, "/sim/accounts", tronsim.GenesisAccount{Address: k.Address(), BalanceSun: 1_000_000}, nil); err != nil {
			return nil, err
		}
		out[i] = k.Address().String()
	}
	return out, nil
}

// order is one client_order_id of the load and what its client learnt.
type order struct {
	coid     string
	acct     int
	receiver string
	tier     string
	sentAt   time.Time
	// outcome: "created" (201 or 200 with the order), "refused" (a definite error), or ""
	// (never learnt: the client was still retrying when the soak stopped it).
	outcome string
	id      string
	status  int
	code    int
	calls   int // CreateOrder calls (each with its own retries)
}

type load struct {
	e         *env
	accts     []account
	receivers []string
	run       string
	mu        sync.Mutex
	orders    []*order
	inFlight  atomic.Int64
	wg        sync.WaitGroup
}

// generate sends rate orders per second until end; each order's client keeps going after
// end until its outcome is known or clientCtx ends.
func (l *load) generate(ctx, clientCtx context.Context, end time.Time, rate float64) {
	tick := time.NewTicker(time.Duration(float64(time.Second) / rate))
	defer tick.Stop()
	n := 0
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-tick.C:
			if now.After(end) {
				return
			}
			// Every other order is of the 5m tier (renting DEV_SHORT_RENTAL) while its expiry
			// (and undelegation) still falls inside the load, so that rentals end under the
			// faults; the others are for an hour and never end during the soak.
			tier := "1h"
			if n%2 == 1 && now.Add(l.e.st.shortRental+shortTierMargin).Before(end) {
				tier = "5m"
			}
			o := &order{coid: fmt.Sprintf("chaos-%s-%d", l.run, n), acct: n % len(l.accts),
				receiver: l.receivers[(n*7)%len(l.receivers)], tier: tier, sentAt: now}
			n++
			l.mu.Lock()
			l.orders = append(l.orders, o)
			l.mu.Unlock()
			l.wg.Add(1)
			l.inFlight.Add(1)
			go func() {
				defer l.wg.Done()
				defer l.inFlight.Add(-1)
				l.place(clientCtx, o)
			}()
		}
	}
}

// place is a careful client: CreateOrder with one client_order_id until a definite answer.
func (l *load) place(ctx context.Context, o *order) {
	cl := l.accts[o.acct].cl
	req := client.OrderRequest{ClientOrderID: o.coid, Resource: "energy", Amount: orderEnergy, Tier: o.tier, Receiver: o.receiver}
	for ctx.Err() == nil {
		l.mu.Lock()
		o.calls++
		l.mu.Unlock()
		res, err := cl.CreateOrder(ctx, req)
		if err == nil {
			l.mu.Lock()
			o.outcome, o.id, o.status = "created", res.Order.ID, 201
			if res.Replayed {
				o.status = 200
			}
			l.mu.Unlock()
			return
		}
		var ae *client.Error
		var gave *client.GiveUpError
		if errors.As(err, &ae) && !errors.As(err, &gave) && !errors.Is(err, client.ErrOutcomeUnknown) &&
			ae.Status != http.StatusTooManyRequests && ae.Status < 500 {
			l.mu.Lock()
			o.outcome, o.status, o.code = "refused", ae.Status, ae.Code
			l.mu.Unlock()
			return
		}
		if errors.As(err, &ae) && !errors.As(err, &gave) && ae.Status >= 500 {
			if k, ok := ae.Catalogue(); ok && !k.Retryable {
				l.mu.Lock()
				o.outcome, o.status, o.code = "refused", ae.Status, ae.Code
				l.mu.Unlock()
				return
			}
		}
		// No definite answer (the policy's budget ran out, or the look-up failed too): the
		// same request again after a pause is safe.
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}

func (l *load) snapshot() []*order {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]*order, len(l.orders))
	for i, o := range l.orders {
		c := *o
		out[i] = &c
	}
	return out
}
