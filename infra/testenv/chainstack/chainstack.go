// Package chainstack runs, for a test, the chain side that every processor's integration
// test stands on: the TRON node simulator on loopback (fast blocks), the outbox relay and
// chainwatch following the simulator, against the test's Postgres and Kafka. It lives
// apart from testenv because it imports the stages testenv's own tests are in.
package chainstack

import (
	"context"
	"crypto/sha256"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"rental/chainwatch"
	"rental/infra/custody"
	"rental/infra/kafka"
	"rental/infra/outbox"
	"rental/infra/tron"
	"rental/infra/tronsim"
	"rental/schemas/network"
)

// Chain is a running simulator with the relay and chainwatch behind it.
type Chain struct {
	Sim  *tronsim.Sim
	URL  string       // the simulator's node HTTP API
	Node *tron.Client // a client of it (2 s timeout)
}

// Start starts the simulator of network nw with genesis (blocks every 100 ms), the relay
// publishing pool's outbox to brokers, and chainwatch writing the simulator's facts (one
// confirmation) to pool; all stop when the test ends.
// Each of simOpts may change the simulator's options (a slower block clock, head-time
// stamps) before it starts.
func Start(t testing.TB, pool *pgxpool.Pool, brokers string, nw network.Network, genesis []tronsim.GenesisAccount, simOpts ...func(*tronsim.Options)) *Chain {
	t.Helper()
	quiet := slog.New(slog.DiscardHandler)
	so := tronsim.Options{Network: nw, BlockInterval: 100 * time.Millisecond, SolidLag: 1, Genesis: genesis, Logger: quiet}
	for _, f := range simOpts {
		f(&so)
	}
	sim, err := tronsim.New(so)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c := &Chain{Sim: sim, URL: "http://" + ln.Addr().String()}
	c.Node = tron.NewClient(c.URL, tron.WithTimeout(2*time.Second))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{}, 3)
	go func() { _ = sim.ServeListener(ctx, ln); done <- struct{}{} }()
	stop := func(n int) {
		cancel()
		for range n {
			<-done
		}
	}
	producer, err := kafka.NewClient([]string{brokers})
	if err != nil {
		stop(1)
		t.Fatal(err)
	}
	relay, err := outbox.NewRelay(outbox.RelayOptions{Pool: pool, Producer: producer, Logger: quiet,
		Registerer: prometheus.NewRegistry(), SweepEvery: 100 * time.Millisecond})
	if err != nil {
		stop(1)
		t.Fatal(err)
	}
	go func() { _ = relay.Run(ctx); done <- struct{}{} }()
	follower, err := chainwatch.New(chainwatch.Options{
		Pool: pool, Source: chainwatch.NewNodeSource(c.Node, 4), Outbox: outbox.InsertRecord, Network: nw,
		Tokens: []tron.Address{sim.USDTContract()}, Confirmations: 1, PollEvery: 20 * time.Millisecond, Start: 0,
		Logger: quiet, Registerer: prometheus.NewRegistry(),
	})
	if err != nil {
		stop(2)
		t.Fatal(err)
	}
	go func() { _ = follower.Run(ctx); done <- struct{}{} }()
	t.Cleanup(func() {
		stop(3)
		producer.Close()
		_ = sim.Close()
	})
	return c
}

// SignerKey is the tests' signer key: it holds the delegate-only permission of the pools
// GrantSigner set up, never a pool's owner key.
func SignerKey() tron.PrivateKey {
	seed := sha256.Sum256([]byte("chainstack test pool signer"))
	return tron.PrivateKeyFromBytes(seed[:])
}

// SignerAccount is the signer's own account for a genesis: its TRX pays activations and
// deep reserve rentals.
func SignerAccount() tronsim.GenesisAccount {
	return tronsim.GenesisAccount{Address: SignerKey().Address(), BalanceSun: 100_000 * tron.SunPerTRX}
}

// GrantSigner has each pool's owner grant SignerKey its delegate-only permission (the
// chain set-up; the pools need 100 TRX each for the fee) and returns the started custody
// signers of those pools, as a signing stage holds them.
func GrantSigner(t testing.TB, sim *tronsim.Sim, node custody.Node, owners ...tron.PrivateKey) *custody.Signers {
	t.Helper()
	pools := make([]tron.Address, len(owners))
	for i, k := range owners {
		if err := sim.GrantDelegates(k, SignerKey().Address()); err != nil {
			t.Fatal(err)
		}
		pools[i] = k.Address()
	}
	return Signers(t, node, pools...)
}

// Signers are started custody signers of pools for SignerKey.
func Signers(t testing.TB, node custody.Node, pools ...tron.Address) *custody.Signers {
	t.Helper()
	s, err := custody.New(custody.Options{Node: node, Pools: pools, Keys: []tron.PrivateKey{SignerKey()}, Strict: true,
		Stage: "test", Registerer: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	return s
}
