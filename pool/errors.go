package pool

import (
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// Sentinel errors. Match them with errors.Is; the concrete types below carry
// the detail.
var (
	// ErrCapacity is a capacity miss: a 429, or a claim 200 that carries only
	// a redirect list. It is never retried inside a call: the caller decides
	// how slowly to come back (the Pod contract (docs/pod-contract.md), "does not hammer the node").
	ErrCapacity = errors.New("sandboxd: no capacity")
	// ErrBadResponse is a 2xx whose body does not decode, exceeds the body
	// limit, or lacks what the protocol promises (a claim with neither id nor
	// redirect, or an id without a token).
	ErrBadResponse = errors.New("sandboxd: bad response")
	// ErrNotFound matches a 404. For Get it means the id is unknown. For
	// Release and Renew it is ambiguous: sandboxd answers 404 both for an
	// unknown id and for a wrong sandbox token, so a caller must confirm
	// with a root Get before it treats a release as converged.
	ErrNotFound = errors.New("sandboxd: not found")
	// ErrForbidden matches a 403: the token is known but may not use this
	// surface (a tenant token on a root-only call). Never retried.
	ErrForbidden = errors.New("sandboxd: forbidden")
)

// HTTPError is any non-2xx answer. Message comes from the {"error": "..."}
// body (or a short excerpt of a non-JSON body), already scrubbed of tokens.
type HTTPError struct {
	Verb       string
	ID         string // sandbox id for release and get; empty otherwise
	Status     int
	Message    string
	RetryAfter time.Duration // parsed Retry-After, 0 if absent
	Redirect   []string      // peers offered with a 429, if any
}

func (e *HTTPError) Error() string {
	msg := e.Message
	if msg == "" {
		msg = http.StatusText(e.Status)
	}
	return fmt.Sprintf("sandboxd %s: %d: %s", subject(e.Verb, e.ID), e.Status, msg)
}

// Is makes errors.Is(err, ErrCapacity) true for a 429,
// errors.Is(err, ErrNotFound) true for a 404 and errors.Is(err,
// ErrForbidden) true for a 403.
func (e *HTTPError) Is(target error) bool {
	switch target {
	case ErrCapacity:
		return e.Status == http.StatusTooManyRequests
	case ErrNotFound:
		return e.Status == http.StatusNotFound
	case ErrForbidden:
		return e.Status == http.StatusForbidden
	}
	return false
}

// capacityError is a claim answered 200 with only a redirect list: the node
// is full and names peers that may have room.
type capacityError struct {
	Verb     string
	Redirect []string
}

func (e *capacityError) Error() string {
	return fmt.Sprintf("sandboxd %s: capacity miss, redirect to %s", e.Verb, strings.Join(e.Redirect, ","))
}

// Is makes errors.Is(err, ErrCapacity) true.
func (e *capacityError) Is(target error) bool { return target == ErrCapacity }

// badResponseError is a 2xx the client cannot use. It keeps only a short,
// scrubbed excerpt of the body: enough to recognise an HTML error page or a
// truncated document, never enough to smuggle a credential into a log.
type badResponseError struct {
	verb, id string
	status   int
	reason   string
	excerpt  string
}

func (e *badResponseError) Error() string {
	s := fmt.Sprintf("sandboxd %s: bad response (%d): %s", subject(e.verb, e.id), e.status, e.reason)
	if e.excerpt != "" {
		s += fmt.Sprintf(" (body %q)", e.excerpt)
	}
	return s
}

func (e *badResponseError) Is(target error) bool { return target == ErrBadResponse }

// transportError is a failure to complete the HTTP exchange: dial, write,
// read, or a reset mid-body. callerDone records whether the caller's own
// context had ended by then, because net reports a dial timeout as
// context.DeadlineExceeded too and only the caller's end is final.
type transportError struct {
	verb, id   string
	msg        string // scrubbed err.Error()
	err        error
	callerDone bool
}

func (e *transportError) Error() string { return "sandboxd " + subject(e.verb, e.id) + ": " + e.msg }
func (e *transportError) Unwrap() error { return e.err }

// IsRetryable reports whether repeating the same request may succeed:
// transport errors (unless the caller's context ended) and 5xx, among them
// a 503 with Retry-After from a node whose tenant database is down. A 4xx,
// a capacity miss and a bad 2xx body are never retryable.
func IsRetryable(err error) bool {
	if err == nil || errors.Is(err, ErrCapacity) {
		return false
	}
	var he *HTTPError
	if errors.As(err, &he) {
		return he.Status >= 500
	}
	var te *transportError
	if errors.As(err, &te) {
		return !te.callerDone
	}
	return false
}

// retryAfter is the server's Retry-After hint carried by err, or 0.
func retryAfter(err error) time.Duration {
	var he *HTTPError
	if errors.As(err, &he) {
		return he.RetryAfter
	}
	return 0
}

// StatusCode is the HTTP status of the sandboxd answer err carries, or 0
// when there was none (a transport error, a local check).
func StatusCode(err error) int {
	var he *HTTPError
	if errors.As(err, &he) {
		return he.Status
	}
	return 0
}

// redirects is the peer list of a capacity miss, or nil.
func redirects(err error) []string {
	var ce *capacityError
	if errors.As(err, &ce) {
		return ce.Redirect
	}
	var he *HTTPError
	if errors.As(err, &he) {
		return he.Redirect
	}
	return nil
}

func subject(verb, id string) string {
	if id == "" {
		return verb
	}
	return verb + " " + id
}

// maxRetryAfter caps a server hint so a hostile or buggy header cannot park
// a caller for days; MaxElapsed and the context bound it further.
const maxRetryAfter = time.Hour

// parseRetryAfter reads delay-seconds or an HTTP-date (RFC 9110 §10.2.3).
func parseRetryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if secs, err := strconv.ParseInt(v, 10, 64); err == nil {
		if secs <= 0 {
			return 0
		}
		if secs > int64(maxRetryAfter/time.Second) {
			return maxRetryAfter
		}
		return time.Duration(secs) * time.Second
	}
	t, err := http.ParseTime(v)
	if err != nil {
		return 0
	}
	return min(max(t.Sub(now), 0), maxRetryAfter)
}

