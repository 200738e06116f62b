package signup

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"rental/infra/testenv"
	"rental/infra/tron"
	"rental/schemas/network"
)

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time          { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Advance(d time.Duration) { c.mu.Lock(); c.t = c.t.Add(d); c.mu.Unlock() }

func newService(t *testing.T) (*Service, *clock) {
	t.Helper()
	db := testenv.Postgres(t)
	clk := &clock{t: time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)}
	s, err := New(db.Pool, Options{Brand: "tronrent", Host: "api.rental.test", Network: network.Nile, Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	return s, clk
}

func TestRedeemSingleUseUnderConcurrency(t *testing.T) {
	s, _ := newService(t)
	ctx := context.Background()
	key, _ := tron.GenerateKey()
	c, err := s.Issue(ctx, key.Address(), PurposeSignup)
	if err != nil {
		t.Fatal(err)
	}
	sig, _ := key.SignMessageV2([]byte(c.Message))
	var wins, losses atomic.Int32
	var wg sync.WaitGroup
	for range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := s.Redeem(ctx, key.Address(), c.Nonce, sig, PurposeSignup)
			switch {
			case err == nil:
				wins.Add(1)
			case errors.Is(err, ErrChallengeInvalid):
				losses.Add(1)
			default:
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if wins.Load() != 1 || losses.Load() != 19 {
		t.Fatalf("wins %d losses %d, want 1 and 19", wins.Load(), losses.Load())
	}
}

func TestRedeemRefusals(t *testing.T) {
	s, clk := newService(t)
	ctx := context.Background()
	key, _ := tron.GenerateKey()
	other, _ := tron.GenerateKey()
	issue := func(p Purpose) (Challenge, string) {
		c, err := s.Issue(ctx, key.Address(), p)
		if err != nil {
			t.Fatal(err)
		}
		sig, _ := key.SignMessageV2([]byte(c.Message))
		return c, sig
	}
	c, sig := issue(PurposeLogin)
	if _, err := s.Redeem(ctx, key.Address(), c.Nonce, sig, PurposeSignup, PurposeRecovery); !errors.Is(err, ErrChallengeInvalid) {
		t.Errorf("login challenge redeemed for signup: %v", err)
	}
	if _, err := s.Redeem(ctx, other.Address(), c.Nonce, sig, PurposeLogin); !errors.Is(err, ErrChallengeInvalid) {
		t.Errorf("redeemed for another address: %v", err)
	}
	otherSig, _ := other.SignMessageV2([]byte(c.Message))
	if _, err := s.Redeem(ctx, key.Address(), c.Nonce, otherSig, PurposeLogin); !errors.Is(err, ErrChallengeInvalid) {
		t.Errorf("signature of another key accepted: %v", err)
	}
	// None of the refusals used the nonce up.
	if _, err := s.Redeem(ctx, key.Address(), c.Nonce, sig, PurposeLogin); err != nil {
		t.Errorf("valid redemption after refusals: %v", err)
	}

	c, sig = issue(PurposeSignup)
	clk.Advance(10*time.Minute - time.Millisecond)
	c2, sig2 := issue(PurposeSignup)
	clk.Advance(time.Millisecond) // c expires exactly now: ten minutes after issue
	if _, err := s.Redeem(ctx, key.Address(), c.Nonce, sig, PurposeSignup); !errors.Is(err, ErrChallengeInvalid) {
		t.Errorf("expired challenge redeemed: %v", err)
	}
	if _, err := s.Redeem(ctx, key.Address(), c2.Nonce, sig2, PurposeSignup); err != nil {
		t.Errorf("live challenge refused: %v", err)
	}
	if _, err := s.Redeem(ctx, key.Address(), "00112233445566778899aabbccddeeff", sig, PurposeSignup); !errors.Is(err, ErrChallengeInvalid) {
		t.Errorf("unknown nonce: %v", err)
	}
}

func TestBootstrapTokenLifetime(t *testing.T) {
	s, clk := newService(t)
	ctx := context.Background()
	key, _ := tron.GenerateKey()
	tok, err := s.IssueToken(ctx, key.Address(), "")
	if err != nil {
		t.Fatal(err)
	}
	if len(tok.Secret) < 40 || tok.Secret[:4] != TokenPrefix {
		t.Fatalf("token %q", tok.Secret[:4])
	}
	if !tok.ExpiresAt.Equal(clk.Now().Add(15 * time.Minute)) {
		t.Errorf("expires_at %s", tok.ExpiresAt)
	}
	got, err := s.LookupToken(ctx, tok.Secret)
	if err != nil || got.Address != key.Address() || got.AccountID != "" {
		t.Fatalf("lookup: %+v %v", got, err)
	}
	if _, err := s.LookupToken(ctx, tok.Secret+"x"); !errors.Is(err, ErrTokenInvalid) {
		t.Errorf("altered token: %v", err)
	}
	clk.Advance(15 * time.Minute)
	if _, err := s.LookupToken(ctx, tok.Secret); !errors.Is(err, ErrTokenInvalid) {
		t.Errorf("expired token: %v", err)
	}
}
