package testenv_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"rental/infra/testenv"
	"rental/schemas/events"
	"rental/schemas/network"
	"rental/schemas/topics"
)

// recorder is a testing.TB whose Errorf and Cleanup are observed, so the test can run the
// broker's cleanup itself and see whether it would fail the test.
type recorder struct {
	testing.TB
	errs     []string
	cleanups []func()
}

func (r *recorder) Errorf(format string, args ...any) {
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}
func (r *recorder) Cleanup(f func()) { r.cleanups = append(r.cleanups, f) }
func (r *recorder) runCleanups() {
	for i := len(r.cleanups) - 1; i >= 0; i-- {
		r.cleanups[i]()
	}
}

func produce(t *testing.T, addr string, recs ...*kgo.Record) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

func lowRecord(t *testing.T, data any) *kgo.Record {
	t.Helper()
	env, err := events.New(events.EventBalanceLow, "acc_1", network.Nile, data)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(env)
	return &kgo.Record{Topic: topics.AccountEvents.Name, Key: []byte("acc_1"), Value: b}
}

// A record that breaks its schema, planted on a test's broker, fails that test when it
// ends; valid records and records of internal topics do not.
func TestKafkaFailsTheTestOnARecordThatBreaksItsSchema(t *testing.T) {
	ok := events.BalanceLow{BalanceSun: 1, ThresholdSun: 10}
	for _, c := range []struct {
		name  string
		plant bool
	}{{"valid records only", false}, {"one planted wrong payload", true}} {
		t.Run(c.name, func(t *testing.T) {
			r := &recorder{TB: t}
			addr := testenv.Kafka(r)
			recs := []*kgo.Record{lowRecord(t, ok), {Topic: topics.OrderIntents.Name, Key: []byte("k"), Value: []byte("internal")}}
			if c.plant {
				recs = append(recs, lowRecord(t, map[string]any{"balance_sun": "1", "threshold_sun": 10, "estimated_orders_remaining": 0}))
			}
			produce(t, addr, recs...)
			r.runCleanups()
			switch {
			case c.plant && (len(r.errs) != 1 || !strings.Contains(r.errs[0], "balance_sun")):
				t.Fatalf("planted payload: test errors %q, want one naming balance_sun", r.errs)
			case !c.plant && len(r.errs) != 0:
				t.Fatalf("valid records: test errors %q", r.errs)
			}
		})
	}
}

// SyntheticPayloads turns the check off for transport tests.
func TestSyntheticPayloadsAreNotChecked(t *testing.T) {
	r := &recorder{TB: t}
	addr := testenv.Kafka(r, testenv.SyntheticPayloads)
	produce(t, addr, lowRecord(t, map[string]any{"seq": 1}))
	r.runCleanups()
	if len(r.errs) != 0 {
		t.Fatalf("errors %q", r.errs)
	}
}
