// Package chainread answers the chain questions of the public API from the node: the
// resource situation of an address (GET /v1/resources/{address}), the energy price
// parameter (burn_sun of GET /v1/market, burn_alternative_sun of transfer estimates) and
// the constant-call simulation of a TRC-20 transfer (POST /v1/estimate/transfer).
//
// Address resources are cached a few seconds twice: in Redis, shared by every edge replica
// (so N replicas ask the node once per address per TTL, not N times), and in a short
// in-process map in front of it (so a hot address does not cost a Redis round trip per
// request). Concurrent misses for one address share one read.
package chainread

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"golang.org/x/sync/singleflight"

	"rental/infra/tron"
	"rental/schemas/events"
	"rental/schemas/network"
)

// Node is the part of the node's API read here; *tron.Client is one.
type Node interface {
	GetAccount(ctx context.Context, addr tron.Address) (*tron.Account, error)
	GetAccountResource(ctx context.Context, addr tron.Address) (*tron.AccountResource, error)
	TriggerConstantContract(ctx context.Context, t *tron.TriggerSmartContract) (*tron.TransactionExtention, error)
	GetChainParameters(ctx context.Context) (*tron.ChainParameters, error)
}

// Options configure a Reader.
type Options struct {
	Node    Node            // required
	Network network.Network // required: part of the cache keys
	USDT    tron.Address    // the network's USDT contract (holds_usdt); zero: holds_usdt is null
	// Redis holds the cache shared by replicas; nil keeps only the in-process cache.
	Redis       *redis.Client
	RedisPrefix string // prepended to every key (tests use a namespace)
	// TTL is how long an address's resources are served from the shared cache (default
	// 3 s; the spec's "a few seconds"); LocalTTL how long from process memory (default 1 s,
	// at most TTL).
	TTL, LocalTTL time.Duration
	// FeeTTL is how long the energy price parameter is reused (default 60 s; it changes by
	// committee vote, rarely).
	FeeTTL time.Duration
	// Timeout bounds one node call (default 3 s).
	Timeout time.Duration
	Now     func() time.Time
}

// Reader reads and caches.
type Reader struct {
	o     Options
	group singleflight.Group

	mu    sync.Mutex
	local map[tron.Address]localEntry

	feeMu  sync.Mutex
	fee    int64
	feeAt  time.Time
	feeErr error
}

type localEntry struct {
	r  Resources
	at time.Time
}

// maxLocal bounds the in-process cache; above it, it is cleared (a flood of distinct
// addresses must not grow memory).
const maxLocal = 50_000

// New checks the options.
func New(o Options) (*Reader, error) {
	if o.Node == nil {
		return nil, errors.New("chainread: Node is required")
	}
	if _, err := network.Parse(string(o.Network)); err != nil {
		return nil, fmt.Errorf("chainread: %w", err)
	}
	if o.TTL <= 0 {
		o.TTL = 3 * time.Second
	}
	if o.LocalTTL <= 0 {
		o.LocalTTL = time.Second
	}
	o.LocalTTL = min(o.LocalTTL, o.TTL)
	if o.FeeTTL <= 0 {
		o.FeeTTL = time.Minute
	}
	if o.Timeout <= 0 {
		o.Timeout = 3 * time.Second
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Reader{o: o, local: map[tron.Address]localEntry{}}, nil
}

// Resource is the energy or bandwidth part of AddressResources.
type Resource struct {
	Limit       int64 `json:"limit"`
	Used        int64 `json:"used"`
	Available   int64 `json:"available"`
	DelegatedIn int64 `json:"delegated_in"`
}

// Bandwidth adds the daily free allowance (included in Limit).
type Bandwidth struct {
	Resource
	FreeNetLimit int64 `json:"free_net_limit"`
}

// Resources is AddressResources without our_active_orders (which is per caller).
type Resources struct {
	Address    string      `json:"address"`
	Activated  bool        `json:"activated"`
	BalanceSun int64       `json:"balance_sun"`
	HoldsUSDT  *bool       `json:"holds_usdt"`
	Energy     Resource    `json:"energy"`
	Bandwidth  Bandwidth   `json:"bandwidth"`
	AsOf       events.Time `json:"as_of"`
}

func (r *Reader) key(addr tron.Address) string {
	return r.o.RedisPrefix + "chainread:resources:" + string(r.o.Network) + ":" + addr.String()
}

// Resources returns addr's resources, from a cache when one holds a read younger than
// the TTL. A failed node read is not cached; it wraps tron.ErrNodeUnavailable when the
// node did not answer.
func (r *Reader) Resources(ctx context.Context, addr tron.Address) (Resources, error) {
	now := r.o.Now()
	r.mu.Lock()
	e, ok := r.local[addr]
	r.mu.Unlock()
	if ok && now.Sub(e.at) < r.o.LocalTTL {
		return e.r, nil
	}
	v, err, _ := r.group.Do(string(addr[:]), func() (any, error) {
		if res, ok := r.fromRedis(ctx, addr); ok {
			r.remember(addr, res, now)
			return res, nil
		}
		res, err := r.read(ctx, addr)
		if err != nil {
			return Resources{}, err
		}
		r.toRedis(ctx, addr, res)
		r.remember(addr, res, r.o.Now())
		return res, nil
	})
	if err != nil {
		return Resources{}, err
	}
	return v.(Resources), nil
}

func (r *Reader) remember(addr tron.Address, res Resources, at time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.local) >= maxLocal {
		clear(r.local)
	}
	r.local[addr] = localEntry{r: res, at: at}
}

