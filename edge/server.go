// Package edge is the HTTP transport of rental-api-v1 on fasthttp: routing, request ids,
// panic recovery, access metrics, JSON in and out, and the single mapping from errors to
// the spec's error envelope. It holds no business rules and no SQL; handlers call domain
// packages and return errors, which errors.go turns into envelopes.
package edge

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"time"

	"github.com/fasthttp/router"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/valyala/fasthttp"

	"rental/infra/depstate"
	"rental/infra/idempotency"
	"rental/infra/ratelimit"
	"rental/schemas/network"
)

// Options are the server's explicit dependencies and limits.
type Options struct {
	Logger     *slog.Logger          // required
	Registerer prometheus.Registerer // required; access metrics are registered here
	Network    network.Network       // the `network` field of responses
	Addr       string                // listen address for Run, e.g. 127.0.0.1:8080
	Brand      string                // the `brand` field of responses

	// Handler dependencies. Later issues add their stores and services here.
	Status StatusReporter // GET /v1/status; required

	// Authentication (auth.go). Each is optional: a nil authenticator never finds its
	// credential, so endpoints that need it answer 1001/1013.
	Keys      Authenticator // API key signatures (NewKeyAuthenticator)
	Bootstrap Authenticator // bootstrap tokens (signup)
	Sessions  Authenticator // dashboard sessions, with CSRF on unsafe methods
	// TrustedProxies are the load balancers whose X-Forwarded-For is believed (ClientIP).
	TrustedProxies []netip.Prefix
	// IPv6SourceBits is how much of an IPv6 client address identifies one source for the
	// per-IP budget and the signup challenge limits (ClientSource): default 64, the
	// network a single subscriber is handed; 128 counts each address apart. IPv4
	// addresses always count alone.
	IPv6SourceBits int

	// Modules contribute handlers for endpoints of Endpoints (auth.go).
	Modules []Module
	// Dashboard serves the web page at "/" (edge/dashboard); nil leaves "/" unrouted.
	Dashboard Dashboard

	// Limiter charges the budgets of RateLimits; nil switches rate limiting (and the
	// RateLimit headers) off, for tests of other concerns only.
	Limiter    *ratelimit.Limiter
	RateLimits RateLimits

	// Accounts serves GET /v1/account and /v1/api-keys; nil leaves them answering 9002.
	Accounts AccountStore
	// Idempotency keeps Idempotency-Key records; required when Accounts is set.
	Idempotency *idempotency.Store
	// Account are the sources of the Account record (ledger, deposit addresses, limits).
	Account AccountSources
	// MaxActiveKeys bounds the active API keys of an account (default 10; 3017).
	MaxActiveKeys int

	// MaxBodyBytes caps a request body (default 1 MiB). A larger body is refused with 2001
	// validation_failed, field "body", before any handler runs.
	MaxBodyBytes int
	// RequestTimeout is the deadline of the context handed to handlers (default 30 s).
	RequestTimeout time.Duration
	// ShutdownGrace is how long Run waits for in-flight requests after ctx is cancelled
	// (default 10 s). After it, handlers' contexts are cancelled and Run returns.
	ShutdownGrace time.Duration
	// ReadTimeout, WriteTimeout and IdleTimeout protect against slow or idle clients
	// (defaults 10 s, 60 s, 60 s).
	ReadTimeout, WriteTimeout, IdleTimeout time.Duration
}

// Server is the API edge. Create it with New, then call Run or Serve once.
type Server struct {
	opts    Options
	log     *slog.Logger
	metrics *metrics
	router  *router.Router
	http    *fasthttp.Server

	// base is the parent of every handler context. It is not cancelled when shutdown
	// starts, so in-flight requests can finish their database work; it is cancelled when
	// the grace period runs out.
	base       context.Context
	cancelBase context.CancelFunc

	limiterErrors prometheus.Counter // budget checks Redis did not answer
	local         *ratelimit.Local   // the budgets while Redis is down
	redisState    *depstate.Tracker  // one log line per change of Redis' state
	storeState    *depstate.Tracker  // the same for 9003 answers (a store refused)

	// testHandlers replaces entries of the handler map (tests only, set before routing).
	testHandlers map[string]HandlerFunc
	// authOff skips authentication and authorisation. Only newServer from tests sets it,
	// when the test configures no authenticator at all (tests of transport, JSON and
	// metrics concerns); New never does, so production always authenticates.
	authOff bool
}

// New validates opts, registers metrics and builds the routes.
func New(opts Options) (*Server, error) {
	return newServer(opts, nil)
}

