package deposits

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"rental/infra/metrics"
	"rental/infra/tron"
	"rental/schemas/ledger"
)

// SourceSunswapV3 names the SunSwap v3 pool source (rate_now.source); a credit's
// rate_source adds the block read: sunswap_v3@<block>.
const SourceSunswapV3 = "sunswap_v3"

// PoolNode is what the pool source needs of the node (*tron.Client implements it).
type PoolNode interface {
	GetSolidHead(ctx context.Context) (*tron.Block, error)
	TriggerConstantContractSolid(ctx context.Context, t *tron.TriggerSmartContract) (*tron.TransactionExtention, error)
}

// PoolRateOptions configure a PoolRate.
type PoolRateOptions struct {
	Node   PoolNode
	Source string       // the source's name, SourceSunswapV3
	Pool   tron.Address // the USDT/WTRX pool
	USDT   tron.Address // the pool's tokens must be these two
	WTRX   tron.Address
	Window time.Duration // the time-weighted mean's window (whole seconds)
	Guards ledger.PoolGuards
	// Metrics receives every read (nil: none).
	Metrics *RateMetrics
	Logger  *slog.Logger
	Now     func() time.Time // default time.Now; the age of a rate is Now minus its block's time
}

// PoolRate is the rate of a Uniswap-v3-style USDT/WTRX pool (SunSwap v3): the pool's
// time-weighted mean price over Window, read with observe through the node's constant
// calls at the solidified block, judged by ledger.JudgePool. Every failure to get a usable
// reading is "no rate" (ok false, nil error), never an error: a deposit is then held
// without a rate as the spec allows; only the caller's own cancellation is an error.
type PoolRate struct {
	o PoolRateOptions

	mu     sync.Mutex
	tokens *poolTokens // read once: a pool's tokens never change
}

type poolTokens struct {
	usdtIsToken0           bool
	usdtDecimals, wtrxDecs int
}

