package client

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"rental/schemas/events"
	"rental/schemas/webhooksig"
)

const hookSecret = "whsec_test_primary"

func delivery(secret, eventID string, sentAt time.Time, body string) http.Header {
	ts := strconv.FormatInt(sentAt.Unix(), 10)
	h := http.Header{}
	h.Set("X-API-TIMESTAMP", ts)
	h.Set("X-API-SIGN", webhooksig.Sign(secret, ts, []byte(body)))
	h.Set("X-Event-Id", eventID)
	h.Set("X-Delivery-Id", "dlv_"+strconv.FormatInt(sentAt.UnixNano(), 36))
	return h
}

func envelope(id string) string {
	return `{"event":"order.confirmed","event_id":"` + id + `","event_version":1,"created_at":"2026-01-02T03:04:05.000Z","account_id":"acc_1","network":"nile","test":false,"data":{"order_id":"ord_1"}}`
}

func TestWebhookVerification(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	v := &WebhookVerifier{Secrets: []string{hookSecret}, Now: func() time.Time { return now }}
	ctx := context.Background()
	body := envelope("evt_1")

	env, err := v.Verify(ctx, delivery(hookSecret, "evt_1", now.Add(-299*time.Second), body), []byte(body))
	if err != nil || env.Event != "order.confirmed" || env.EventID != "evt_1" || env.AccountID != "acc_1" {
		t.Fatalf("valid delivery: %+v, %v", env, err)
	}
	// The same event again (a retry, or the backup endpoint's copy): duplicate.
	if _, err := v.Verify(ctx, delivery(hookSecret, "evt_1", now, body), []byte(body)); !errors.Is(err, ErrDuplicate) {
		t.Fatalf("second delivery of evt_1: %v, want ErrDuplicate", err)
	}

	for _, tc := range []struct {
		name   string
		header http.Header
		body   string
		want   error
	}{
		{"bad signature", delivery("whsec_other", "evt_2", now, envelope("evt_2")), envelope("evt_2"), webhooksig.ErrSignature},
		{"body changed after signing", delivery(hookSecret, "evt_3", now, envelope("evt_3")), strings.Replace(envelope("evt_3"), "ord_1", "ord_2", 1), webhooksig.ErrSignature},
		{"re-encoded body", delivery(hookSecret, "evt_4", now, envelope("evt_4")), strings.Replace(envelope("evt_4"), `","`, `", "`, 1), webhooksig.ErrSignature},
		{"old timestamp", delivery(hookSecret, "evt_5", now.Add(-301*time.Second), envelope("evt_5")), envelope("evt_5"), webhooksig.ErrSkew},
		{"future timestamp", delivery(hookSecret, "evt_6", now.Add(301*time.Second), envelope("evt_6")), envelope("evt_6"), webhooksig.ErrSkew},
		{"no signature", http.Header{"X-Api-Timestamp": {strconv.FormatInt(now.Unix(), 10)}}, envelope("evt_7"), webhooksig.ErrMissing},
		{"millisecond timestamp", func() http.Header {
			h := delivery(hookSecret, "evt_8", now, envelope("evt_8"))
			h.Set("X-API-TIMESTAMP", strconv.FormatInt(now.UnixMilli(), 10))
			return h
		}(), envelope("evt_8"), webhooksig.ErrSkew},
		{"event id header differs from the body", delivery(hookSecret, "evt_other", now, envelope("evt_9")), envelope("evt_9"), ErrEventID},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := v.Verify(ctx, tc.header, []byte(tc.body)); !errors.Is(err, tc.want) {
				t.Fatalf("%v, want %v", err, tc.want)
			}
		})
	}
	// A refused delivery claims nothing: the genuine one with the same id still passes.
	if _, err := v.Verify(ctx, delivery(hookSecret, "evt_2", now, envelope("evt_2")), []byte(envelope("evt_2"))); err != nil {
		t.Fatalf("genuine evt_2 after a forged one: %v", err)
	}
}

// During a rotation both secrets verify, the new one first.
func TestWebhookSecretRotation(t *testing.T) {
	now := time.Now()
	v := NewWebhookVerifier("whsec_new", "whsec_old")
	for i, s := range []string{"whsec_new", "whsec_old"} {
		id := "evt_r" + strconv.Itoa(i)
		if _, err := v.Verify(context.Background(), delivery(s, id, now, envelope(id)), []byte(envelope(id))); err != nil {
			t.Fatalf("signed with %s: %v", s, err)
		}
	}
}

// The handler answers 401 to a forgery, 500 when handling fails (and handles the retry),
// 200 to a duplicate without handling it again.
func TestWebhookHandler(t *testing.T) {
	v := NewWebhookVerifier(hookSecret)
	var handled []string
	fail := true
	srv := httptest.NewServer(v.Handler(func(_ context.Context, env events.Envelope) error {
		handled = append(handled, env.EventID)
		if fail {
			fail = false
			return errors.New("database down")
		}
		return nil
	}))
	defer srv.Close()
	post := func(h http.Header, body string) int {
		req, _ := http.NewRequest("POST", srv.URL, strings.NewReader(body))
		req.Header = h
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	body := envelope("evt_h")
	for i, want := range []int{500, 200, 200} {
		if got := post(delivery(hookSecret, "evt_h", time.Now(), body), body); got != want {
			t.Fatalf("delivery %d: HTTP %d, want %d", i+1, got, want)
		}
	}
	if got := post(delivery("whsec_forged", "evt_f", time.Now(), envelope("evt_f")), envelope("evt_f")); got != 401 {
		t.Fatalf("forged delivery: HTTP %d", got)
	}
	if strings.Join(handled, ",") != "evt_h,evt_h" {
		t.Fatalf("handled %v, want evt_h twice (failed, then the retry) and nothing else", handled)
	}
}

// What a receiver (devkit receive, or an integrator's handler) accepts from the network: any
// headers and body either fail verification or are a delivery signed with the secret whose
// envelope names the header's event id; nothing panics.
func FuzzWebhookVerify(f *testing.F) {
	now := time.Unix(1_767_323_045, 0)
	ts := strconv.FormatInt(now.Unix(), 10)
	body := envelope("evt_1")
	f.Add(ts, webhooksig.Sign(hookSecret, ts, []byte(body)), "evt_1", body)
	f.Add(ts, webhooksig.Sign(hookSecret, ts, []byte(body)), "evt_2", body)
	f.Add(ts, "", "", "")
	f.Add("-1", "AAAA", "evt_1", "{}")
	f.Add(ts, webhooksig.Sign(hookSecret, ts, []byte(`{"event_id":""}`)), "", `{"event_id":""}`)
	f.Add("99999999999999999999", "not base64!", "evt_1", "[")
	f.Fuzz(func(t *testing.T, ts, sign, eventID, body string) {
		v := &WebhookVerifier{Secrets: []string{hookSecret}, Now: func() time.Time { return now }}
		h := http.Header{}
		h.Set("X-API-TIMESTAMP", ts)
		h.Set("X-API-SIGN", sign)
		h.Set("X-Event-Id", eventID)
		env, err := v.Verify(context.Background(), h, []byte(body))
		if err != nil {
			return
		}
		if webhooksig.Verify(hookSecret, ts, []byte(body), sign, now) != nil {
			t.Fatalf("accepted a delivery the signature rule refuses: ts %q sign %q body %q", ts, sign, body)
		}
		if env.EventID == "" || (eventID != "" && env.EventID != eventID) {
			t.Fatalf("accepted event %q under X-Event-Id %q", env.EventID, eventID)
		}
	})
}