func newServer(opts Options, testHandlers map[string]HandlerFunc) (*Server, error) {
	if opts.Logger == nil || opts.Registerer == nil || opts.Status == nil {
		return nil, errors.New("edge: Logger, Registerer and Status are required")
	}
	if _, err := network.Parse(string(opts.Network)); err != nil {
		return nil, fmt.Errorf("edge: Options.Network: %w", err)
	}
	if opts.MaxBodyBytes <= 0 {
		opts.MaxBodyBytes = 1 << 20
	}
	if opts.RequestTimeout <= 0 {
		opts.RequestTimeout = 30 * time.Second
	}
	if opts.ShutdownGrace <= 0 {
		opts.ShutdownGrace = 10 * time.Second
	}
	if opts.ReadTimeout <= 0 {
		opts.ReadTimeout = 10 * time.Second
	}
	if opts.WriteTimeout <= 0 {
		opts.WriteTimeout = 60 * time.Second
	}
	if opts.IdleTimeout <= 0 {
		opts.IdleTimeout = 60 * time.Second
	}
	if opts.MaxActiveKeys <= 0 {
		opts.MaxActiveKeys = 10
	}
	if opts.Accounts != nil && opts.Idempotency == nil {
		return nil, errors.New("edge: Idempotency is required with Accounts")
	}
	opts.RateLimits.defaults()
	if opts.IPv6SourceBits == 0 {
		opts.IPv6SourceBits = DefaultIPv6SourceBits
	}
	if opts.IPv6SourceBits < 1 || opts.IPv6SourceBits > 128 {
		return nil, fmt.Errorf("edge: IPv6SourceBits %d outside 1..128", opts.IPv6SourceBits)
	}
	opts.Account.defaults(opts)
	m, err := newMetrics(opts.Registerer)
	if err != nil {
		return nil, err
	}
	s := &Server{opts: opts, log: opts.Logger.With("stage", "edge"), metrics: m, testHandlers: testHandlers}
	s.authOff = testHandlers != nil && opts.Keys == nil && opts.Bootstrap == nil && opts.Sessions == nil
	s.local, s.redisState = ratelimit.NewLocal(), depstate.New("redis", s.log)
	s.storeState = depstate.New("a store (postgres or redis)", s.log)
	s.limiterErrors = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "rental_edge_rate_limiter_errors_total",
		Help: "Rate-limit and quota checks Redis did not answer (decided by the replica's in-memory budgets; quotas let through).",
	})
	if err := opts.Registerer.Register(s.limiterErrors); err != nil {
		return nil, fmt.Errorf("edge: register metrics: %w", err)
	}
	s.base, s.cancelBase = context.WithCancel(context.Background())
	if err := s.buildRouter(); err != nil {
		return nil, err
	}
	s.http = &fasthttp.Server{
		Handler:              s.middleware(s.router.Handler),
		ErrorHandler:         s.transportErrorWithBudget,
		Name:                 "rental",
		MaxRequestBodySize:   opts.MaxBodyBytes,
		ReadBufferSize:       readBufferSize,
		ReadTimeout:          opts.ReadTimeout,
		WriteTimeout:         opts.WriteTimeout,
		IdleTimeout:          opts.IdleTimeout,
		CloseOnShutdown:      true, // keep-alive clients learn to reconnect elsewhere
		NoDefaultContentType: true,
		Logger:               fasthttpLogger{s.log},
	}
	return s, nil
}

// Run listens on Options.Addr and serves until ctx is cancelled; see Serve.
func (s *Server) Run(ctx context.Context) error {
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", s.opts.Addr)
	if err != nil {
		return fmt.Errorf("edge: listen on %s: %w", s.opts.Addr, err)
	}
	return s.Serve(ctx, ln)
}

// Serve serves ln until ctx is cancelled, then shuts down gracefully: it stops accepting,
// lets in-flight requests finish for up to ShutdownGrace, and returns nil. It returns an
// error only when serving fails or the grace period ran out with requests still running.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	s.log.Info("edge listening on " + ln.Addr().String())
	errc := make(chan error, 1)
	go func() { errc <- s.http.Serve(lingerListener{ln}) }()

	select {
	case err := <-errc:
		s.cancelBase()
		if err != nil {
			return fmt.Errorf("edge: serve: %w", err)
		}
		return nil
	case <-ctx.Done():
	}

	s.log.Info("edge shutting down", "grace", s.opts.ShutdownGrace.String())
	sctx, cancel := context.WithTimeout(context.Background(), s.opts.ShutdownGrace)
	defer cancel()
	err := s.http.ShutdownWithContext(sctx)
	s.cancelBase() // whatever still runs is told to stop
	<-errc         // Serve returns as soon as the listener closes
	if err != nil {
		return fmt.Errorf("edge: shutdown: requests still running after %s: %w", s.opts.ShutdownGrace, err)
	}
	s.log.Info("edge stopped")
	return nil
}

// requestContext is the context a handler gets: bounded by RequestTimeout and cancelled
// when the shutdown grace period ends. (fasthttp's RequestCtx is itself a context, but it
// is cancelled the moment shutdown starts, which would abort the requests we drain.)
func (s *Server) requestContext() (context.Context, context.CancelFunc) {
	return context.WithTimeout(s.base, s.opts.RequestTimeout)
}

// transportErrorWithBudget charges the per-IP budget for a request fasthttp could not
// read, so its answer carries the RateLimit headers too, then answers it.
func (s *Server) transportErrorWithBudget(rc *fasthttp.RequestCtx, err error) {
	if nothingReceived(rc, err) {
		// A connection that sent not one byte before ReadTimeout is closed without an
		// answer, as an idle keep-alive connection is: an unsolicited 400 on a connection
		// the client never used (HTTP clients open spare ones) would be read as the answer
		// to its next request, or logged by it as garbage.
		_ = rc.Conn().Close()
		return
	}
	s.resolveClientIP(rc)
	ctx, cancel := s.requestContext()
	_ = s.chargeIP(ctx, rc) // the request is refused anyway; only the headers matter
	cancel()
	s.transportError(rc, err)
}

// nothingReceived reports a first request's read timeout before any byte arrived: fasthttp
// hands that case over as the bare timeout error (a timeout after part of the headers is
// wrapped, and one in the body comes with the headers parsed).
func nothingReceived(rc *fasthttp.RequestCtx, err error) bool {
	ne, ok := err.(net.Error)
	return ok && ne.Timeout() && len(rc.Request.Header.RawHeaders()) == 0
}

// fasthttpLogger routes fasthttp's own messages (accept errors and the like) to slog.
type fasthttpLogger struct{ log *slog.Logger }

func (l fasthttpLogger) Printf(format string, args ...any) {
	l.log.Warn(fmt.Sprintf(format, args...), "source", "fasthttp")
}
