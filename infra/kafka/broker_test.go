package kafka_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"rental/infra/kafka"
	"rental/schemas/topics"
)

func TestEnsureTopicsCreatesCatalogueIdempotently(t *testing.T) {
	b := startBroker(t)
	adm := kadm.NewClient(newClient(t, b.Addr()))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for range 2 { // the second run finds every topic present and must still succeed
		if err := kafka.EnsureTopics(ctx, adm, topics.All()); err != nil {
			t.Fatal(err)
		}
	}
	details, err := adm.ListTopics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range topics.All() {
		d, ok := details[want.Name]
		if !ok {
			t.Fatalf("topic %s not created", want.Name)
		}
		if got := int32(len(d.Partitions)); got != want.Partitions {
			t.Errorf("%s: %d partitions, want %d", want.Name, got, want.Partitions)
		}
	}
	rcs, err := adm.DescribeTopicConfigs(ctx, topics.OrderEvents.Name)
	if err != nil {
		t.Fatal(err)
	}
	rc, err := rcs.On(topics.OrderEvents.Name, nil)
	if err != nil {
		t.Fatal(err)
	}
	var retention string
	for _, c := range rc.Configs {
		if c.Key == "retention.ms" {
			retention = c.MaybeValue()
		}
	}
	if want := *topics.OrderEvents.Configs()["retention.ms"]; retention != want {
		t.Errorf("retention.ms = %q, want %q", retention, want)
	}
}

func TestEnsureTopicsReportsFailures(t *testing.T) {
	b := startBroker(t)
	adm := kadm.NewClient(newClient(t, b.Addr()))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	bad := topics.Topic{Name: "bad.partitions", Partitions: 0, Cleanup: topics.Delete}
	err := kafka.EnsureTopics(ctx, adm, []topics.Topic{bad})
	if err == nil {
		t.Fatal("a topic with 0 partitions was accepted")
	}
	if !strings.Contains(err.Error(), "bad.partitions") {
		t.Fatalf("error does not name the topic: %v", err)
	}
}

// TestHelperProcess is not a test: the durability test runs the test binary again with
// RENTAL_KAFKA_BROKER_HELPER=1 to get a broker in a process it can SIGKILL.
func TestHelperProcess(t *testing.T) {
	if os.Getenv("RENTAL_KAFKA_BROKER_HELPER") != "1" {
		return
	}
	b, err := kafka.StartBroker(kafka.BrokerOptions{Addr: os.Getenv("BROKER_ADDR"), DataDir: os.Getenv("BROKER_DIR"), Logger: quietLogger()})
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(2)
	}
	fmt.Println("ready", b.Addr())
	select {} // until killed
}

func startBrokerProcess(t *testing.T, addr, dir string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperProcess$")
	cmd.Env = append(os.Environ(), "RENTAL_KAFKA_BROKER_HELPER=1", "BROKER_ADDR="+addr, "BROKER_DIR="+dir)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	ready := make(chan string, 1)
	go func() {
		s := bufio.NewScanner(out)
		for s.Scan() {
			select {
			case ready <- s.Text():
			default:
			}
		}
	}()
	select {
	case line := <-ready:
		if line != "ready "+addr {
			t.Fatalf("broker process: %s", line)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("broker process did not start")
	}
	return cmd
}

func TestEmbeddedBrokerSurvivesSIGKILL(t *testing.T) {
	addr, dir := freeAddr(t), t.TempDir()
	const topic, parts, n = "durable", int32(3), 300
	proc := startBrokerProcess(t, addr, dir)
	createTopic(t, addr, topic, parts)
	producer := newClient(t, addr)
	produce(t, producer, topic, 0, n, 7)

	// A group consumes a part of each partition and commits those offsets.
	group := newClient(t, addr, kgo.ConsumerGroup("g-durable"), kgo.ConsumeTopics(topic),
		kgo.DisableAutoCommit(), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	want := map[int32]int64{}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for len(want) < int(parts) {
		fs := group.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatal("no records polled")
		}
		fs.EachPartition(func(p kgo.FetchTopicPartition) {
			if _, done := want[p.Partition]; done || len(p.Records) < 2 {
				return
			}
			last := p.Records[len(p.Records)/2]
			if err := group.CommitRecords(ctx, last); err != nil {
				t.Fatal(err)
			}
			want[p.Partition] = last.Offset + 1
		})
	}
	group.Close()
	producer.Close()

	// SIGKILL: no chance to flush or save anything on the way out.
	if err := proc.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = proc.Wait()
	startBrokerProcess(t, addr, dir)

	got := committed(t, addr, "g-durable", topic, parts)
	for p, at := range want {
		if got[p] != at {
			t.Errorf("partition %d: committed offset %d after restart, want %d", p, got[p], at)
		}
	}

	// Every record is still there, in order per key.
	reader := newClient(t, addr, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	perKey := map[string][]int{}
	seen := 0
	for seen < n {
		fs := reader.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %d of %d records after restart", seen, n)
		}
		fs.EachRecord(func(r *kgo.Record) {
			v, _ := strconv.Atoi(string(r.Value))
			perKey[string(r.Key)] = append(perKey[string(r.Key)], v)
			seen++
		})
	}
	if seen != n {
		t.Fatalf("read %d records, want %d", seen, n)
	}
	for k, vs := range perKey {
		if !slices.IsSorted(vs) {
			t.Errorf("key %s out of order: %v", k, vs)
		}
	}
}
