// Command mcp is the MCP server for AI agents (infra/mcpserver, docs/mcp.md): the rental API's
// tools over stdio (the default: the agent starts it as a subprocess) or streamable HTTP
// (-http ADDR). Configuration comes from the environment:
//
//	RENTAL_API_URL      the API's base URL (default http://127.0.0.1:8080, the dev stack)
//	RENTAL_API_KEY      the API key id (ak_live_... or ak_test_...); without it only the
//	                    public tools (prices, market, estimate, resources) work
//	RENTAL_API_SECRET   its secret (never logged)
//	RENTAL_API_SCOPES   optional, comma-separated: the scopes the key was created with; tools
//	                    needing another scope are not offered
//	RENTAL_MCP_TOKEN    with -http: the bearer token clients must send; required unless the
//	                    address is loopback
//
// Logs go to stderr (stdout is the protocol on stdio).
package main

import (
	"context"
	"crypto/subtle"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"rental/infra/client"
	"rental/infra/mcpserver"
	"rental/schemas/scopes"
)

func main() {
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], log); err != nil {
		log.Error("mcp server stopped", "err", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, log *slog.Logger) error {
	fs := flag.NewFlagSet("mcp", flag.ContinueOnError)
	httpAddr := fs.String("http", "", "serve streamable HTTP on this address (e.g. 127.0.0.1:8765) instead of stdio")
	if err := fs.Parse(args); err != nil {
		return err
	}
	base := os.Getenv("RENTAL_API_URL")
	if base == "" {
		base = "http://127.0.0.1:8080"
	}
	key, secret := os.Getenv("RENTAL_API_KEY"), os.Getenv("RENTAL_API_SECRET")
	if (key == "") != (secret == "") {
		return errors.New("set both RENTAL_API_KEY and RENTAL_API_SECRET, or neither (public tools only)")
	}
	opts := mcpserver.Options{}
	if key == "" {
		opts.Scopes = []string{} // no key: the public tools only
	} else if v := os.Getenv("RENTAL_API_SCOPES"); v != "" {
		for _, s := range strings.Split(v, ",") {
			s = strings.TrimSpace(s)
			if !scopes.Valid(s) {
				return fmt.Errorf("RENTAL_API_SCOPES: unknown scope %q", s)
			}
			opts.Scopes = append(opts.Scopes, s)
		}
	}
	server, err := mcpserver.New(client.New(base, key, secret, client.WithUserAgent("rental-mcp/"+mcpserver.Version)), opts)
	if err != nil {
		return err
	}
	if *httpAddr == "" {
		log.Info("mcp server on stdio", "api", base, "key", key)
		return server.Run(ctx, &mcp.StdioTransport{})
	}
	return serveHTTP(ctx, server, *httpAddr, os.Getenv("RENTAL_MCP_TOKEN"), log)
}

// serveHTTP serves the streamable HTTP transport at "/" on addr. The server spends the key's
// balance on request, so a listener beyond loopback requires a bearer token.
func serveHTTP(ctx context.Context, server *mcp.Server, addr, token string, log *slog.Logger) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	if tcp, ok := ln.Addr().(*net.TCPAddr); ok && !tcp.IP.IsLoopback() && token == "" {
		ln.Close()
		return fmt.Errorf("-http %s is not a loopback address: set RENTAL_MCP_TOKEN so that only your agent can spend with this key", addr)
	}
	var h http.Handler = mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, nil)
	if token != "" {
		next := h
		want := []byte("Bearer " + token)
		h = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if subtle.ConstantTimeCompare([]byte(r.Header.Get("Authorization")), want) != 1 {
				w.Header().Set("WWW-Authenticate", "Bearer")
				http.Error(w, "missing or wrong bearer token", http.StatusUnauthorized)
				return
			}
			next.ServeHTTP(w, r)
		})
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	log.Info("mcp server on streamable HTTP", "url", "http://"+ln.Addr().String()+"/")
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