// fromRedis reads the shared cache; a Redis failure is a miss (the node is asked).
func (r *Reader) fromRedis(ctx context.Context, addr tron.Address) (Resources, bool) {
	if r.o.Redis == nil {
		return Resources{}, false
	}
	rctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancel()
	b, err := r.o.Redis.Get(rctx, r.key(addr)).Bytes()
	if err != nil {
		return Resources{}, false
	}
	var res Resources
	if json.Unmarshal(b, &res) != nil {
		return Resources{}, false
	}
	return res, true
}

func (r *Reader) toRedis(ctx context.Context, addr tron.Address, res Resources) {
	if r.o.Redis == nil {
		return
	}
	b, err := json.Marshal(res)
	if err != nil {
		return
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 500*time.Millisecond)
	defer cancel()
	_ = r.o.Redis.Set(rctx, r.key(addr), b, r.o.TTL).Err()
}

func (r *Reader) call(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), r.o.Timeout)
}

// read asks the node: getaccount, getaccountresource (activated addresses only) and the
// USDT balanceOf.
func (r *Reader) read(ctx context.Context, addr tron.Address) (Resources, error) {
	cctx, cancel := r.call(ctx)
	defer cancel()
	acc, err := r.o.Node.GetAccount(cctx, addr)
	if err != nil {
		return Resources{}, err
	}
	res := Resources{Address: addr.String(), Activated: acc.Exists(), BalanceSun: acc.Balance}
	if acc.Exists() {
		ar, err := r.o.Node.GetAccountResource(cctx, addr)
		if err != nil {
			return Resources{}, err
		}
		res.Energy = Resource{Limit: ar.EnergyLimit, Used: ar.EnergyUsed}
		res.Energy.DelegatedIn, _ = tron.EnergyForBalance(acc.AccountResource.AcquiredDelegatedFrozenV2BalanceForEnergy, ar.TotalEnergyLimit, ar.TotalEnergyWeight)
		res.Bandwidth = Bandwidth{FreeNetLimit: ar.FreeNetLimit,
			Resource: Resource{Limit: ar.NetLimit + ar.FreeNetLimit, Used: ar.NetUsed + ar.FreeNetUsed}}
		// Bandwidth from stake follows the same formula over the network's bandwidth totals.
		res.Bandwidth.DelegatedIn, _ = tron.EnergyForBalance(acc.AcquiredDelegatedFrozenV2BalanceForBandwidth, ar.TotalNetLimit, ar.TotalNetWeight)
	}
	res.Energy.Available = max(0, res.Energy.Limit-res.Energy.Used)
	res.Bandwidth.Available = max(0, res.Bandwidth.Limit-res.Bandwidth.Used)
	if !r.o.USDT.IsZero() {
		if bal, err := r.balanceOf(cctx, r.o.USDT, addr); err == nil {
			h := bal.Sign() > 0
			res.HoldsUSDT = &h
		}
	}
	res.AsOf = events.Time(r.o.Now().UTC().Truncate(time.Millisecond))
	return res, nil
}

// balanceOf reads token.balanceOf(owner) with a constant call.
func (r *Reader) balanceOf(ctx context.Context, token, owner tron.Address) (*big.Int, error) {
	ext, err := r.o.Node.TriggerConstantContract(ctx, &tron.TriggerSmartContract{
		OwnerAddress: owner, ContractAddress: token, Data: tron.TRC20BalanceOfData(owner)})
	if err != nil {
		return nil, err
	}
	if reverted(ext) || len(ext.ConstantResult) == 0 {
		return nil, fmt.Errorf("chainread: balanceOf on %s reverted", token)
	}
	return tron.DecodeUint256(ext.ConstantResult[0])
}

// EnergyFee is the chain's getEnergyFee parameter: SUN burnt per energy unit. It is read
// at most once per FeeTTL; when a refresh fails the last value read is kept (the
// parameter changes rarely), and only a reader that never got one returns the error.
func (r *Reader) EnergyFee(ctx context.Context) (int64, error) {
	r.feeMu.Lock()
	defer r.feeMu.Unlock()
	now := r.o.Now()
	if r.fee > 0 && now.Sub(r.feeAt) < r.o.FeeTTL {
		return r.fee, nil
	}
	cctx, cancel := r.call(ctx)
	defer cancel()
	p, err := r.o.Node.GetChainParameters(cctx)
	if err == nil {
		v, ok := p.Get("getEnergyFee")
		if !ok || v <= 0 {
			err = errors.New("chainread: the node lists no getEnergyFee")
		} else {
			r.fee, r.feeAt = v, now
			return v, nil
		}
	}
	if r.fee > 0 {
		return r.fee, nil
	}
	return 0, err
}

// reverted reads a constant call's outcome as java-tron prints it: result.result is true
// (the call ran) and a revert shows as result.message "REVERT opcode executed" and as
// transaction.ret [{"ret":"FAILED","contractRet":"REVERT"}].
func reverted(ext *tron.TransactionExtention) bool { return ext.Reverted() }
