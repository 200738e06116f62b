package accounts

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"sync"
	"testing"

	"rental/infra/testenv"
	"rental/infra/tron"
	"rental/schemas/network"
)

func addr(t *testing.T) tron.Address {
	var b [20]byte
	_, _ = rand.Read(b[:])
	a, err := tron.AddressFromBytes(b[:])
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// Concurrent signups of one address create exactly one account.
func TestCreateOrGetByOwnerRace(t *testing.T) {
	db := testenv.Postgres(t)
	s, err := New(db.Pool, Options{})
	if err != nil {
		t.Fatal(err)
	}
	owner := addr(t)
	label := "mine"
	var wg sync.WaitGroup
	var mu sync.Mutex
	ids := map[string]bool{}
	created := 0
	for i := 0; i < 20; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a, c, err := s.CreateOrGetByOwner(context.Background(), network.Nile, owner, nil, &label)
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			ids[a.ID] = true
			if c {
				created++
			}
		}()
	}
	wg.Wait()
	if len(ids) != 1 || created != 1 {
		t.Fatalf("%d accounts, %d reported created; want 1 and 1", len(ids), created)
	}
	a, err := s.GetAccountByOwner(context.Background(), network.Nile, owner)
	if err != nil || a.Status != StatusUnfunded || a.Owner != owner || *a.Label != "mine" {
		t.Fatalf("%+v %v", a, err)
	}
	// The same address on the other network is another account.
	b, c, err := s.CreateOrGetByOwner(context.Background(), network.Mainnet, owner, nil, nil)
	if err != nil || !c || b.ID == a.ID {
		t.Fatalf("mainnet account: %+v created=%v %v", b, c, err)
	}
	if u, err := s.UpdateLabel(context.Background(), a.ID, nil); err != nil || u.Label != nil {
		t.Fatalf("clear label: %+v %v", u, err)
	}
	if _, err := s.GetAccount(context.Background(), "acc_missing"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("missing account: %v", err)
	}
}

func TestSealer(t *testing.T) {
	s, err := NewSealer(bytes.Repeat([]byte{7}, 32))
	if err != nil {
		t.Fatal(err)
	}
	sealed := s.Seal("ak_test_1", []byte("sk_test_secret"))
	if bytes.Contains(sealed, []byte("secret")) {
		t.Fatal("plaintext visible")
	}
	if pt, err := s.Open("ak_test_1", sealed); err != nil || string(pt) != "sk_test_secret" {
		t.Fatalf("%q %v", pt, err)
	}
	if _, err := s.Open("ak_test_2", sealed); !errors.Is(err, ErrUnseal) {
		t.Fatal("a sealed secret opened under another key id")
	}
	other, _ := NewSealer(bytes.Repeat([]byte{8}, 32))
	if _, err := other.Open("ak_test_1", sealed); !errors.Is(err, ErrUnseal) {
		t.Fatal("a sealed secret opened under another master key")
	}
	if _, err := NewSealer([]byte("short")); err == nil {
		t.Fatal("short master key accepted")
	}
}

func TestKeyForAuth(t *testing.T) {
	db := testenv.Postgres(t)
	s, _ := New(db.Pool, Options{MasterKey: bytes.Repeat([]byte{1}, 32), MaxActiveKeys: 1})
	a, _, err := s.CreateOrGetByOwner(context.Background(), network.Mainnet, addr(t), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	ck, err := s.CreateKey(context.Background(), a.ID, NewKey{Scopes: []string{"orders.read"}}, "test")
	if err != nil {
		t.Fatal(err)
	}
	if len(ck.ID) != len("ak_live_")+32 || ck.Secret[:8] != "sk_live_" {
		t.Fatalf("mainnet credentials %s %s", ck.ID, ck.Secret[:8])
	}
	ak, err := s.KeyForAuth(context.Background(), ck.ID)
	if err != nil || string(ak.Secret) != ck.Secret || ak.AccountStatus != StatusUnfunded || ak.AccountNetwork != network.Mainnet {
		t.Fatalf("%+v %v", ak, err)
	}
	if _, err := s.CreateKey(context.Background(), a.ID, NewKey{Scopes: []string{"orders.read"}}, "test"); err == nil {
		t.Fatal("limit of 1 active key not enforced")
	}
	if _, err := s.KeyForAuth(context.Background(), "ak_live_missing"); !errors.Is(err, ErrNotFound) {
		t.Fatal(err)
	}
	// Several at once: the same answer for a key, nothing for a missing one.
	many, err := s.KeysForAuth(context.Background(), []string{ck.ID, "ak_live_missing"})
	if err != nil || len(many) != 1 || string(many[ck.ID].Secret) != ck.Secret || many[ck.ID].AccountStatus != StatusUnfunded ||
		many[ck.ID].AccountNetwork != network.Mainnet || many[ck.ID].Scopes[0] != "orders.read" {
		t.Fatalf("KeysForAuth: %+v %v", many, err)
	}
}
