// Package tronsim is a TRON node simulator: a real HTTP server that serves the subset of
// java-tron's /wallet and /walletsolidity API the service uses, with java-tron's field
// names, error codes and validation messages, plus a control API under /sim/ for tests and
// the dev stack (funding, mining, fault injection, forks).
//
// Model in one paragraph. The simulator keeps two states: the confirmed state (the result
// of every block up to the head; all /wallet reads serve it) and a pending state (confirmed
// plus the transactions accepted since; every create and broadcast validates against it,
// so two broadcasts cannot spend the same stake). A block takes the pending transactions,
// re-executes them on the confirmed state and becomes the new head. Block time is chain
// time: block n is stamped GenesisTime + 3 s × n whatever the wall clock says, and every
// time-dependent rule (transaction expiration, delegation lock expiry, energy recovery)
// uses chain time, so mining 1,000 blocks at once moves the chain 50 minutes forward.
package tronsim

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"rental/infra/tron"
	"rental/schemas/network"
)

// BlockTimeMs is the spacing of block timestamps in chain time (java-tron's
// BLOCK_PRODUCED_INTERVAL). Lock periods are counted in these 3-second blocks.
const BlockTimeMs = 3000

// DefaultFaucetSeed derives the faucet key when Options.FaucetKey is nil. The key is
// public knowledge (anyone can derive it from this string): dev and tests only.
const DefaultFaucetSeed = "tronsim dev-only faucet key"

// DefaultUSDTSeed derives the simulated USDT contract address when Options.USDTContract
// is zero: the address is the last 20 bytes of sha256(seed), prefixed 0x41.
const DefaultUSDTSeed = "tronsim USDT contract"

// Options configure a simulator. The zero value (plus nothing) is a usable mainnet
// simulator with manual mining and no persistence.
type Options struct {
	// Network selects the network rules (max delegate lock period, unfreeze delay).
	// Empty means mainnet.
	Network network.Network
	// BlockInterval is the wall-clock time between produced blocks when Run is active.
	// 0 disables automatic production: blocks are made only by POST /sim/blocks or Mine.
	BlockInterval time.Duration
	// DataFile, when set, makes the chain survive restarts. The simulator writes
	// DataFile (state, atomically by temp file + rename) and DataFile+".blocks" (an
	// append-only block log whose valid length the state file records), so a SIGKILL at
	// any moment leaves a consistent pair. No fsync: a process crash loses nothing, a
	// power cut may lose the last blocks.
	DataFile string
	// Genesis accounts are created at block 0 of a new chain (ignored when DataFile
	// already holds a chain). The faucet is always added.
	Genesis []GenesisAccount
	// GenesisTime is block 0's timestamp. Zero means the wall clock at creation, rounded
	// down to 3 s.
	GenesisTime time.Time
	// USDTContract is the address of the simulated TRC-20 USDT. Zero means the
	// deterministic DefaultUSDTContract().
	USDTContract tron.Address
	// FaucetKey funds /sim transfers. Nil means DefaultFaucetKey() (dev only: public).
	FaucetKey *tron.PrivateKey
	// FaucetBalanceSun and FaucetUSDT are the faucet's genesis holdings; zero means
	// 10 billion TRX and 1 billion USDT.
	FaucetBalanceSun int64
	FaucetUSDT       int64
	// Params are the chain parameters; zero fields take mainnet values.
	Params ChainParams
	// SlowConfirmBlocks is how many extra blocks a slow_confirm fault holds a
	// transaction back (default 10); POST /sim/faults may override it per call.
	SlowConfirmBlocks int64
	// SolidLag is how far /walletsolidity trails the head (default 19 blocks, about
	// what java-tron's solidified block trails on mainnet).
	SolidLag int64
	// StampHeadTime stamps every built transaction with the head block's time instead of
	// the wall clock in milliseconds (java-tron's System.currentTimeMillis): a node that
	// does so builds byte-identical transactions for identical contracts within one block.
	// Tests of the service's own uniqueness (orderflow's uniqueStamp) set it; false is
	// java-tron's behaviour.
	StampHeadTime bool
	// Logger receives one line when listening and one per notable event; nil discards.
	Logger *slog.Logger
}

// GenesisAccount seeds one account at genesis (also the body of POST /sim/accounts).
// Stakes are total Stake 2.0 amounts in SUN; the account's TRX balance is separate.
type GenesisAccount struct {
	Address           tron.Address `json:"address"`
	BalanceSun        int64        `json:"balance_sun"`
	StakeEnergySun    int64        `json:"stake_energy_sun"`
	StakeBandwidthSun int64        `json:"stake_bandwidth_sun"`
	USDT              int64        `json:"usdt"`
}

