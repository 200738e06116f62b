package edge

import (
	"context"
	"log/slog"
	"time"

	"github.com/valyala/fasthttp"
)

// accessLog writes the one access line of a request: its request id, method, route
// template (never the raw path, which may carry ids of other accounts or a query string),
// status, latency, and who called (account id and key id). It never logs a header, a body
// or a query: the signature, the key secret, session tokens and bootstrap tokens travel
// there.
func (s *Server) accessLog(rc *fasthttp.RequestCtx, id, route, method string, took time.Duration) {
	attrs := []slog.Attr{
		slog.String("request_id", id),
		slog.String("method", method),
		slog.String("route", route),
		slog.Int("status", rc.Response.StatusCode()),
		slog.Float64("duration_ms", float64(took.Microseconds())/1000),
	}
	if p := PrincipalFrom(rc); p != nil {
		if p.AccountID != "" {
			attrs = append(attrs, slog.String("account_id", p.AccountID))
		}
		if p.KeyID != "" {
			attrs = append(attrs, slog.String("key_id", p.KeyID))
		}
		attrs = append(attrs, slog.String("via", p.Via.String()))
	}
	s.log.LogAttrs(context.Background(), slog.LevelInfo, "request", attrs...)
}
