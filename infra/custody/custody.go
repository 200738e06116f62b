// Package custody holds the signer keys of the stake pools and keeps, for each pool, the
// on-chain grant that lets a signer key delegate and reclaim its stake: an active
// permission of the pool (java-tron's AccountPermissionUpdateContract) whose operations
// allow DelegateResourceContract (57) and UnDelegateResourceContract (58) and that lists
// the key with a weight reaching its threshold. The pools' owner keys are never here.
//
// The grants are read from the node (getaccount's active_permission) at start and every
// CheckEvery after; a pool whose grant is gone or changed leaves allocation until it is
// back (Usable), with one log line and a metric per change. docs/custody.md.
package custody

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"rental/infra/metrics"
	"rental/infra/tron"
)

// Node is the node call custody reads permissions with (tron.Client).
type Node interface {
	GetAccount(ctx context.Context, addr tron.Address) (*tron.Account, error)
}

// Grant is a usable signer of one pool: Key signs its delegations and reclaims under
// PermissionID.
type Grant struct {
	Pool         tron.Address
	Key          tron.PrivateKey
	PermissionID int32
}

// Delegates are the contract types a signer key exists for.
var Delegates = []tron.ContractType{tron.DelegateResourceContractType, tron.UnDelegateResourceContractType}

// Find looks in a pool's account for a grant to one of keys (in their order): an active
// permission allowing 57 and 58 in which the key's weight reaches the threshold. Without
// one it returns why.
func Find(acc *tron.Account, pool tron.Address, keys []tron.PrivateKey) (Grant, string) {
	if acc == nil || !acc.Exists() {
		return Grant{}, "the pool's account does not exist on chain"
	}
	allowing := false
	var below []string
	for _, p := range acc.ActivePermission {
		if !p.Allows(tron.DelegateResourceContractType) || !p.Allows(tron.UnDelegateResourceContractType) {
			continue
		}
		allowing = true
		for _, k := range keys {
			w := p.Weight(k.Address())
			switch {
			case w == 0:
			case w >= p.Threshold:
				return Grant{Pool: pool, Key: k, PermissionID: p.ID}, ""
			default:
				below = append(below, fmt.Sprintf("signer %s weighs %d in permission %d (threshold %d)", k.Address(), w, p.ID, p.Threshold))
			}
		}
	}
	switch {
	case len(below) > 0:
		return Grant{}, strings.Join(below, "; ")
	case allowing:
		return Grant{}, "no active permission allowing DelegateResourceContract and UnDelegateResourceContract lists a signer key"
	}
	return Grant{}, "no active permission allows both DelegateResourceContract (57) and UnDelegateResourceContract (58)"
}

// Powers lists what key can do with the pool beyond delegating and reclaiming: being its
// owner (anything: transfers, unstaking, permission changes) or holding a key in an active
// permission that allows other contract types. Empty means the key is narrow.
func Powers(acc *tron.Account, pool, key tron.Address) []string {
	var out []string
	if key == pool {
		return []string{"it is the owner key of pool " + pool.String() + " (it may transfer, unstake and change permissions)"}
	}
	if acc != nil && acc.OwnerPermission != nil && acc.OwnerPermission.Weight(key) > 0 {
		out = append(out, "it holds a key of pool "+pool.String()+"'s owner permission (it may transfer, unstake and change permissions)")
	}
	if acc == nil {
		return out
	}
	for _, p := range acc.ActivePermission {
		if p.Weight(key) == 0 {
			continue
		}
		var extra []string
		for _, t := range p.Allowed() {
			if !slices.Contains(Delegates, t) {
				extra = append(extra, t.String())
			}
		}
		if len(extra) > 0 {
			out = append(out, fmt.Sprintf("permission %d (%q) of pool %s also allows %s", p.ID, p.Name, pool, strings.Join(extra, ", ")))
		}
	}
	return out
}

// Options configure Signers.
type Options struct {
	Node  Node
	Pools []tron.Address
	// Keys are the signer keys (one key may serve many pools). The first also pays, from
	// its own account, what is not a pool's delegation (receiver activations, deep
	// reserve rentals).
	Keys []tron.PrivateKey
	// Strict refuses keys that can do more than delegate and reclaim (mainnet); otherwise
	// such keys are allowed with a warning.
	Strict bool
	// Stage names the stage in metrics and logs ("orderflow", "sweeper").
	Stage      string
	CheckEvery time.Duration // default 1 min
	Logger     *slog.Logger
	Registerer prometheus.Registerer
	// OnChange, when set, is called after each check that changed a pool's state, with
	// every pool's problem ("" for usable), e.g. to record it for the status endpoint.
	OnChange func(ctx context.Context, problems map[tron.Address]string)
}

