package kafka_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"rental/infra/kafka"
	"rental/schemas/topics"
)

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// startBroker runs an embedded broker on a free 127.0.0.1 port for the test.
func startBroker(t *testing.T) *kafka.Broker {
	t.Helper()
	b, err := kafka.StartBroker(kafka.BrokerOptions{Addr: "127.0.0.1:0", DataDir: t.TempDir(), Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	return b
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

func newClient(t *testing.T, addr string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kafka.NewClient([]string{addr}, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

func createTopic(t *testing.T, addr, name string, partitions int32) {
	t.Helper()
	adm := kadm.NewClient(newClient(t, addr))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := kafka.EnsureTopics(ctx, adm, []topics.Topic{{Name: name, Key: "k", Partitions: partitions, Cleanup: topics.Delete}})
	if err != nil {
		t.Fatal(err)
	}
}

// produce writes n records "key-i"/"i" (keys cycle over keys) and waits for acks.
func produce(t *testing.T, cl *kgo.Client, topic string, from, n, keys int) {
	t.Helper()
	rs := make([]*kgo.Record, 0, n)
	for i := from; i < from+n; i++ {
		rs = append(rs, &kgo.Record{Topic: topic, Key: []byte("key-" + strconv.Itoa(i%keys)), Value: []byte(strconv.Itoa(i))})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// eventually polls cond until it holds or the deadline passes.
func eventually(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for: %s", within, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// testRunnerOpts are the runner options tests share: fast heartbeats so rebalances take
// milliseconds, a private metrics registry.
func testRunnerOpts(addr, group, topic string, h kafka.Handler) kafka.RunnerOptions {
	return kafka.RunnerOptions{
		Brokers:    []string{addr},
		Group:      group,
		Topics:     []string{topic},
		Handler:    h,
		Logger:     quietLogger(),
		Registerer: prometheus.NewRegistry(),
		RetryMin:   10 * time.Millisecond,
		RetryMax:   50 * time.Millisecond,
		ClientOpts: []kgo.Opt{kgo.HeartbeatInterval(100 * time.Millisecond), kgo.FetchMaxWait(100 * time.Millisecond)},
	}
}

// committed returns the group's committed offset per partition of topic (-1 if none).
func committed(t *testing.T, addr, group, topic string, partitions int32) []int64 {
	t.Helper()
	adm := kadm.NewClient(newClient(t, addr))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out := make([]int64, partitions)
	resp, err := adm.FetchOffsets(ctx, group)
	if errors.Is(err, kerr.GroupIDNotFound) {
		for p := range out {
			out[p] = -1
		}
		return out
	}
	if err != nil {
		t.Fatal(err)
	}
	for p := range partitions {
		out[p] = -1
		if o, ok := resp.Lookup(topic, p); ok && o.Err == nil {
			out[p] = o.At
		}
	}
	return out
}
