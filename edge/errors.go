package edge

import (
	"encoding/json"
	"errors"
	"net"
	"strconv"

	"github.com/valyala/fasthttp"

	"rental/infra/depstate"
	"rental/schemas/apierr"
)

// This file is the ONE place where errors become HTTP responses. Handlers return errors;
// apierr.As classifies them: an *apierr.Error (or a bare *apierr.Code) keeps its code,
// anything else is 9000 internal_error. The HTTP status comes from the catalogue row
// (statusError in routes.go overrides it for an unknown object id in a path).

// envelope is the spec's error body.
type envelope struct {
	Error     envelopeError `json:"error"`
	RequestID string        `json:"request_id"`
}

type envelopeError struct {
	Code      int            `json:"code"`
	Slug      string         `json:"slug"`
	Message   string         `json:"message"`
	Field     *string        `json:"field"` // null when no single field is at fault
	Retryable bool           `json:"retryable"`
	Details   map[string]any `json:"details,omitempty"`
}

// writeError answers err with the catalogue status.
func (s *Server) writeError(rc *fasthttp.RequestCtx, err error) {
	e := apierr.As(err)
	if e.Code == apierr.InternalError && depstate.NothingStored(err) {
		// The store refused before anything was sent (connection refused, pool dial
		// failed): nothing happened, so the client is told to retry, not "outcome unknown".
		e = apierr.DependencyUnavailable.Wrap(err, "a store this request needs is unavailable; nothing was done, retry later").WithRetryAfter(1)
	}
	if e.Code == apierr.DependencyUnavailable {
		// One log line per outage (depstate), not one per refused request.
		s.storeState.Observe(err)
		s.writeErrorStatus(rc, nil, e, e.Code.Status)
		return
	}
	s.writeErrorStatus(rc, err, e, e.Code.Status)
}

// writeErrorStatus answers with an explicit HTTP status (routing answers only).
func (s *Server) writeErrorStatus(rc *fasthttp.RequestCtx, err error, e *apierr.Error, status int) {
	id := RequestID(rc)
	msg := e.Message
	// Internal failures are logged with their cause but answered with the catalogue's
	// generic text: error strings of drivers and libraries are not for clients.
	if e.Code == apierr.InternalError || msg == "" {
		msg = e.Code.Desc
	}
	// Only internal failures are logged: a catalogue 5xx (5001, 5003, 5050, ...) is an
	// expected answer, counted by the request metrics, and logging each one floods the
	// log in exactly the outages an operator reads it in.
	if e.Code == apierr.InternalError && err != nil {
		s.log.Error("edge: request failed", "request_id", id, "code", e.Code.Code,
			"method", string(rc.Method()), "path", string(rc.Path()), "err", err)
	}
	body := envelope{
		Error: envelopeError{
			Code:      e.Code.Code,
			Slug:      e.Code.Slug,
			Message:   msg,
			Retryable: e.Code.Retryable,
			Details:   e.Details,
		},
		RequestID: id,
	}
	if e.Field != "" {
		f := e.Field
		body.Error.Field = &f
	}
	if e.RetryAfter > 0 {
		rc.Response.Header.Set("Retry-After", strconv.Itoa(e.RetryAfter))
	}
	b, mErr := json.Marshal(body)
	if mErr != nil {
		// Only details can fail to marshal; drop them rather than answer nothing.
		s.log.Error("edge: error details do not marshal", "request_id", id, "err", mErr)
		body.Error.Details = nil
		b, _ = json.Marshal(body)
	}
	rc.Response.Header.SetContentType(contentTypeJSON)
	rc.SetStatusCode(status)
	rc.SetBody(b)
	s.metrics.errors.WithLabelValues(routeLabel(rc), methodLabel(rc.Method()), strconv.Itoa(e.Code.Code)).Inc()
}

// notFound answers a path no route matches: 404 2050 route_not_found on "path".
func (s *Server) notFound(rc *fasthttp.RequestCtx) {
	s.writeError(rc, apierr.RouteNotFound.New("no such endpoint: "+string(rc.Method())+" "+string(rc.Path())).
		WithField("path").With("constraint", "unknown_route"))
}

// methodNotAllowed answers a known path with a method it does not take: 405 2051
// method_not_allowed with an Allow header naming the methods of the route that serves the
// path (a static route such as /v1/subscriptions/plans, not the {id} route it shadows).
func (s *Server) methodNotAllowed(rc *fasthttp.RequestCtx) {
	allow := s.allowed(string(rc.Request.URI().PathOriginal()))
	rc.Response.Header.Set("Allow", allow)
	s.writeError(rc, apierr.MethodNotAllowed.New(string(rc.Method())+" is not allowed here; allowed: "+allow).
		WithField("method").With("constraint", "method_not_allowed").With("allowed", allow))
}

// transportError answers requests fasthttp could not read, before any handler ran: a body
// over MaxBodyBytes, oversized headers, broken framing, a read timeout. The middleware did
// not run, so the request id is made here.
func (s *Server) transportError(rc *fasthttp.RequestCtx, err error) {
	id := requestIDFor(rc.Request.Header.Peek(HeaderRequestID))
	rc.SetUserValue(requestIDKey, id)
	rc.Response.Header.Set(HeaderRequestID, id)

	var e *apierr.Error
	var small *fasthttp.ErrSmallBuffer
	var netErr net.Error
	switch {
	case errors.Is(err, fasthttp.ErrBodyTooLarge):
		e = apierr.BodyTooLarge.Newf("request body larger than %d bytes", s.opts.MaxBodyBytes).
			WithField("body").With("constraint", "max_bytes").With("max_bytes", s.opts.MaxBodyBytes)
	case errors.As(err, &small):
		e = apierr.HeadersTooLarge.Newf("request line and headers larger than %d bytes", readBufferSize).
			With("constraint", "header_size")
	case errors.As(err, &netErr) && netErr.Timeout():
		// Nothing was done, so this is not 9001 (outcome unknown); the client was too slow.
		e = apierr.ValidationFailed.New("request not received in time").With("constraint", "read_timeout")
	default:
		e = apierr.ValidationFailed.New("malformed HTTP request").With("constraint", "http_syntax")
	}
	// The connection is closed after this answer, possibly with much of the request still
	// unread: drain it first so the client reads the answer instead of a reset.
	lingerOnClose(rc.Conn())
	s.metrics.requests.WithLabelValues(routeUnmatched, methodLabel(rc.Method()), strconv.Itoa(e.Code.Status)).Inc()
	s.writeError(rc, e)
}