// Signers are the signer keys and the grants found on chain.
type Signers struct {
	o      Options
	log    *slog.Logger
	usable *prometheus.GaugeVec
	change *prometheus.CounterVec

	mu       sync.RWMutex
	grants   map[tron.Address]Grant
	problems map[tron.Address]string
	checked  bool
}

// ErrTooPowerful is wrapped by Start when a signer key can do more than delegate and
// reclaim under Strict.
var ErrTooPowerful = errors.New("custody: a signer key can do more than delegate and reclaim")

// New checks the options and registers the metrics.
func New(o Options) (*Signers, error) {
	if o.Node == nil || len(o.Keys) == 0 {
		return nil, errors.New("custody: Node and at least one signer key are required")
	}
	if o.CheckEvery <= 0 {
		o.CheckEvery = time.Minute
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	s := &Signers{o: o, log: o.Logger.With("component", "custody"), grants: map[tron.Address]Grant{}, problems: map[tron.Address]string{}}
	s.usable = metrics.Register(o.Registerer, prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "rental_custody_pool_usable",
		Help: "1 when a signer key holds a delegate permission of the pool on chain (the pool is in allocation), 0 when not.",
	}, []string{"stage", "pool"}))
	s.change = metrics.Register(o.Registerer, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "rental_custody_pool_changes_total",
		Help: "Pools leaving (to=unusable) or coming back to (to=usable) allocation after an on-chain permission check.",
	}, []string{"stage", "pool", "to"}))
	return s, nil
}

// Payer is the key that pays, from its own account, activations and deep rentals.
func (s *Signers) Payer() tron.PrivateKey { return s.o.Keys[0] }

// Pools are the configured pools.
func (s *Signers) Pools() []tron.Address { return s.o.Pools }

// Grant returns the pool's grant while it is usable.
func (s *Signers) Grant(pool tron.Address) (Grant, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	g, ok := s.grants[pool]
	return g, ok
}

// Usable lists the pools a signer may use now, in configuration order.
func (s *Signers) Usable() []tron.Address {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var out []tron.Address
	for _, p := range s.o.Pools {
		if _, ok := s.grants[p]; ok {
			out = append(out, p)
		}
	}
	return out
}

// Problems returns every configured pool that is not usable, with why.
func (s *Signers) Problems() map[tron.Address]string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make(map[tron.Address]string, len(s.problems))
	for p, why := range s.problems {
		out[p] = why
	}
	return out
}

// Start checks every pool once: under Strict a signer key that can do more than delegate
// and reclaim stops the stage (ErrTooPowerful, naming what it could do); otherwise it is
// logged as a warning. A pool the node cannot be asked about stays out of allocation
// until a later check reads it.
func (s *Signers) Start(ctx context.Context) error {
	accs := s.read(ctx)
	var powers []string
	for _, p := range s.o.Pools {
		acc, ok := accs[p]
		if !ok {
			continue
		}
		for _, k := range s.o.Keys {
			for _, what := range Powers(acc, p, k.Address()) {
				powers = append(powers, fmt.Sprintf("signer %s: %s", k.Address(), what))
			}
		}
	}
	if len(powers) > 0 {
		advice := "grant the signer a narrow permission instead: an active permission of the pool whose operations allow only " +
			"DelegateResourceContract (57) and UnDelegateResourceContract (58) (docs/custody.md), and keep the owner key offline"
		if s.o.Strict {
			return fmt.Errorf("%w: %s; %s", ErrTooPowerful, strings.Join(powers, "; "), advice)
		}
		for _, p := range powers {
			s.log.Warn("signer key can do more than delegate and reclaim (allowed off mainnet only)", "stage", s.o.Stage, "what", p)
		}
	}
	s.apply(ctx, accs)
	return nil
}

// Run checks every pool every CheckEvery until ctx ends.
func (s *Signers) Run(ctx context.Context) {
	t := time.NewTicker(s.o.CheckEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			s.Check(ctx)
		}
	}
}