// NewPoolRate checks the options.
func NewPoolRate(o PoolRateOptions) (*PoolRate, error) {
	if o.Node == nil || o.Pool.IsZero() || o.USDT.IsZero() || o.WTRX.IsZero() {
		return nil, errors.New("deposits: pool rate: Node, Pool, USDT and WTRX are required")
	}
	if o.Window < time.Second || o.Window > 24*time.Hour {
		return nil, fmt.Errorf("deposits: pool rate: window %s must be between 1s and 24h", o.Window)
	}
	if o.Source == "" {
		o.Source = SourceSunswapV3
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &PoolRate{o: o}, nil
}

// errNoRate carries the reason of a reading that gives no rate.
type errNoRate struct {
	reason string
	err    error
}

func (e *errNoRate) Error() string { return e.reason + ": " + e.err.Error() }

func noRate(reason string, format string, args ...any) error {
	return &errNoRate{reason: reason, err: fmt.Errorf(format, args...)}
}

// Rate implements RateSource.
func (p *PoolRate) Rate(ctx context.Context) (Rate, bool, error) {
	judged, block, reason, err := p.read(ctx)
	if err != nil && ctx.Err() != nil {
		return Rate{}, false, err
	}
	var nr *errNoRate
	if errors.As(err, &nr) {
		reason = nr.reason
		p.o.Logger.Warn("no USDT rate from the pool", "pool", p.o.Pool.String(), "reason", reason, "err", nr.err)
	} else if err != nil {
		reason = ledger.NoRateUnreadable
		p.o.Logger.Warn("no USDT rate from the pool", "pool", p.o.Pool.String(), "reason", reason, "err", err)
	} else if reason != "" {
		p.o.Logger.Info("no USDT rate from the pool", "pool", p.o.Pool.String(), "reason", reason, "block", block.Number(),
			"spot_sun", judged.SpotSun, "mean_sun", judged.MeanSun, "gap_bps", judged.GapBps)
	}
	var r Rate
	if reason == "" {
		r = Rate{SunPerUSDT: judged.RateSun, Source: fmt.Sprintf("%s@%d", p.o.Source, block.Number()),
			At: time.UnixMilli(block.Timestamp()).UTC()}
	}
	p.o.Metrics.observe(p.o.Source, p.o.Now(), r, judged, reason)
	return r, reason == "", nil
}

// read reads the pool at one solidified block: the block's number and time before and
// after the calls must be the same, or the reading is taken again (at most three times).
func (p *PoolRate) read(ctx context.Context) (ledger.PoolRate, *tron.Block, string, error) {
	tokens, err := p.readTokens(ctx)
	if err != nil {
		return ledger.PoolRate{}, nil, "", err
	}
	window := uint32(p.o.Window / time.Second)
	for range 3 {
		before, err := p.o.Node.GetSolidHead(ctx)
		if err != nil {
			return ledger.PoolRate{}, nil, "", err
		}
		slot0, err := p.call(ctx, p.o.Pool, tron.SelectorSlot0)
		if err != nil {
			return ledger.PoolRate{}, nil, "", err
		}
		liq, err := p.call(ctx, p.o.Pool, tron.SelectorLiquidity)
		if err != nil {
			return ledger.PoolRate{}, nil, "", err
		}
		obs, err := p.call(ctx, p.o.Pool, tron.ObserveData(window, 0))
		var rev *revertError
		if errors.As(err, &rev) && rev.reason == "OLD" {
			return ledger.PoolRate{}, before, "", noRate(ledger.NoRateWindow, "the pool's oldest observation is less than %s old", p.o.Window)
		}
		if err != nil {
			return ledger.PoolRate{}, nil, "", err
		}
		after, err := p.o.Node.GetSolidHead(ctx)
		if err != nil {
			return ledger.PoolRate{}, nil, "", err
		}
		if after.Number() != before.Number() {
			continue
		}
		sqrtP, _, err := tron.DecodeSlot0(slot0)
		if err != nil {
			return ledger.PoolRate{}, nil, "", err
		}
		l, err := tron.DecodeUint256(liq)
		if err != nil {
			return ledger.PoolRate{}, nil, "", err
		}
		cums, err := tron.DecodeObserve(obs, 2)
		if err != nil {
			return ledger.PoolRate{}, nil, "", err
		}
		judged, reason := ledger.JudgePool(ledger.PoolReading{
			USDTIsToken0: tokens.usdtIsToken0, USDTDecimals: tokens.usdtDecimals, WTRXDecimals: tokens.wtrxDecs,
			SqrtPriceX96: sqrtP, Liquidity: l, TickCumulativeThen: cums[0], TickCumulativeNow: cums[1], WindowSeconds: window,
		}, p.o.Guards)
		return judged, before, reason, nil
	}
	return ledger.PoolRate{}, nil, "", errors.New("the solidified block moved during three readings in a row")
}

// readTokens reads token0, token1 and both tokens' decimals once.
func (p *PoolRate) readTokens(ctx context.Context) (poolTokens, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.tokens != nil {
		return *p.tokens, nil
	}
	var addrs [2]tron.Address
	for i, sel := range [][]byte{tron.SelectorToken0, tron.SelectorToken1} {
		out, err := p.call(ctx, p.o.Pool, sel)
		if err != nil {
			return poolTokens{}, err
		}
		if addrs[i], err = tron.DecodeAddressResult(out); err != nil {
			return poolTokens{}, err
		}
	}
	var t poolTokens
	switch addrs {
	case [2]tron.Address{p.o.USDT, p.o.WTRX}:
		t.usdtIsToken0 = true
	case [2]tron.Address{p.o.WTRX, p.o.USDT}:
	default:
		return poolTokens{}, fmt.Errorf("the pool's tokens are %s and %s, not USDT %s and WTRX %s", addrs[0], addrs[1], p.o.USDT, p.o.WTRX)
	}
	for _, d := range []struct {
		token tron.Address
		into  *int
	}{{p.o.USDT, &t.usdtDecimals}, {p.o.WTRX, &t.wtrxDecs}} {
		out, err := p.call(ctx, d.token, tron.SelectorDecimals)
		if err != nil {
			return poolTokens{}, err
		}
		v, err := tron.DecodeUint256(out)
		if err != nil || !v.IsInt64() || v.Int64() > 36 {
			return poolTokens{}, fmt.Errorf("decimals() of %s: %v %v", d.token, v, err)
		}
		*d.into = int(v.Int64())
	}
	p.tokens = &t
	return t, nil
}

// revertError is a constant call that reverted, with its reason string if any.
type revertError struct{ reason string }

func (e *revertError) Error() string { return fmt.Sprintf("call reverted (%q)", e.reason) }

// call runs a constant call at the solidified block and returns its result word(s).
func (p *PoolRate) call(ctx context.Context, contract tron.Address, data []byte) (string, error) {
	ext, err := p.o.Node.TriggerConstantContractSolid(ctx, &tron.TriggerSmartContract{
		OwnerAddress: p.o.Pool, ContractAddress: contract, Data: data})
	if err != nil {
		return "", err
	}
	if ext.Reverted() {
		reason := ""
		if len(ext.ConstantResult) > 0 {
			reason = tron.RevertReason(ext.ConstantResult[0])
		}
		return "", &revertError{reason: reason}
	}
	if len(ext.ConstantResult) == 0 {
		return "", errors.New("constant call answered no result")
	}
	return ext.ConstantResult[0], nil
}

// RateMetrics are the USDT rate's gauges (docs/ledger.md "USDT rate sources").
type RateMetrics struct {
	rate, age, gap *prometheus.GaugeVec
	unavailable    *prometheus.GaugeVec
	reads          *prometheus.CounterVec
}

// NewRateMetrics registers the gauges on reg (shared by every source of one process).
func NewRateMetrics(reg prometheus.Registerer) *RateMetrics {
	m := &RateMetrics{
		rate: metrics.Register(reg, prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "rental_usdt_rate_sun",
			Help: "SUN per 1 USDT before the spread of the last rate read (0 while there is none)."}, []string{"source"})),
		age: metrics.Register(reg, prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "rental_usdt_rate_age_seconds",
			Help: "Seconds between the block the last rate was read at and the read (0 before the first rate)."}, []string{"source"})),
		gap: metrics.Register(reg, prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "rental_usdt_rate_spot_gap_bps",
			Help: "Basis points between the pool's spot price and its time-weighted mean at the last read."}, []string{"source"})),
		unavailable: metrics.Register(reg, prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "rental_usdt_rate_unavailable",
			Help: "1 for the reason the last read gave no USDT rate, 0 for the others (all 0 with a rate)."}, []string{"source", "reason"})),
		reads: metrics.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{Name: "rental_usdt_rate_reads_total",
			Help: "USDT rate reads by result: ok, or the reason for no rate."}, []string{"source", "result"})),
	}
	return m
}

func (m *RateMetrics) observe(src string, now time.Time, r Rate, judged ledger.PoolRate, reason string) {
	if m == nil {
		return
	}
	m.gap.WithLabelValues(src).Set(float64(judged.GapBps))
	for _, rs := range ledger.NoRateReasons {
		v := 0.0
		if rs == reason {
			v = 1
		}
		m.unavailable.WithLabelValues(src, rs).Set(v)
	}
	if reason != "" {
		m.age.WithLabelValues(src) // exported (0) before the first rate; keeps the last rate's age after it
		m.rate.WithLabelValues(src).Set(0)
		m.reads.WithLabelValues(src, reason).Inc()
		return
	}
	m.rate.WithLabelValues(src).Set(float64(r.SunPerUSDT))
	m.age.WithLabelValues(src).Set(now.Sub(r.At).Seconds())
	m.reads.WithLabelValues(src, "ok").Inc()
}
