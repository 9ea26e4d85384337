package pool_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/cocoonstack/vk-sandbox/pool"
)

// A hostile or broken server echoes our own credentials back in every
// place a server-supplied string can reach an error: the {"error"} message,
// a non-JSON error body, a 2xx body that does not decode, a redirect list,
// and a malformed status line. None of it may surface.
func TestTokensNeverAppearInErrors(t *testing.T) {
	const sandboxToken = "0123456789abcdef0123456789abcdef" // 32 hex, as sandboxd issues
	const shortSandboxToken = "sbx-tok-42-q"                // not token-shaped: verbatim scrub only

	var mode string
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth := r.Header.Get("Authorization")
		tok := strings.TrimPrefix(auth, "Bearer ")
		switch mode {
		case "json-error":
			w.WriteHeader(500)
			_ = json.NewEncoder(w).Encode(map[string]any{"error": "denied for " + auth + " (" + tok + ")"})
		case "text-error":
			w.WriteHeader(502)
			_, _ = fmt.Fprintf(w, "proxy says: %s", tok)
		case "garbage":
			_, _ = fmt.Fprintf(w, `{"id": %s`, tok)
		case "redirect":
			_, _ = fmt.Fprintf(w, `{"redirect":["%s"]}`, tok)
		case "status-line":
			conn, buf, _ := http.NewResponseController(w).Hijack()
			_, _ = fmt.Fprintf(buf, "HTTP/1.1 %s\r\n\r\n", tok)
			_ = buf.Flush()
			_ = conn.Close()
		}
	}))
	t.Cleanup(ts.Close)

	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })

	c, err := pool.NewClient(pool.ClientOptions{BaseURL: ts.URL, Token: nodeToken, Retry: pool.RetryPolicy{MaxAttempts: 2, InitialInterval: time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.CloseIdleConnections)
	secrets := []string{nodeToken, sandboxToken, shortSandboxToken}

	var errs []error
	for _, mode = range []string{"json-error", "text-error", "garbage", "redirect", "status-line"} {
		spanCtx, span := tp.Tracer("test").Start(ctx(t), mode)
		_, err := c.Claim(spanCtx, pool.ClaimRequest{Template: "default"})
		errs = append(errs, err)
		errs = append(errs, c.Release(spanCtx, "sb_1", sandboxToken))
		errs = append(errs, c.Release(spanCtx, "sb_1", shortSandboxToken))
		_, err = c.List(spanCtx, pool.ListOptions{})
		errs = append(errs, err)
		_, err = c.Get(spanCtx, "sb_1")
		errs = append(errs, err)
		_, err = c.Info(spanCtx)
		errs = append(errs, err)
		span.End()
	}
	for _, err := range errs {
		if err == nil {
			continue
		}
		for _, s := range secrets {
			if strings.Contains(err.Error(), s) {
				t.Errorf("error contains a token: %q", err)
			}
		}
	}
	for _, s := range rec.Ended() {
		for _, e := range s.Events() {
			for _, a := range e.Attributes {
				for _, sec := range secrets {
					if strings.Contains(a.Value.String(), sec) {
						t.Errorf("span %s event %s attribute %s contains a token", s.Name(), e.Name, a.Key)
					}
				}
			}
		}
	}
	if errs[0] == nil {
		t.Fatal("the hostile server produced no error")
	}
}

func TestNewClientRejectsATokenWithALineBreakWithoutPrintingIt(t *testing.T) {
	_, err := pool.NewClient(pool.ClientOptions{BaseURL: "http://127.0.0.1:1", Token: nodeToken + "\n"})
	if err == nil || strings.Contains(err.Error(), nodeToken) {
		t.Fatalf("err = %v", err)
	}
}

func TestPrintingAClaimOrRowHidesItsToken(t *testing.T) {
	const tok = "feedfacefeedfacefeedfacefeedface"
	resp := pool.ClaimResponse{ID: "sb_1", Token: tok, OwnerAddr: "10.77.0.1:7777", Deadline: time.Now()}
	row := pool.Sandbox{ID: "sb_1", Token: tok, Key: defaultKey}

	var logged bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&logged, nil))
	log.Info("claimed", "resp", resp, "row", row)
	for _, s := range []string{fmt.Sprint(resp), fmt.Sprintf("%v %+v", row, []pool.Sandbox{row}), logged.String()} {
		if strings.Contains(s, tok) {
			t.Errorf("printed token: %s", s)
		}
		if !strings.Contains(s, "sb_1") {
			t.Errorf("printed form lost the id: %s", s)
		}
	}
}
