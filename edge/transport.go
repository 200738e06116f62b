package edge

import (
	"bytes"
	"io"
	"net"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"

	"rental/schemas/apierr"
)

// Framing limits of the transport (docs/errors.md, "HTTP transport answers").
const (
	// readBufferSize bounds the request line plus headers. It is larger than maxURIBytes so
	// an over-long target still reaches requestChecks and is answered 414, not 431.
	readBufferSize = 16 << 10
	// maxURIBytes bounds the request target (path and query). No route of the API comes
	// near it; a longer target is refused with 414 2054.
	maxURIBytes = 8 << 10

	// lingerTimeout and lingerMaxBytes bound how long and how much of an unread request is
	// drained before a connection closed by an error answer is closed for good.
	lingerTimeout  = 3 * time.Second
	lingerMaxBytes = 64 << 20
)

// requestChecks refuses requests whose framing the API does not accept, before routing:
// a target over maxURIBytes (414 2054), a Content-Encoding other than identity (415 2053:
// the edge decodes no compressed bodies, and reading gzip bytes as JSON would be wrong),
// and a GET or HEAD carrying a body (400 2001 on "body": such a body has no meaning, and
// a proxy and the server disagreeing about where the request ends is request smuggling).
func requestChecks(rc *fasthttp.RequestCtx) error {
	if n := len(rc.Request.Header.RequestURI()); n > maxURIBytes {
		return apierr.URITooLong.Newf("request target is %d bytes; at most %d are accepted", n, maxURIBytes).
			WithField("path").With("constraint", "max_bytes").With("max_bytes", maxURIBytes)
	}
	if enc := bytes.TrimSpace(rc.Request.Header.ContentEncoding()); len(enc) > 0 && !strings.EqualFold(string(enc), "identity") {
		return apierr.UnsupportedEncoding.New("Content-Encoding "+string(enc)+" is not accepted; send the body uncompressed").
			With("constraint", "content_encoding").With("accepted", "identity")
	}
	if rc.IsGet() || rc.IsHead() {
		if rc.Request.Header.ContentLength() > 0 || rc.Request.Header.ContentLength() == -1 || len(rc.Request.Body()) > 0 {
			return apierr.ValidationFailed.New(string(rc.Method())+" takes no request body").
				WithField("body").With("constraint", "not_allowed")
		}
	}
	return nil
}

// lingerListener hands out connections that can be closed in order (lingerConn).
type lingerListener struct{ net.Listener }

func (l lingerListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &lingerConn{Conn: c}, nil
}

// lingerConn is a connection that, once marked, closes like Apache's lingering close:
// it sends its FIN, then reads and discards what the client is still sending (bounded by
// lingerTimeout and lingerMaxBytes) before closing. Closing a socket with unread data
// makes the kernel answer with a reset, and a reset destroys the answer (413, 431, ...)
// still in the client's receive buffer, so most clients would never read it.
type lingerConn struct {
	net.Conn
	linger atomic.Bool
	closed atomic.Bool
}

// lingerOnClose marks c (when it is a lingerConn) for a lingering close.
func lingerOnClose(c net.Conn) {
	if lc, ok := c.(*lingerConn); ok {
		lc.linger.Store(true)
	}
}

func (c *lingerConn) Close() error {
	if !c.linger.Load() || c.closed.Swap(true) {
		return c.Conn.Close()
	}
	hc, ok := c.Conn.(interface{ CloseWrite() error })
	if !ok {
		return c.Conn.Close()
	}
	if err := hc.CloseWrite(); err != nil {
		return c.Conn.Close()
	}
	// Drain off the server's goroutine: fasthttp's worker is free once Close returns.
	go func() {
		_ = c.Conn.SetReadDeadline(time.Now().Add(lingerTimeout))
		_, _ = io.CopyN(io.Discard, c.Conn, lingerMaxBytes)
		_ = c.Conn.Close()
	}()
	return nil
}

// allowed lists the methods that path takes, for the Allow header of a 405. Only the
// templates the router would pick for path count: a static segment shadows a parameter,
// so /v1/subscriptions/plans takes GET (and HEAD) only, although DELETE and PATCH of
// /v1/subscriptions/{subscriptionId} also match its shape.
func (s *Server) allowed(path string) string {
	segs := strings.Split(path, "/")
	best := ""
	var methods []string
	for _, e := range Endpoints {
		rank, ok := templateRank(e.Path, segs)
		if !ok {
			continue
		}
		switch {
		case rank > best:
			best, methods = rank, []string{e.Method}
		case rank == best:
			methods = append(methods, e.Method)
		}
	}
	if slices.Contains(methods, "GET") {
		methods = append(methods, "HEAD")
	}
	slices.Sort(methods)
	return strings.Join(slices.Compact(methods), ", ")
}

// templateRank matches a route template against path segments and ranks the match: one
// letter per segment, "s" for static and "p" for a parameter, so that comparing ranks as
// strings prefers a static segment at the first place two templates differ, as the
// router does.
func templateRank(tmpl string, segs []string) (string, bool) {
	ts := strings.Split(tmpl, "/")
	if len(ts) != len(segs) {
		return "", false
	}
	var b strings.Builder
	for i, t := range ts {
		switch {
		case strings.HasPrefix(t, "{") && strings.HasSuffix(t, "}"):
			if segs[i] == "" {
				return "", false
			}
			b.WriteByte('p')
		case t == segs[i]:
			b.WriteByte('s')
		default:
			return "", false
		}
	}
	return b.String(), true
}
