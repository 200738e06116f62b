package webhookdelivery

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"
)

// The dispatcher runs one drive per key at a time (work for a busy key is merged into
// it), at most perAccount per account and maxDrives in all, and an account at its cap
// never keeps another account's key waiting.
func TestDispatcherBoundsAndIsolation(t *testing.T) {
	var mu sync.Mutex
	running := map[keyID]int{}
	perAcct := map[string]int{}
	maxPerAcct := map[string]int{}
	total, maxTotal := 0, 0
	calls := map[keyID][][]step{}
	release := make(chan struct{})
	started := make(chan keyID, 100)
	drive := func(ctx context.Context, acc, okey string, steps []step) error {
		id := keyID{acc, okey}
		mu.Lock()
		running[id]++
		if running[id] > 1 {
			t.Errorf("key %v driven twice at once", id)
		}
		perAcct[acc]++
		maxPerAcct[acc] = max(maxPerAcct[acc], perAcct[acc])
		total++
		maxTotal = max(maxTotal, total)
		calls[id] = append(calls[id], steps)
		mu.Unlock()
		started <- id
		if acc == "slow" {
			select {
			case <-release:
			case <-ctx.Done():
			}
		}
		mu.Lock()
		running[id]--
		perAcct[acc]--
		total--
		mu.Unlock()
		return nil
	}
	p := newDispatcher(4, 2, 100, slog.New(slog.NewTextHandler(io.Discard, nil)), drive)
	ctx, cancel := context.WithCancel(context.Background())
	defer func() { cancel(); p.wait() }()
	p.start(ctx)

	for i := 0; i < 10; i++ {
		p.submit("slow", string(rune('a'+i)), nil)
	}
	for i := 0; i < 2; i++ {
		<-started
	}
	// Work for a key being driven is merged: the wake-up step follows in the same job.
	p.submit("slow", "a", &step{EventID: "e", Role: "primary", N: 2})
	// Another account is not held up by the slow one's keys.
	for i := 0; i < 3; i++ {
		p.submit("fast", string(rune('a'+i)), nil)
	}
	deadline := time.After(2 * time.Second)
	for n := 0; n < 3; {
		select {
		case id := <-started:
			if id.account != "fast" {
				t.Fatalf("%v started while the slow account is at its cap", id)
			}
			n++
		case <-deadline:
			t.Fatal("the fast account's keys waited for the slow account's")
		}
	}
	close(release)
	deadline = time.After(5 * time.Second)
	for n := 0; n < 9; n++ { // 8 more keys of the slow account, and a again
		select {
		case <-started:
		case <-deadline:
			t.Fatalf("only %d more drives of the slow account", n)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if maxPerAcct["slow"] > 2 || maxPerAcct["fast"] > 2 || maxTotal > 4 {
		t.Errorf("concurrency per account %v, in all %d; caps 2 and 4", maxPerAcct, maxTotal)
	}
	if c := calls[keyID{"slow", "a"}]; len(c) != 2 || len(c[1]) != 1 || c[1][0].N != 2 {
		t.Errorf("drives of slow/a: %v, want the head then the merged wake-up step", c)
	}
}
