package edge

import (
	"fmt"
	"runtime/debug"
	"strconv"
	"time"

	"github.com/fasthttp/router"
	"github.com/valyala/fasthttp"

	"rental/schemas/apierr"
	"rental/schemas/events"
)

// HeaderRequestID carries the request id on every response.
const HeaderRequestID = "X-Request-Id"

const requestIDKey = "edge.request_id"

// RequestID returns the id of the request being served ("" outside the middleware).
func RequestID(rc *fasthttp.RequestCtx) string {
	id, _ := rc.UserValue(requestIDKey).(string)
	return id
}

// middleware wraps the router, outermost first:
//  1. request id: chosen before anything can fail, so every response carries it;
//  2. access metrics: observe the final status, including recovered panics;
//  3. panic recovery: a panicking handler answers 9000 in the envelope;
//  4. the per-IP budget, charged for every request (unknown routes too) before any
//     authentication work, so RateLimit-* headers are on every response;
//  5. framing checks (transport.go): target length, Content-Encoding, bodies on GET.
func (s *Server) middleware(next fasthttp.RequestHandler) fasthttp.RequestHandler {
	return func(rc *fasthttp.RequestCtx) {
		id := requestIDFor(rc.Request.Header.Peek(HeaderRequestID))
		rc.SetUserValue(requestIDKey, id)
		rc.Response.Header.Set(HeaderRequestID, id)
		s.resolveClientIP(rc)

		start := time.Now()
		s.metrics.inFlight.Inc()
		defer func() {
			s.metrics.inFlight.Dec()
			route := routeLabel(rc)
			method := methodLabel(rc.Method())
			s.metrics.requests.WithLabelValues(route, method, strconv.Itoa(rc.Response.StatusCode())).Inc()
			took := time.Since(start)
			s.metrics.duration.WithLabelValues(route, method).Observe(took.Seconds())
			s.accessLog(rc, id, route, method, took)
		}()

		defer func() {
			if p := recover(); p != nil {
				s.log.Error("edge: panic in handler", "request_id", id, "panic", fmt.Sprint(p),
					"method", string(rc.Method()), "path", string(rc.Path()), "stack", string(debug.Stack()))
				rc.Response.Reset()
				rc.Response.Header.Set(HeaderRequestID, id)
				writeRateHeaders(rc)
				s.writeError(rc, apierr.InternalError.New("panic"))
			}
		}()
		ctx, cancel := s.requestContext()
		err := s.chargeIP(ctx, rc)
		cancel()
		if err == nil {
			err = requestChecks(rc)
		}
		if err != nil {
			s.writeError(rc, err)
			return
		}
		next(rc)
	}
}

// requestIDFor echoes a client-chosen id when it is well formed, so a client can correlate
// its own logs with ours; otherwise it makes one. Well formed is the Idempotency-Key
// alphabet and length (8 to 128 of A-Z a-z 0-9 . _ : -), which keeps ids safe to log and to
// put in headers. Ids are not unique across clients: never key state on them.
func requestIDFor(sent []byte) string {
	if validRequestID(sent) {
		return string(sent)
	}
	return events.NewID("req")
}

func validRequestID(b []byte) bool {
	if len(b) < 8 || len(b) > 128 {
		return false
	}
	for _, c := range b {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9',
			c == '.', c == '_', c == ':', c == '-':
		default:
			return false
		}
	}
	return true
}

// Route labels for requests that matched no route template. Raw paths are never labels:
// they would let any client create unbounded metric series.
const (
	routeUnmatched = "unmatched"
)

func routeLabel(rc *fasthttp.RequestCtx) string {
	if p, ok := rc.UserValue(router.MatchedRoutePathParam).(string); ok {
		return p
	}
	return routeUnmatched
}

// methodLabel bounds the method label the same way: any token is a valid HTTP method.
func methodLabel(m []byte) string {
	switch string(m) {
	case "GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS":
		return string(m)
	}
	return "other"
}