// Server-supplied text is untrusted: it may be an HTML page, binary, or a
// proxy echoing our own request headers back. Everything that reaches an
// error string passes through scrub.
const (
	maxMessage = 200 // runes kept from a {"error": ...} message
	maxExcerpt = 64  // runes kept from a body that did not decode
)

// opaqueRun matches long runs of token alphabet. Ids and messages are made of
// short words; a 32+ character opaque run is far more likely to be somebody's
// credential (sandbox tokens are 32 hex) than something a human needs to read.
var opaqueRun = regexp.MustCompile(`[A-Za-z0-9_+/=]{32,}`)

const redacted = "[redacted]"

// minSecretLen is the shortest secret scrubbed verbatim; replacing every
// occurrence of a 1-3 byte "token" would shred the message and protect nothing.
const minSecretLen = 4

// scrub makes s safe for an error string: valid UTF-8, printable, no known
// secret, no token-shaped run, at most limit runes.
func scrub(s string, limit int, secrets ...string) string {
	for _, sec := range secrets {
		if len(sec) >= minSecretLen {
			s = strings.ReplaceAll(s, sec, redacted)
		}
	}
	s = opaqueRun.ReplaceAllString(s, redacted)
	s = strings.Map(func(r rune) rune {
		if r == utf8.RuneError || !unicode.IsPrint(r) {
			return '?'
		}
		return r
	}, strings.ToValidUTF8(s, "?"))
	if utf8.RuneCountInString(s) > limit {
		s = string([]rune(s)[:limit]) + "…"
	}
	return s
}
