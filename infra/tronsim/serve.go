package tronsim

import (
	"context"
	"errors"
	"net"
	"net/http"
	"time"

	"golang.org/x/sync/errgroup"
)

// Serve listens on addr (for example 127.0.0.1:8090), logs one line when listening, and
// runs the HTTP API and the block producer until ctx is cancelled; then it shuts the
// server down gracefully (in-flight calls get 5 s) and returns. It does not Close the Sim.
func (s *Sim) Serve(ctx context.Context, addr string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	return s.ServeListener(ctx, ln)
}

// ServeListener is Serve on an existing listener (tests pass 127.0.0.1:0).
func (s *Sim) ServeListener(ctx context.Context, ln net.Listener) error {
	srv := &http.Server{Handler: s.Handler(), ReadHeaderTimeout: 10 * time.Second}
	h := s.Head()
	s.log.Info("tronsim listening", "addr", "http://"+ln.Addr().String(), "network", s.opts.Network,
		"head", h.Number, "block_interval", s.opts.BlockInterval.String(),
		"faucet", s.FaucetAddress().String(), "usdt_contract", s.opts.USDTContract.String())
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			return err
		}
		return nil
	})
	g.Go(func() error { return s.Run(gctx) })
	g.Go(func() error {
		<-gctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := srv.Shutdown(sctx); err != nil {
			// net/http counts a connection that has not sent a request yet as busy for 5 s,
			// and an HTTP client leaves such spare dials open: close what is left rather
			// than fail the shutdown (the dev stack would exit 1 on SIGTERM).
			_ = srv.Close()
		}
		return nil
	})
	return g.Wait()
}
