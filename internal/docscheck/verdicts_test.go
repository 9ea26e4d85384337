package docscheck

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// verdictReasons are the delete verdict reasons the code gives: the
// Reason* and reason* constants of kube/authorize.go and pipeline/types.go
// (exported or not, as other packages use them) whose value
// is a lower-case word list ("owner-gone"), as opposed to an Event reason
// ("SandboxCapacityMiss").
func verdictReasons(t *testing.T) []string {
	t.Helper()
	word := regexp.MustCompile(`^[a-z0-9]+(-[a-z0-9]+)*$`)
	var out []string
	for _, file := range []string{"kube/authorize.go", "pipeline/types.go"} {
		f, err := parser.ParseFile(token.NewFileSet(), root+"/"+file, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			vs, ok := n.(*ast.ValueSpec)
			if !ok {
				return true
			}
			for i, name := range vs.Names {
				if !strings.HasPrefix(strings.ToLower(name.Name), "reason") || i >= len(vs.Values) {
					continue
				}
				if lit, ok := vs.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
					if v, err := strconv.Unquote(lit.Value); err == nil && word.MatchString(v) {
						out = append(out, v)
					}
				}
			}
			return true
		})
	}
	sort.Strings(out)
	return out
}

// The delete authorization table of docs/pod-contract.md has a row for
// every verdict reason the code gives, and names no reason it does not.
func TestDeleteAuthorizationTableListsEveryVerdict(t *testing.T) {
	want := verdictReasons(t)
	if len(want) < 9 {
		t.Fatalf("read only %v from kube/authorize.go and pipeline/types.go", want)
	}
	b, err := os.ReadFile(root + "/docs/pod-contract.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(b), "\n## Delete authorization")
	if !ok {
		t.Fatal(`docs/pod-contract.md has no "## Delete authorization" section`)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	row := regexp.MustCompile(`(?m)^\|[^\n]*\| (?:release|preserve) \| ([^|\n]*) \|$`)
	documented := map[string]bool{}
	for _, m := range row.FindAllStringSubmatch(section, -1) {
		for _, r := range regexp.MustCompile("`([a-z0-9-]+)`").FindAllStringSubmatch(m[1], -1) {
			documented[r[1]] = true
		}
	}
	for _, r := range want {
		if !documented[r] {
			t.Errorf("docs/pod-contract.md, Delete authorization: no row gives the verdict reason %q", r)
		}
		delete(documented, r)
	}
	for r := range documented {
		t.Errorf("docs/pod-contract.md, Delete authorization: a row gives %q, which the code does not", r)
	}
}
