package pool_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/cocoonstack/vk-sandbox/pool"
)

// fuzzToken is the client's bearer token. Seeds echo it back in bodies, the
// way a misbehaving proxy would; it must never reach an error string.
const fuzzToken = "fuzz-node-token-7c1e-secret"

// cannedTransport answers every request with one fixed response, so the
// fuzzer drives the client's whole decoding path (status, Retry-After,
// body) without a socket.
type cannedTransport struct {
	status     int
	retryAfter string
	body       []byte
}

func (c cannedTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Body != nil {
		_ = r.Body.Close()
	}
	h := http.Header{"Content-Type": {"application/json"}}
	if c.retryAfter != "" {
		h.Set("Retry-After", c.retryAfter)
	}
	return &http.Response{
		StatusCode: c.status, Status: http.StatusText(c.status), Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: h, Body: io.NopCloser(bytes.NewReader(c.body)), ContentLength: int64(len(c.body)), Request: r,
	}, nil
}

// FuzzDecodeResponse feeds arbitrary sandboxd answers (status 200..599, a
// Retry-After header, a body) to Claim, List, Get and Release and pins the
// decoding contract of the sandboxd protocol (docs/architecture.md):
//   - nothing panics;
//   - a successful claim has an id and a token and is exactly what
//     encoding/json reads from a JSON object; a 200 with only a redirect is
//     a capacity miss; any other unusable 2xx is ErrBadResponse;
//   - every non-2xx is an *HTTPError with that status: capacity iff 429,
//     retryable iff 5xx, Retry-After within [0, 1h];
//   - a successful List is never nil, a successful Get has an id, Release
//     succeeds on 2xx only (a 404 is ErrNotFound: ambiguous, for the caller
//     to confirm);
//   - no error string carries the client's token, is invalid UTF-8, or is
//     unbounded in size.
//
// Seeds live in testdata/fuzz/FuzzDecodeResponse.
func FuzzDecodeResponse(f *testing.F) {
	f.Fuzz(func(t *testing.T, status uint16, retryAfter string, body []byte) {
		code := 200 + int(status)%400
		c, err := pool.NewClient(pool.ClientOptions{
			BaseURL: "http://sandboxd.invalid", Token: fuzzToken,
			Transport: cannedTransport{status: code, retryAfter: retryAfter, body: body},
			Retry:     pool.RetryPolicy{MaxAttempts: 1},
		})
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		ok2xx := code < 300

		resp, err := c.Claim(ctx, pool.ClaimRequest{Template: "default", ClaimRef: "ns/fuzz"})
		checkErrText(t, "claim", err)
		switch {
		case err == nil:
			if !ok2xx || resp.ID == "" || resp.Token == "" {
				t.Fatalf("claim accepted status %d id=%q token set=%v", code, resp.ID, resp.Token != "")
			}
			var want pool.ClaimResponse
			if !isObject(body) || json.Unmarshal(body, &want) != nil || !sameClaim(resp, want) {
				t.Fatalf("claim decoded %v from %q, encoding/json says %v", resp, body, want)
			}
		case ok2xx:
			checkBad2xx(t, body, resp, err)
		default:
			checkHTTPError(t, "claim", code, err)
		}

		rows, err := c.List(ctx, pool.ListOptions{ClaimRef: "ns/fuzz"})
		checkErrText(t, "list", err)
		switch {
		case err == nil && rows == nil:
			t.Fatal("successful List returned nil")
		case err == nil && !ok2xx:
			t.Fatalf("List accepted status %d", code)
		case err != nil && ok2xx && !errors.Is(err, pool.ErrBadResponse):
			t.Fatalf("List on %d: %v, want ErrBadResponse", code, err)
		case err != nil && !ok2xx:
			checkHTTPError(t, "list", code, err)
		}

		row, err := c.Get(ctx, "sb_fuzz")
		checkErrText(t, "get", err)
		switch {
		case err == nil && (row.ID == "" || !ok2xx):
			t.Fatalf("Get accepted status %d row id %q", code, row.ID)
		case err != nil && ok2xx && !errors.Is(err, pool.ErrBadResponse):
			t.Fatalf("Get on %d: %v, want ErrBadResponse", code, err)
		case err != nil && !ok2xx:
			checkHTTPError(t, "get", code, err)
		}

		err = c.Release(ctx, "sb_fuzz", "sandbox-token-0b7d-secret")
		checkErrText(t, "release", err)
		if ok2xx != (err == nil) || (code == http.StatusNotFound && !errors.Is(err, pool.ErrNotFound)) {
			t.Fatalf("Release on %d: err = %v", code, err)
		}
	})
}