// Check reads every pool's permissions now and updates the grants.
func (s *Signers) Check(ctx context.Context) { s.apply(ctx, s.read(ctx)) }

func (s *Signers) read(ctx context.Context) map[tron.Address]*tron.Account {
	out := map[tron.Address]*tron.Account{}
	for _, p := range s.o.Pools {
		acc, err := s.o.Node.GetAccount(ctx, p)
		if err != nil {
			s.log.Warn("could not read a pool's permissions; its state is kept until the next check", "stage", s.o.Stage, "pool", p.String(), "err", err)
			continue
		}
		out[p] = acc
	}
	return out
}

// apply updates the grants from the accounts read (a pool not read keeps its state, or is
// unusable when never read).
func (s *Signers) apply(ctx context.Context, accs map[tron.Address]*tron.Account) {
	s.mu.Lock()
	changed := false
	for _, p := range s.o.Pools {
		acc, read := accs[p]
		if !read {
			if _, seen := s.grants[p]; !seen && s.problems[p] == "" {
				s.problems[p] = "the node could not be asked for the pool's permissions"
				s.usable.WithLabelValues(s.o.Stage, p.String()).Set(0)
				changed = true
			}
			continue
		}
		g, why := Find(acc, p, s.o.Keys)
		old, was := s.grants[p]
		switch {
		case why == "" && (!was || old.PermissionID != g.PermissionID || old.Key.Address() != g.Key.Address()):
			s.grants[p] = g
			delete(s.problems, p)
			s.usable.WithLabelValues(s.o.Stage, p.String()).Set(1)
			if !was {
				s.change.WithLabelValues(s.o.Stage, p.String(), "usable").Inc()
				s.log.Info("pool in allocation: a signer holds its delegate permission", "stage", s.o.Stage, "pool", p.String(),
					"signer", g.Key.Address().String(), "permission_id", g.PermissionID)
			} else {
				s.log.Info("pool's delegate permission changed; signing under the new one", "stage", s.o.Stage, "pool", p.String(),
					"signer", g.Key.Address().String(), "permission_id", g.PermissionID)
			}
			changed = true
		case why != "" && (was || s.problems[p] != why):
			delete(s.grants, p)
			s.problems[p] = why
			s.usable.WithLabelValues(s.o.Stage, p.String()).Set(0)
			if was || !s.checked {
				s.change.WithLabelValues(s.o.Stage, p.String(), "unusable").Inc()
				s.log.Warn("pool out of allocation: no signer holds its delegate permission", "stage", s.o.Stage, "pool", p.String(), "why", why)
			}
			changed = true
		}
	}
	s.checked = true
	problems := map[tron.Address]string{}
	for _, p := range s.o.Pools {
		problems[p] = s.problems[p]
	}
	s.mu.Unlock()
	if changed && s.o.OnChange != nil {
		s.o.OnChange(ctx, problems)
	}
}

// DelegatePermissionName names the permission DelegateOnly grants.
const DelegatePermissionName = "delegate"

// DelegateOnly is the AccountPermissionUpdateContract a pool's owner signs to grant
// signers a delegate-only permission: the owner permission stays the owner's key alone,
// and the only active permission (id 2) lets any one of signers (weight 1, threshold 1)
// sign DelegateResourceContract and UnDelegateResourceContract, nothing else. It replaces
// every active permission the pool had (java-tron's update replaces them all).
func DelegateOnly(pool tron.Address, signers ...tron.Address) *tron.AccountPermissionUpdateContract {
	keys := make([]tron.PermissionKey, len(signers))
	for i, a := range signers {
		keys[i] = tron.PermissionKey{Address: append([]byte(nil), a[:]...), Weight: 1}
	}
	return &tron.AccountPermissionUpdateContract{
		OwnerAddress: pool,
		OwnerPerm:    &tron.Permission{Type: tron.PermissionOwner, Name: "owner", Threshold: 1, Keys: []tron.PermissionKey{{Address: append([]byte(nil), pool[:]...), Weight: 1}}},
		Actives: []tron.Permission{{Type: tron.PermissionActive, Name: DelegatePermissionName, Threshold: 1,
			Operations: tron.Operations(Delegates...), Keys: keys}},
	}
}
