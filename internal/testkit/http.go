package testkit

import (
	"encoding/xml"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
)

// Get GETs url, with an Accept header unless accept is "", and returns the
// status and the body. A request that gets no answer, or whose body cannot
// be read, fails the test.
func Get(t testing.TB, url, accept string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: %d, body: %v", url, resp.StatusCode, err)
	}
	return resp.StatusCode, b
}

// WellFormedXML decodes every token of an XML document (an SVG, say) and
// returns the first error.
func WellFormedXML(doc string) error {
	d := xml.NewDecoder(strings.NewReader(doc))
	for {
		_, err := d.Token()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
	}
}
