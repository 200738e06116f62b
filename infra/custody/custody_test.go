package custody_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"rental/infra/custody"
	"rental/infra/tron"
	"rental/infra/tronsim"
)

type chain struct {
	sim  *tronsim.Sim
	node *tron.Client
}

// newChain is a simulator over HTTP with one pool (1,000 TRX, staked energy) owned by the
// returned key.
func newChain(t *testing.T, extra ...tron.Address) (chain, tron.PrivateKey) {
	t.Helper()
	pool, err := tron.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	genesis := []tronsim.GenesisAccount{{Address: pool.Address(), BalanceSun: 1_000 * tron.SunPerTRX, StakeEnergySun: 1_000_000 * tron.SunPerTRX}}
	for _, a := range extra {
		genesis = append(genesis, tronsim.GenesisAccount{Address: a, BalanceSun: 10 * tron.SunPerTRX})
	}
	sim, err := tronsim.New(tronsim.Options{Genesis: genesis})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(sim.Handler())
	t.Cleanup(func() { srv.Close(); _ = sim.Close() })
	return chain{sim, tron.NewClient(srv.URL)}, pool
}

func key(t *testing.T) tron.PrivateKey {
	t.Helper()
	k, err := tron.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// update has the pool's owner replace its permissions and mines the block.
func (c chain) update(t *testing.T, owner tron.PrivateKey, u *tron.AccountPermissionUpdateContract) {
	t.Helper()
	if _, err := c.sim.Submit(u, owner); err != nil {
		t.Fatal(err)
	}
	if _, err := c.sim.Mine(1); err != nil {
		t.Fatal(err)
	}
}

func signers(t *testing.T, c chain, strict bool, pools []tron.Address, keys []tron.PrivateKey, log *bytes.Buffer, reg prometheus.Registerer) (*custody.Signers, error) {
	t.Helper()
	s, err := custody.New(custody.Options{Node: c.node, Pools: pools, Keys: keys, Strict: strict, Stage: "orderflow",
		Logger: slog.New(slog.NewTextHandler(log, nil)), Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	return s, s.Start(context.Background())
}

// A delegate-only grant is found with its permission id; the owner key, and a key whose
// permission allows more (a transfer), are refused under Strict with what they could do,
// and only warned about otherwise.
func TestStartRefusesKeysThatCanDoMore(t *testing.T) {
	signer := key(t)
	c, pool := newChain(t)
	c.update(t, pool, custody.DelegateOnly(pool.Address(), signer.Address()))
	var log bytes.Buffer
	s, err := signers(t, c, true, []tron.Address{pool.Address()}, []tron.PrivateKey{signer}, &log, prometheus.NewRegistry())
	if err != nil {
		t.Fatalf("narrow signer refused: %v", err)
	}
	if g, ok := s.Grant(pool.Address()); !ok || g.PermissionID != 2 || g.Key.Address() != signer.Address() {
		t.Fatalf("grant %+v %v", g, ok)
	}

	_, err = signers(t, c, true, []tron.Address{pool.Address()}, []tron.PrivateKey{pool}, &log, prometheus.NewRegistry())
	if !errors.Is(err, custody.ErrTooPowerful) || !strings.Contains(err.Error(), "it is the owner key of pool "+pool.Address().String()) ||
		!strings.Contains(err.Error(), "grant the signer a narrow permission instead") {
		t.Fatalf("owner key on mainnet: %v", err)
	}

	wide := custody.DelegateOnly(pool.Address(), signer.Address())
	wide.Actives[0].Operations = tron.Operations(tron.DelegateResourceContractType, tron.UnDelegateResourceContractType, tron.TransferContractType)
	c.update(t, pool, wide)
	_, err = signers(t, c, true, []tron.Address{pool.Address()}, []tron.PrivateKey{signer}, &log, prometheus.NewRegistry())
	if !errors.Is(err, custody.ErrTooPowerful) || !strings.Contains(err.Error(), "also allows TransferContract") {
		t.Fatalf("signer allowed to transfer, on mainnet: %v", err)
	}
	log.Reset()
	s, err = signers(t, c, false, []tron.Address{pool.Address()}, []tron.PrivateKey{signer}, &log, prometheus.NewRegistry())
	if err != nil || !strings.Contains(log.String(), "also allows TransferContract") {
		t.Fatalf("off mainnet: %v, log %s", err, log.String())
	}
	if _, ok := s.Grant(pool.Address()); !ok {
		t.Fatal("off mainnet the wide signer is still used")
	}
}

// A pool whose permission is removed leaves allocation at the next check, with one log line
// and the metric at 0, and comes back by itself when the permission is granted again; a
// permission whose threshold the signer no longer reaches counts as removed.
func TestPoolLeavesAndComesBack(t *testing.T) {
	signer := key(t)
	c, pool := newChain(t)
	c.update(t, pool, custody.DelegateOnly(pool.Address(), signer.Address()))
	var log bytes.Buffer
	reg := prometheus.NewRegistry()
	s, err := signers(t, c, true, []tron.Address{pool.Address()}, []tron.PrivateKey{signer}, &log, reg)
	if err != nil {
		t.Fatal(err)
	}
	usable := func() float64 {
		t.Helper()
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if mf.GetName() != "rental_custody_pool_usable" {
				continue
			}
			for _, m := range mf.GetMetric() {
				for _, l := range m.GetLabel() {
					if l.GetName() == "pool" && l.GetValue() == pool.Address().String() {
						return m.GetGauge().GetValue()
					}
				}
			}
		}
		return -1
	}
	if len(s.Usable()) != 1 || usable() != 1 {
		t.Fatalf("usable %v, metric %v", s.Usable(), usable())
	}

	// The owner replaces the permission by one that does not name the signer.
	c.update(t, pool, custody.DelegateOnly(pool.Address(), key(t).Address()))
	log.Reset()
	s.Check(context.Background())
	s.Check(context.Background())
	if len(s.Usable()) != 0 || usable() != 0 || !strings.Contains(s.Problems()[pool.Address()], "lists a signer key") {
		t.Fatalf("after removal: usable %v, metric %v, problems %v", s.Usable(), usable(), s.Problems())
	}
	if n := strings.Count(log.String(), "pool out of allocation"); n != 1 {
		t.Fatalf("%d log lines for one change:\n%s", n, log.String())
	}

	// Threshold raised above the signer's weight.
	high := custody.DelegateOnly(pool.Address(), signer.Address(), key(t).Address())
	high.Actives[0].Threshold = 2
	c.update(t, pool, high)
	s.Check(context.Background())
	if !strings.Contains(s.Problems()[pool.Address()], "weighs 1 in permission 2 (threshold 2)") {
		t.Fatalf("below threshold: %v", s.Problems())
	}

	c.update(t, pool, custody.DelegateOnly(pool.Address(), signer.Address()))
	log.Reset()
	s.Check(context.Background())
	if len(s.Usable()) != 1 || usable() != 1 || strings.Count(log.String(), "pool in allocation") != 1 {
		t.Fatalf("after the grant: usable %v, metric %v, log %s", s.Usable(), usable(), log.String())
	}
}

// Rotation: with the old and the new key both in the permission, a stage deployed with the
// new key alone signs at once; removing the old key afterwards changes nothing for it.
func TestRotation(t *testing.T) {
	old, next := key(t), key(t)
	c, pool := newChain(t)
	c.update(t, pool, custody.DelegateOnly(pool.Address(), old.Address(), next.Address()))
	var log bytes.Buffer
	s, err := signers(t, c, true, []tron.Address{pool.Address()}, []tron.PrivateKey{next}, &log, prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	if g, ok := s.Grant(pool.Address()); !ok || g.Key.Address() != next.Address() {
		t.Fatalf("new key's grant %+v %v", g, ok)
	}
	c.update(t, pool, custody.DelegateOnly(pool.Address(), next.Address()))
	s.Check(context.Background())
	if g, ok := s.Grant(pool.Address()); !ok || g.Key.Address() != next.Address() || strings.Contains(log.String(), "out of allocation") {
		t.Fatalf("after removing the old key: %+v %v\n%s", g, ok, log.String())
	}
}
