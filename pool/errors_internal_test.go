package pool

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/cenkalti/backoff/v4"
)

func TestParseRetryAfterReadsSecondsAndHTTPDates(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, tc := range []struct {
		in   string
		want time.Duration
	}{
		{"", 0},
		{"3", 3 * time.Second},
		{" 7 ", 7 * time.Second},
		{"0", 0},
		{"-5", 0},
		{"soon", 0},
		{now.Add(90 * time.Second).Format(http.TimeFormat), 90 * time.Second},
		{now.Add(-time.Minute).Format(http.TimeFormat), 0},
		{"999999999999", maxRetryAfter},
	} {
		if got := parseRetryAfter(tc.in, now); got != tc.want {
			t.Errorf("parseRetryAfter(%q) = %v, want %v", tc.in, got, tc.want)
		}
	}
}

func TestScrubRemovesSecretsTokenShapedRunsAndControlBytes(t *testing.T) {
	got := scrub("tok=my-secret-1 other=0123456789abcdef0123456789abcdef\x00\x1b[31m\xff end", 200, "my-secret-1")
	for _, bad := range []string{"my-secret-1", "0123456789abcdef", "\x00", "\x1b", "\xff"} {
		if strings.Contains(got, bad) {
			t.Errorf("scrub left %q in %q", bad, got)
		}
	}
	if !strings.HasSuffix(got, " end") {
		t.Errorf("scrub lost the readable text: %q", got)
	}
	if got := scrub(strings.Repeat("é", 100), 10); got != strings.Repeat("é", 10)+"…" {
		t.Errorf("truncation: %q", got)
	}
}

func TestZeroRetryPolicyTakesTheDefaults(t *testing.T) {
	c, err := NewClient(ClientOptions{BaseURL: "http://127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	if c.retry != defaultRetry {
		t.Errorf("zero RetryPolicy took %+v, want the defaults", c.retry)
	}
}

func TestBackOffWaitsOutRetryAfterWithinItsBounds(t *testing.T) {
	newHint := func(ctx context.Context, maxElapsed time.Duration) *BackOff {
		h := RetryPolicy{MaxAttempts: 10, MaxElapsed: maxElapsed, InitialInterval: time.Millisecond}.NewBackOff(ctx)
		h.Reset()
		return h
	}
	h := newHint(context.Background(), time.Minute)
	h.floor = 3 * time.Second
	if got := h.NextBackOff(); got != 3*time.Second {
		t.Errorf("with Retry-After 3s: next = %v, want 3s", got)
	}
	if got := h.NextBackOff(); got >= time.Second {
		t.Errorf("the hint applies once: next = %v", got)
	}

	h = newHint(context.Background(), 2*time.Second)
	h.floor = 3 * time.Second
	if got := h.NextBackOff(); got != backoff.Stop {
		t.Errorf("Retry-After past MaxElapsed: next = %v, want Stop", got)
	}

	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	h = newHint(ctx, time.Minute)
	h.floor = 3 * time.Second
	if got := h.NextBackOff(); got != backoff.Stop {
		t.Errorf("Retry-After past the deadline: next = %v, want Stop", got)
	}
}
