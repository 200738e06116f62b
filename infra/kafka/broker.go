package kafka

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"

	"github.com/twmb/franz-go/pkg/kfake"
)

// DefaultBrokerAddr is where the dev stack's embedded broker listens.
const DefaultBrokerAddr = "127.0.0.1:9092"

// BrokerOptions configures the embedded broker.
type BrokerOptions struct {
	// Addr is the TCP listen address, also advertised to clients, so a client in another
	// process can attach with it as its only seed. Empty means DefaultBrokerAddr; a port of
	// 0 picks a free one (tests).
	Addr string
	// DataDir holds the log segments, topic metadata and committed group offsets. Writes
	// go to the OS page cache as they happen, so a SIGKILL of the process loses nothing;
	// only a machine crash can lose the unsynced tail unless SyncWrites is set.
	// Required: a broker without a data directory would silently lose everything.
	DataDir string
	// SyncWrites fsyncs every produced batch and group entry: survives power loss at a
	// large throughput cost. The dev stack leaves it off.
	SyncWrites bool
	Logger     *slog.Logger
}

// Broker is an in-process single-node Kafka cluster (franz-go's kfake) speaking the Kafka
// protocol over TCP.
type Broker struct {
	cluster *kfake.Cluster
	addr    string
	log     *slog.Logger
}

// StartBroker starts the broker, reloading whatever DataDir holds from a previous run.
func StartBroker(o BrokerOptions) (*Broker, error) {
	if o.DataDir == "" {
		return nil, errors.New("kafka broker: DataDir is required")
	}
	if o.Addr == "" {
		o.Addr = DefaultBrokerAddr
	}
	log := o.Logger
	if log == nil {
		log = slog.Default()
	}
	log = log.With("stage", "kafka")
	opts := []kfake.Opt{
		kfake.NumBrokers(1),
		kfake.DataDir(o.DataDir),
		// kfake always asks for 127.0.0.1:<port>; listen where we were told instead. The
		// advertised address is read from the listener, so it equals the listen address.
		kfake.ListenFn(func(network, _ string) (net.Listener, error) {
			return net.Listen(network, o.Addr)
		}),
		kfake.WithLogger(slogLogger{log}),
	}
	if o.SyncWrites {
		opts = append(opts, kfake.SyncWrites())
	}
	c, err := kfake.NewCluster(opts...)
	if err != nil {
		return nil, fmt.Errorf("kafka broker on %s (data %s): %w", o.Addr, o.DataDir, err)
	}
	addrs := c.ListenAddrs()
	return &Broker{cluster: c, addr: addrs[0], log: log}, nil
}

// Addr is the broker's host:port, usable as KAFKA_BROKERS by any Kafka client.
func (b *Broker) Addr() string { return b.addr }

// Close stops the broker and flushes its state to the data directory.
func (b *Broker) Close() { b.cluster.Close() }

// Run logs that the broker is up, blocks until ctx is cancelled, then closes the broker.
// It lets a process treat the broker like any other stage.
func (b *Broker) Run(ctx context.Context) error {
	b.LogUp()
	<-ctx.Done()
	b.Close()
	return nil
}

// LogUp logs the broker's one "up" line, for a process that closes it itself.
func (b *Broker) LogUp() { b.log.Info("embedded kafka broker up", "addr", b.addr) }

// slogLogger forwards kfake's warnings and errors; its info level logs every request.
type slogLogger struct{ l *slog.Logger }

func (s slogLogger) Logf(level kfake.LogLevel, msg string, args ...any) {
	switch level {
	case kfake.LogLevelError:
		s.l.Error(fmt.Sprintf(msg, args...))
	case kfake.LogLevelWarn:
		s.l.Warn(fmt.Sprintf(msg, args...))
	}
}
