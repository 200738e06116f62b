package edge

import (
	"crypto/sha256"
	"encoding/hex"
	"sync"

	"github.com/fasthttp/router"
	"github.com/valyala/fasthttp"

	"rental/schemas/openapi"
)

// The OpenAPI document (schemas/openapi) is public: GET /openapi.yaml and /openapi.json,
// outside /v1 and outside the endpoint table, with no credential and only the per-IP
// budget. Both bodies are fixed for the life of the binary, so they carry a strong ETag
// and may be cached for an hour; a matching If-None-Match answers 304.
const openAPICacheControl = "public, max-age=3600"

type openAPIBody struct {
	body        []byte
	etag        string
	contentType string
}

var openAPIBodies = sync.OnceValues(func() (map[string]openAPIBody, error) {
	js, err := openapi.JSON()
	if err != nil {
		return nil, err
	}
	mk := func(b []byte, ct string) openAPIBody {
		sum := sha256.Sum256(b)
		return openAPIBody{body: b, etag: `"` + hex.EncodeToString(sum[:16]) + `"`, contentType: ct}
	}
	return map[string]openAPIBody{
		"/openapi.yaml": mk(openapi.YAML, "application/yaml"),
		"/openapi.json": mk(js, contentTypeJSON),
	}, nil
})

// routeOpenAPI registers the two document routes.
func (s *Server) routeOpenAPI(r *router.Router) {
	for _, path := range []string{"/openapi.yaml", "/openapi.json"} {
		r.GET(path, s.serveOpenAPI(path))
	}
}

func (s *Server) serveOpenAPI(path string) fasthttp.RequestHandler {
	return func(rc *fasthttp.RequestCtx) {
		docs, err := openAPIBodies()
		if err != nil {
			s.writeError(rc, err)
			return
		}
		d := docs[path]
		rc.Response.Header.Set(fasthttp.HeaderCacheControl, openAPICacheControl)
		rc.Response.Header.Set(fasthttp.HeaderETag, d.etag)
		if string(rc.Request.Header.Peek(fasthttp.HeaderIfNoneMatch)) == d.etag {
			rc.SetStatusCode(fasthttp.StatusNotModified)
			return
		}
		rc.Response.Header.SetContentType(d.contentType)
		rc.SetStatusCode(fasthttp.StatusOK)
		rc.Response.SetBodyRaw(d.body) // shared, never modified
	}
}
