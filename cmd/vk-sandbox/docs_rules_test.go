package main

import (
	"flag"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The rules the flag table states about 0 and negative values, in the
// words the docs use. Each is checked against the binary's own parsing
// and settling, so a stated rule the code does not keep fails.
var (
	ruleMeans    = regexp.MustCompile(`(?i)a value of 0 or less means ([^ .,;]+)`)
	ruleDisables = regexp.MustCompile(`(?i)\b0 disables\b`)
	ruleNegative = regexp.MustCompile(`(?i)a negative value is refused|must not be negative`)
	rulePositive = regexp.MustCompile(`(?i)must be (greater than 0|positive)|0 or less is refused`)
)

// settledValue parses args as the daemon does (without the environment)
// and returns the named flag's value after settle, which applies the
// defaults that stand for 0 or less.
func settledValue(name, v string) (string, error) {
	c := &config{}
	fs := newFlagSet()
	defineFlags(fs, c)
	if err := fs.Parse([]string{"--" + name + "=" + v}); err != nil {
		return "", err
	}
	if err := c.settle(); err != nil {
		return "", err
	}
	return fs.Lookup(name).Value.String(), nil
}

// zeroAndNegative are 0 and a negative value in the flag's own syntax, or
// nil for a flag that is not a number.
func zeroAndNegative(f *flag.Flag) []string {
	if _, err := time.ParseDuration(f.DefValue); err == nil && strings.ContainsAny(f.DefValue, "smh") {
		return []string{"0s", "-1s"}
	}
	if _, err := strconv.ParseFloat(f.DefValue, 64); err == nil {
		return []string{"0", "-1"}
	}
	return nil
}

func sameValue(a, b string) bool {
	if da, err := time.ParseDuration(a); err == nil {
		db, err := time.ParseDuration(b)
		return err == nil && da == db
	}
	return a == b
}

// What docs/configuration.md says a flag does with 0 and with a negative
// value is what the binary does: "a value of 0 or less means X" settles
// both to X, "must be positive" (or "greater than 0", "0 or less is
// refused") refuses both, "0 disables" keeps 0, and "a negative value is
// refused" refuses it. A numeric flag that the binary refuses 0 or a
// negative value of must have its rule stated.
func TestDocsStateTheRulesTheFlagsKeep(t *testing.T) {
	docs := docRows(t)
	fs := newFlagSet()
	defineFlags(fs, &config{})
	checked := 0
	fs.VisitAll(func(f *flag.Flag) {
		vals := zeroAndNegative(f)
		row, ok := docs[f.Name]
		desc := row.desc
		if vals == nil || !ok {
			return
		}
		var got [2]string
		var errs [2]error
		for i, v := range vals {
			got[i], errs[i] = settledValue(f.Name, v)
		}
		stated := false
		if m := ruleMeans.FindStringSubmatch(desc); m != nil {
			stated = true
			want := strings.Trim(m[1], "`")
			for i, v := range vals {
				if errs[i] != nil || !sameValue(got[i], want) {
					t.Errorf("--%s=%s: docs say it means %s; the binary gives %q, %v", f.Name, v, want, got[i], errs[i])
				}
			}
		}
		if rulePositive.MatchString(desc) {
			stated = true
			for i, v := range vals {
				if errs[i] == nil {
					t.Errorf("--%s=%s: docs say it is refused; the binary takes it as %q", f.Name, v, got[i])
				}
			}
		}
		if ruleDisables.MatchString(desc) {
			stated = true
			if errs[0] != nil || !sameValue(got[0], vals[0]) {
				t.Errorf("--%s=%s: docs say 0 disables; the binary gives %q, %v", f.Name, vals[0], got[0], errs[0])
			}
		}
		if ruleNegative.MatchString(desc) {
			stated = true
			if errs[1] == nil {
				t.Errorf("--%s=%s: docs say a negative value is refused; the binary takes it as %q", f.Name, vals[1], got[1])
			}
		}
		if stated {
			checked++
		} else if errs[0] != nil || errs[1] != nil {
			t.Errorf("--%s: the binary refuses 0 (%v) or a negative value (%v), and docs/configuration.md states no rule", f.Name, errs[0], errs[1])
		}
	})
	if checked < 8 {
		t.Errorf("only %d flags have a rule the test could read: has the wording of docs/configuration.md changed?", checked)
	}
}

// poolVerbs are the values of the verb constants of pool/client.go (Verb*,
// or verb* for those no other package names), read from the source so a
// new verb needs no change here.
func poolVerbs(t *testing.T) []string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), "../../pool/client.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var verbs []string
	ast.Inspect(f, func(n ast.Node) bool {
		vs, ok := n.(*ast.ValueSpec)
		if !ok {
			return true
		}
		for i, name := range vs.Names {
			if (strings.HasPrefix(name.Name, "Verb") || strings.HasPrefix(name.Name, "verb")) && i < len(vs.Values) {
				if lit, ok := vs.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
					v, _ := strconv.Unquote(lit.Value)
					verbs = append(verbs, v)
				}
			}
		}
		return true
	})
	sort.Strings(verbs)
	return verbs
}

// docs/observability.md lists every verb of
// vksandbox_sandboxd_requests_total: the pool's Verb constants.
func TestObservabilityDocsListEverySandboxdVerb(t *testing.T) {
	b, err := os.ReadFile("../../docs/observability.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?m)^\\| `vksandbox_sandboxd_requests_total` \\| [^|]* \\| `verb` = ([^;|]*)").FindSubmatch(b)
	if m == nil {
		t.Fatal("docs/observability.md has no row for vksandbox_sandboxd_requests_total listing its verbs (`verb` = `a`, `b`; ...)")
	}
	var documented []string
	for _, v := range regexp.MustCompile("`([a-z]+)`").FindAllSubmatch(m[1], -1) {
		documented = append(documented, string(v[1]))
	}
	sort.Strings(documented)
	want := poolVerbs(t)
	if len(want) < 5 {
		t.Fatalf("read only %v from pool/client.go", want)
	}
	if strings.Join(documented, ",") != strings.Join(want, ",") {
		t.Errorf("docs/observability.md lists verbs %v; pool/client.go defines %v", documented, want)
	}
}
