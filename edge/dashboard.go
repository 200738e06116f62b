package edge

import (
	"github.com/fasthttp/router"
	"github.com/valyala/fasthttp"
)

// Dashboard serves the account owners' web page (package edge/dashboard): "/" and its
// assets, outside /v1. Serve reports false for a path it does not have.
type Dashboard interface {
	Serve(rc *fasthttp.RequestCtx) bool
}

// mountDashboard routes GET and HEAD of "/" and "/assets/{file}" to Options.Dashboard. The
// per-IP budget, request ids and metrics apply as to any request (middleware); no
// credential is read: the page is the same for everyone and calls /v1 itself.
func (s *Server) mountDashboard(r *router.Router) {
	d := s.opts.Dashboard
	if d == nil {
		return
	}
	h := func(rc *fasthttp.RequestCtx) {
		if !d.Serve(rc) {
			s.notFound(rc)
		}
	}
	for _, m := range []string{fasthttp.MethodGet, fasthttp.MethodHead} {
		r.Handle(m, "/", h)
		r.Handle(m, "/assets/{file}", h)
	}
}
