package chainwatch

import (
	"github.com/prometheus/client_golang/prometheus"

	"rental/infra/metrics"
)

type followerMetrics struct {
	headLag   prometheus.Gauge
	cursor    prometheus.Gauge
	blocks    prometheus.Counter
	facts     *prometheus.CounterVec
	forks     prometheus.Counter
	pollFails prometheus.Counter
	// nodeProblem is 1 while the node is refused (another chain) or behind the cursor.
	nodeProblem prometheus.Gauge
}

func newMetrics(reg prometheus.Registerer) *followerMetrics {
	m := &followerMetrics{
		headLag: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "rental_chainwatch_head_lag_blocks",
			Help: "Blocks between the node's head and the last block whose facts are committed.",
		}),
		cursor: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "rental_chainwatch_cursor_block",
			Help: "Number of the last block whose facts are committed.",
		}),
		blocks: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "rental_chainwatch_blocks_processed_total",
			Help: "Blocks read and committed (a block read again after a fork counts again).",
		}),
		facts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "rental_chainwatch_facts_emitted_total",
			Help: "Chain facts written to the outbox, by kind.",
		}, []string{"kind"}),
		forks: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "rental_chainwatch_forks_detected_total",
			Help: "Forks detected (a read block's parent differed from the stored predecessor).",
		}),
		pollFails: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "rental_chainwatch_poll_errors_total",
			Help: "Polls that failed (node unreachable, database error, fork deeper than the window).",
		}),
		nodeProblem: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "rental_chainwatch_node_problem",
			Help: "1 while the node is refused: another chain than the stored cursor's, or a head below the cursor.",
		}),
	}
	if reg != nil {
		m.nodeProblem = metrics.Register(reg, m.nodeProblem)
		m.headLag = metrics.Register(reg, m.headLag)
		m.cursor = metrics.Register(reg, m.cursor)
		m.blocks = metrics.Register(reg, m.blocks)
		m.facts = metrics.Register(reg, m.facts)
		m.forks = metrics.Register(reg, m.forks)
		m.pollFails = metrics.Register(reg, m.pollFails)
	}
	return m
}
