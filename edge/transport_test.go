package edge

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// rawExchange sends head and bodyLen bytes of body, then reads the answer. It returns the
// answer and the error of the read after it: io.EOF for an orderly close.
func rawExchange(t *testing.T, ts *testServer, head string, bodyLen int) (*http.Response, []byte, error) {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(ts.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(20 * time.Second))
	if _, err := io.WriteString(conn, head); err != nil {
		t.Fatal(err)
	}
	// Like curl, finish sending before reading: the answer waits in the receive buffer,
	// where a reset from the server would destroy it.
	chunk := bytes.Repeat([]byte("a"), 64<<10)
	for sent := 0; sent < bodyLen; sent += len(chunk) {
		if _, err := conn.Write(chunk); err != nil {
			t.Errorf("connection reset while sending the body, after %d bytes: %v", sent, err)
			break
		}
	}
	_ = conn.(*net.TCPConn).CloseWrite()
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("no answer read: %v", err)
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("answer body: %v", err)
	}
	_, after := br.ReadByte()
	return resp, body, after
}

// A body over the limit is answered 413 in the envelope, and the connection is closed in
// order, so a client still uploading reads the answer instead of a reset.
func TestOversizedBodyAnswered413InOrder(t *testing.T) {
	ts := decodeServer(t)
	for _, c := range []struct {
		name string
		head string
		n    int
	}{
		{"20 MB declared", "POST /v1/quotes HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 20971520\r\n\r\n", 20 << 20},
		{"5 MB chunked", "POST /v1/quotes HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n" +
			fmt.Sprintf("%x\r\n", 5<<20), 5 << 20},
	} {
		t.Run(c.name, func(t *testing.T) {
			resp, body, after := rawExchange(t, ts, c.head, c.n)
			if resp.StatusCode != 413 {
				t.Fatalf("HTTP %d: %s", resp.StatusCode, body)
			}
			var env struct {
				Error struct {
					Code int    `json:"code"`
					Slug string `json:"slug"`
				} `json:"error"`
				RequestID string `json:"request_id"`
			}
			if err := json.Unmarshal(body, &env); err != nil || env.Error.Code != 2052 || env.RequestID == "" {
				t.Fatalf("envelope %s (%v)", body, err)
			}
			if !errors.Is(after, io.EOF) {
				t.Errorf("after the answer: %v, want an orderly close (EOF)", after)
			}
		})
	}
}

func TestStrictTransport(t *testing.T) {
	ts := decodeServer(t)

	t.Run("HEAD on a GET route", func(t *testing.T) {
		get := ts.do(t, "GET", "/v1/status", "", "")
		head, err := http.Head(ts.url + "/v1/status")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(head.Body)
		head.Body.Close()
		if head.StatusCode != 200 || len(b) != 0 || head.Header.Get("X-Request-Id") == "" {
			t.Fatalf("HEAD: HTTP %d body %q", head.StatusCode, b)
		}
		if head.Header.Get("Content-Type") != get.header.Get("Content-Type") {
			t.Errorf("HEAD Content-Type %q, GET %q", head.Header.Get("Content-Type"), get.header.Get("Content-Type"))
		}
	})
	t.Run("gzip body refused", func(t *testing.T) {
		var buf bytes.Buffer
		zw := gzip.NewWriter(&buf)
		_, _ = zw.Write([]byte(`{"resource":"energy"}`))
		_ = zw.Close()
		r := ts.do(t, "POST", "/v1/quotes", "application/json", buf.String(), "Content-Encoding", "gzip")
		wantError(t, r, 415, 2053, "unsupported_content_encoding", nil)
		r = ts.do(t, "POST", "/v1/quotes", "application/json", `{"resource":"energy"}`, "Content-Encoding", "gzip")
		wantError(t, r, 415, 2053, "unsupported_content_encoding", nil)
		if r := ts.do(t, "POST", "/v1/quotes", "application/json", `{"resource":"energy"}`, "Content-Encoding", "identity"); r.status != 201 {
			t.Errorf("identity: HTTP %d %s", r.status, r.body)
		}
	})
	t.Run("GET with a body", func(t *testing.T) {
		r := ts.do(t, "GET", "/v1/status", "application/json", `{"x":1}`)
		wantError(t, r, 400, 2001, "validation_failed", "body")
	})
	t.Run("long target 414", func(t *testing.T) {
		r := ts.do(t, "GET", "/v1/"+strings.Repeat("a", 9000), "", "")
		wantError(t, r, 414, 2054, "uri_too_long", "path")
	})
	t.Run("huge headers 431", func(t *testing.T) {
		r := ts.do(t, "GET", "/v1/status", "", "", "X-Big", strings.Repeat("b", 20000))
		wantError(t, r, 431, 2055, "headers_too_large", nil)
	})
}

// A connection on which no byte arrives within ReadTimeout is closed without an answer (an
// unsolicited 400 would be read by the client as the answer to its next request), while a
// request that stalls after part of its headers is still answered 400 2001 read_timeout.
func TestReadTimeoutAnswersOnlyRequestsThatStarted(t *testing.T) {
	ts := startServer(t, withOptions(func(o *Options) { o.ReadTimeout = 300 * time.Millisecond }))
	addr := strings.TrimPrefix(ts.url, "http://")

	idle, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer idle.Close()
	_ = idle.SetReadDeadline(time.Now().Add(10 * time.Second))
	got, err := io.ReadAll(idle)
	if err != nil || len(got) != 0 {
		t.Fatalf("idle connection: read %q, err %v; want a close without an answer", got, err)
	}

	started, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer started.Close()
	_ = started.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(started, "GET /v1/status HTTP/1.1\r\nHost: x\r\n"); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(started), nil)
	if err != nil {
		t.Fatalf("stalled request: no answer: %v", err)
	}
	defer resp.Body.Close()
	var env struct {
		Error struct {
			Code    int            `json:"code"`
			Details map[string]any `json:"details"`
		} `json:"error"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&env); err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 400 || env.Error.Code != 2001 || env.Error.Details["constraint"] != "read_timeout" {
		t.Fatalf("stalled request: HTTP %d %+v, want 400 2001 read_timeout", resp.StatusCode, env.Error)
	}
}