// ChainParams are the dynamic properties the simulator models. Zero means the default
// shown; every value is in java-tron's unit.
type ChainParams struct {
	EnergyFee                           int64 // SUN per energy burned (100)
	TransactionFee                      int64 // SUN per bandwidth byte burned (1000)
	CreateAccountFee                    int64 // SUN, TRX transfer to a new address (100,000)
	CreateNewAccountFeeInSystemContract int64 // SUN, AccountCreateContract (1,000,000)
	TotalEnergyLimit                    int64 // energy per day for the whole chain (180,000,000,000)
	TotalNetLimit                       int64 // bandwidth per day for the whole chain (43,200,000,000)
	FreeNetLimit                        int64 // free bandwidth per activated account (600)
	// BaseEnergyWeight and BaseNetWeight stand for the TRX the rest of the world stakes
	// (in TRX, like TotalEnergyWeight). Stakes made in the simulator add to them.
	BaseEnergyWeight int64 // 19,000,000,000 TRX
	BaseNetWeight    int64 // 26,000,000,000 TRX
	// EnergyWeightDrift is the amplitude (TRX) of a deterministic triangle wave added to
	// TotalEnergyWeight with a period of EnergyWeightPeriod blocks, so energy per TRX moves
	// slightly every block as on the real chain. Negative disables it; 0 means 2,000,000.
	EnergyWeightDrift  int64
	EnergyWeightPeriod int64 // blocks (2,400)
	MaxFeeLimit        int64 // SUN (15,000,000,000)
	// MaxDelegateLockPeriod in blocks; zero means the network's cap (864,000 / 144,000).
	MaxDelegateLockPeriod int64
}

func (p ChainParams) withDefaults(n network.Network) ChainParams {
	def := func(v *int64, d int64) {
		if *v == 0 {
			*v = d
		}
	}
	def(&p.EnergyFee, 100)
	def(&p.TransactionFee, 1000)
	def(&p.CreateAccountFee, 100_000)
	def(&p.CreateNewAccountFeeInSystemContract, 1_000_000)
	def(&p.TotalEnergyLimit, 180_000_000_000)
	def(&p.TotalNetLimit, 43_200_000_000)
	def(&p.FreeNetLimit, 600)
	def(&p.BaseEnergyWeight, 19_000_000_000)
	def(&p.BaseNetWeight, 26_000_000_000)
	def(&p.EnergyWeightDrift, 2_000_000)
	if p.EnergyWeightDrift < 0 {
		p.EnergyWeightDrift = 0
	}
	def(&p.EnergyWeightPeriod, 2400)
	def(&p.MaxFeeLimit, 15_000_000_000)
	def(&p.MaxDelegateLockPeriod, n.MaxLockPeriodBlocks())
	return p
}

// DefaultFaucetKey is the dev-only faucet key: sha256(DefaultFaucetSeed).
func DefaultFaucetKey() tron.PrivateKey {
	h := sha256.Sum256([]byte(DefaultFaucetSeed))
	return tron.PrivateKeyFromBytes(h[:])
}

// DefaultUSDTContract is the simulated USDT address when none is configured.
func DefaultUSDTContract() tron.Address {
	h := sha256.Sum256([]byte(DefaultUSDTSeed))
	a, _ := tron.AddressFromBytes(h[12:])
	return a
}

// witnessKey is the block producer key of fork generation gen. A fork's new branch is
// signed by the next witness, which also makes its block ids differ from the orphans'.
func witnessKey(gen int64) tron.PrivateKey {
	h := sha256.Sum256(fmt.Appendf(nil, "tronsim witness %d", gen%27))
	return tron.PrivateKeyFromBytes(h[:])
}

func (o *Options) normalize() error {
	if o.Network == "" {
		o.Network = network.Mainnet
	}
	if _, err := network.Parse(string(o.Network)); err != nil {
		return err
	}
	if o.BlockInterval < 0 {
		return errors.New("tronsim: negative block interval")
	}
	if o.USDTContract.IsZero() {
		o.USDTContract = DefaultUSDTContract()
	}
	if o.FaucetKey == nil {
		k := DefaultFaucetKey()
		o.FaucetKey = &k
	}
	if o.FaucetBalanceSun == 0 {
		o.FaucetBalanceSun = 10_000_000_000 * 1_000_000
	}
	if o.FaucetUSDT == 0 {
		o.FaucetUSDT = 1_000_000_000 * 1_000_000
	}
	if o.SlowConfirmBlocks <= 0 {
		o.SlowConfirmBlocks = 10
	}
	if o.SolidLag <= 0 {
		o.SolidLag = 19
	}
	if o.GenesisTime.IsZero() {
		o.GenesisTime = time.Now()
	}
	o.GenesisTime = time.UnixMilli(o.GenesisTime.UnixMilli() / BlockTimeMs * BlockTimeMs)
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	o.Logger = o.Logger.With("stage", "tronsim")
	o.Params = o.Params.withDefaults(o.Network)
	for _, g := range o.Genesis {
		if g.Address.IsZero() {
			return errors.New("tronsim: genesis account without address")
		}
		if g.BalanceSun < 0 || g.StakeEnergySun < 0 || g.StakeBandwidthSun < 0 || g.USDT < 0 {
			return fmt.Errorf("tronsim: genesis account %s has a negative amount", g.Address)
		}
	}
	return nil
}