// checkBad2xx: a 2xx claim that is not a success is a capacity miss (only a
// redirect list) or ErrBadResponse; an id without a token is handed back
// so the caller can still find the VM, but never as a success.
func checkBad2xx(t *testing.T, body []byte, resp pool.ClaimResponse, err error) {
	t.Helper()
	capacity, bad := errors.Is(err, pool.ErrCapacity), errors.Is(err, pool.ErrBadResponse)
	if capacity == bad {
		t.Fatalf("2xx claim error %v: capacity=%v bad=%v, want exactly one", err, capacity, bad)
	}
	if pool.IsRetryable(err) {
		t.Fatalf("2xx claim error %v is retryable", err)
	}
	var doc pool.ClaimResponse
	decoded := isObject(body) && json.Unmarshal(body, &doc) == nil
	if capacity && (!decoded || doc.ID != "" || len(doc.Redirect) == 0 || len(pool.Redirects(err)) != len(doc.Redirect)) {
		t.Fatalf("capacity miss %v from %q, which is not an id-less redirect", err, body)
	}
	if resp.ID != "" && (!bad || resp.Token != "" || !decoded || resp.ID != doc.ID) {
		t.Fatalf("claim %v returned with error %v from %q", resp, err, body)
	}
}

func checkHTTPError(t *testing.T, verb string, code int, err error) {
	t.Helper()
	var he *pool.HTTPError
	if !errors.As(err, &he) || he.Status != code {
		t.Fatalf("%s on %d: %v, want an *HTTPError with that status", verb, code, err)
	}
	if errors.Is(err, pool.ErrCapacity) != (code == http.StatusTooManyRequests) {
		t.Fatalf("%s on %d: capacity=%v", verb, code, errors.Is(err, pool.ErrCapacity))
	}
	if pool.IsRetryable(err) != (code >= 500) {
		t.Fatalf("%s on %d: retryable=%v", verb, code, pool.IsRetryable(err))
	}
	if ra := pool.RetryAfter(err); ra < 0 || ra > time.Hour {
		t.Fatalf("%s on %d: Retry-After %v outside [0, 1h]", verb, code, ra)
	}
	for _, p := range pool.Redirects(err) {
		checkText(t, verb+" redirect", p)
	}
}

// maxErrText bounds an error string: messages are cut at 200 runes and
// excerpts at 64, so a few hundred bytes plus framing is the ceiling.
const maxErrText = 2048

func checkErrText(t *testing.T, verb string, err error) {
	t.Helper()
	if err != nil {
		checkText(t, verb+" error", err.Error())
	}
}

func checkText(t *testing.T, what, s string) {
	t.Helper()
	switch {
	case strings.Contains(s, fuzzToken):
		t.Fatalf("%s leaks the client token: %q", what, s)
	case !utf8.ValidString(s):
		t.Fatalf("%s is not valid UTF-8: %q", what, s)
	case len(s) > maxErrText:
		t.Fatalf("%s is %d bytes long", what, len(s))
	}
}

func isObject(b []byte) bool {
	b = bytes.TrimLeft(b, " \t\r\n")
	return len(b) > 0 && b[0] == '{'
}

func sameClaim(a, b pool.ClaimResponse) bool {
	return a.ID == b.ID && a.Token == b.Token && a.OwnerAddr == b.OwnerAddr && a.Deadline.Equal(b.Deadline) &&
		strings.Join(a.Redirect, "\x00") == strings.Join(b.Redirect, "\x00")
}
