package edge

import (
	"encoding/json"
	"errors"
	"net"
	"strconv"

	"github.com/valyala/fasthttp"

	"rental/schemas/apierr"
)

// This file is the ONE place where errors become HTTP responses. Handlers return errors;
// apierr.As classifies them: an *apierr.Error (or a bare *apierr.Code) keeps its code,
// anything else is 9000 internal_error. The HTTP status comes from the catalogue row,
// except for the two routing answers (404 unknown route, 405 wrong method) documented in
// docs/errors.md.

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
	if status >= 500 {
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
}

// notFound answers a path no route matches: 404 with 2001 validation_failed on "path".
func (s *Server) notFound(rc *fasthttp.RequestCtx) {
	e := apierr.ValidationFailed.New("no such endpoint: "+string(rc.Method())+" "+string(rc.Path())).
		WithField("path").With("constraint", "unknown_route")
	s.writeErrorStatus(rc, e, e, fasthttp.StatusNotFound)
}

// methodNotAllowed answers a known path with a method it does not take: 405 with an Allow
// header and 2001 validation_failed on "method".
func (s *Server) methodNotAllowed(rc *fasthttp.RequestCtx) {
	allow := s.allowed(string(rc.Request.URI().PathOriginal()))
	rc.Response.Header.Set("Allow", allow)
	e := apierr.ValidationFailed.New(string(rc.Method())+" is not allowed here; allowed: "+allow).
		WithField("method").With("constraint", "method_not_allowed").With("allowed", allow)
	s.writeErrorStatus(rc, e, e, fasthttp.StatusMethodNotAllowed)
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
		e = apierr.ValidationFailed.Newf("request body larger than %d bytes", s.opts.MaxBodyBytes).
			WithField("body").With("constraint", "max_bytes").With("max_bytes", s.opts.MaxBodyBytes)
	case errors.As(err, &small):
		e = apierr.ValidationFailed.New("request headers too large").With("constraint", "header_size")
	case errors.As(err, &netErr) && netErr.Timeout():
		// Nothing was done, so this is not 9001 (outcome unknown); the client was too slow.
		e = apierr.ValidationFailed.New("request not received in time").With("constraint", "read_timeout")
	default:
		e = apierr.ValidationFailed.New("malformed HTTP request").With("constraint", "http_syntax")
	}
	s.metrics.requests.WithLabelValues(routeUnmatched, methodLabel(rc.Method()), strconv.Itoa(e.Code.Status)).Inc()
	s.writeError(rc, e)
}
