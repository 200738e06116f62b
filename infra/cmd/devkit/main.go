// Command devkit is the integrator's helper for trying the API on the dev stack from a shell
// (docs/integrating.md): a throwaway wallet key, a TIP-191 signature over the signup
// challenge, and a webhook receiver that verifies every delivery.
//
//	devkit key                       print a fresh private key (hex) and its address
//	devkit sign-message              sign stdin's bytes verbatim (TIP-191, TronWeb signMessageV2)
//	                                 with the key in $OWNER_KEY; print the 0x signature
//	devkit receive [-listen ADDR]    serve webhook deliveries on http://ADDR/ (default
//	                                 127.0.0.1:8099), verified with $WEBHOOK_SECRET (and
//	                                 $WEBHOOK_SECRET_OLD during a rotation); print each
//	                                 verified event once, as one JSON line, on stdout
//
// Keys come from the environment, never from arguments, so they stay out of process lists
// and shell history. The keys it makes are for the dev stack: a real account is owned by a
// wallet whose key never leaves it (TronLink, a hardware wallet).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"rental/infra/client"
	"rental/infra/tron"
	"rental/schemas/events"
)

const usage = `usage: devkit key | sign-message | receive [-listen 127.0.0.1:8099]`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "devkit:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return errors.New(usage)
	}
	switch args[0] {
	case "key":
		k, err := tron.GenerateKey()
		if err != nil {
			return err
		}
		_, err = fmt.Fprintln(stdout, k.Hex(), k.Address().String())
		return err
	case "sign-message":
		k, err := tron.ParsePrivateKey(os.Getenv("OWNER_KEY"))
		if err != nil {
			return fmt.Errorf("OWNER_KEY: %w", err)
		}
		msg, err := io.ReadAll(stdin)
		if err != nil {
			return err
		}
		sig, err := k.SignMessageV2(msg)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintln(stdout, sig)
		return err
	case "receive":
		fs := flag.NewFlagSet("receive", flag.ContinueOnError)
		fs.SetOutput(stderr)
		listen := fs.String("listen", "127.0.0.1:8099", "listen address")
		if err := fs.Parse(args[1:]); err != nil {
			return err
		}
		secrets := []string{os.Getenv("WEBHOOK_SECRET")}
		if secrets[0] == "" {
			return errors.New("WEBHOOK_SECRET is empty: register the endpoint first, its answer holds the secret")
		}
		if old := os.Getenv("WEBHOOK_SECRET_OLD"); old != "" {
			secrets = append(secrets, old)
		}
		ln, err := net.Listen("tcp", *listen)
		if err != nil {
			return err
		}
		return receive(ctx, ln, client.NewWebhookVerifier(secrets...), stdout, slog.New(slog.NewTextHandler(stderr, nil)))
	}
	return errors.New(usage)
}

// receive serves deliveries on ln until ctx ends. The verifier answers 401 to a delivery that
// fails verification and 200 to a duplicate; each verified event is written once to out as
// one line of JSON (its envelope), in the order they arrived.
func receive(ctx context.Context, ln net.Listener, v *client.WebhookVerifier, out io.Writer, log *slog.Logger) error {
	enc := json.NewEncoder(out)
	lines := make(chan events.Envelope)
	h := v.Handler(func(ctx context.Context, ev events.Envelope) error {
		select {
		case lines <- ev:
			return nil
		case <-ctx.Done():
			return ctx.Err() // 500: the event id is released and the retry handled
		}
	})
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	log.Info("webhook receiver up", "url", "http://"+ln.Addr().String()+"/")
	for {
		select {
		case ev := <-lines:
			log.Info("verified delivery", "event", ev.Event, "event_id", ev.EventID, "test", ev.Test)
			if err := enc.Encode(ev); err != nil {
				return err
			}
		case err := <-done:
			return err
		case <-ctx.Done():
			sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			return srv.Shutdown(sctx)
		}
	}
}
