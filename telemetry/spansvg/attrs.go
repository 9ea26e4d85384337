package spansvg

import (
	"strings"

	"go.opentelemetry.io/otel/attribute"
)

// DefaultAttributes is the allow-list used when Options.Attributes is nil:
// where the claim belongs, the product's own vksandbox.* attributes, and
// what the sandboxd HTTP call did.
var DefaultAttributes = []string{
	"k8s.namespace.name", "k8s.pod.name", "vksandbox.",
	"http.request.method", "url.full", "http.response.status_code",
}

// secretWords mark a key that may carry a credential. Such a key is never
// drawn, even when allow-listed.
var secretWords = []string{"token", "authorization", "password", "secret", "cookie"}

// maxValue bounds one attribute value on the picture.
const maxValue = 48

// allowed reports whether key matches the allow-list: an entry ending in
// "." is a prefix, any other entry an exact key.
func allowed(key string, allow []string) bool {
	lower := strings.ToLower(key)
	for _, w := range secretWords {
		if strings.Contains(lower, w) {
			return false
		}
	}
	for _, a := range allow {
		if key == a || (strings.HasSuffix(a, ".") && strings.HasPrefix(key, a)) {
			return true
		}
	}
	return false
}

// shownAttributes renders the allowed attributes as "key=value", in the
// span's order. URL values lose their query and fragment, the usual places
// for a credential in a URL.
func shownAttributes(kvs []attribute.KeyValue, allow []string) []string {
	var out []string
	for _, kv := range kvs {
		k := string(kv.Key)
		if !allowed(k, allow) {
			continue
		}
		v := kv.Value.String()
		if strings.HasPrefix(k, "url.") {
			v, _, _ = strings.Cut(v, "?")
			v, _, _ = strings.Cut(v, "#")
		}
		out = append(out, k+"="+truncate(v, maxValue))
	}
	return out
}

// truncate shortens s to at most n runes, marking the cut with "…".
func truncate(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

// wrap packs words into lines of at most width runes (a longer word gets
// a line of its own, truncated).
func wrap(words []string, width int) []string {
	var lines []string
	cur := ""
	for _, w := range words {
		w = truncate(w, width)
		switch {
		case cur == "":
			cur = w
		case len([]rune(cur))+2+len([]rune(w)) <= width:
			cur += "  " + w
		default:
			lines = append(lines, cur)
			cur = w
		}
	}
	if cur != "" {
		lines = append(lines, cur)
	}
	return lines
}
