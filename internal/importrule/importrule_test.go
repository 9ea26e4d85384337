package importrule

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const (
	module  = "github.com/cocoonstack/vk-sandbox"
	ruleDoc = "docs/architecture.md"
	begin   = "<!-- import-rule: begin -->"
	end     = "<!-- import-rule: end -->"
)

// testKit is what any package's tests may import besides their package's
// own row (docs/architecture.md states the same list).
var testKit = []string{"internal/testkit", "internal/kubetest", "internal/powercut", "pool/sim", "pool/sim/simtest"}

// rule is one row of the table: what a package may import, and what its
// tests may import in addition.
type rule struct {
	line        int
	mayImport   []string
	testsImport []string
}

// listed is one package as go list reports it, with paths relative to the
// module ("." for the root).
type listed struct {
	ImportPath   string
	Imports      []string
	TestImports  []string
	XTestImports []string
}

func TestImportRule(t *testing.T) {
	root := moduleRoot(t)
	rules := readRules(t, filepath.Join(root, ruleDoc))
	pkgs := listPackages(t, root)
	if len(pkgs) == 0 {
		t.Fatal("go list found no package in the module")
	}
	seen := map[string]bool{}
	for _, p := range pkgs {
		seen[p.ImportPath] = true
		r, ok := rules[p.ImportPath]
		if !ok {
			t.Errorf("package %s is not in the import rule table of %s: add its row (what it may import)", p.ImportPath, ruleDoc)
			continue
		}
		for _, imp := range p.Imports {
			if !slices.Contains(r.mayImport, imp) {
				t.Errorf("%s imports %s, which its row (%s:%d) does not allow: it may import %s",
					p.ImportPath, imp, ruleDoc, r.line, describe(r.mayImport))
			}
		}
		for _, imp := range append(p.TestImports, p.XTestImports...) {
			if imp == p.ImportPath || slices.Contains(r.mayImport, imp) || slices.Contains(testKit, imp) || slices.Contains(r.testsImport, imp) {
				continue
			}
			t.Errorf("the tests of %s import %s, which its row (%s:%d) does not allow: tests may import what the package may, the test kit (%s) and %s",
				p.ImportPath, imp, ruleDoc, r.line, strings.Join(testKit, ", "), describe(r.testsImport))
		}
	}
	for pkg, r := range rules {
		if !seen[pkg] {
			t.Errorf("%s:%d has a row for %s, which is not a package of the module: drop or rename the row", ruleDoc, r.line, pkg)
		}
	}
}

func describe(pkgs []string) string {
	if len(pkgs) == 0 {
		return "nothing of this module"
	}
	return strings.Join(pkgs, ", ")
}

// moduleRoot is the directory of the main module's go.mod.
func moduleRoot(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		t.Fatalf("go env GOMOD: %v", err)
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == os.DevNull {
		t.Fatal("go env GOMOD: not inside the module")
	}
	return filepath.Dir(gomod)
}

// readRules parses the table between the begin and end markers: one row a
// package, each cell a comma-separated list of backticked package paths; a
// parenthesised remark after a path is a reason, not a package.
func readRules(t *testing.T, path string) map[string]rule {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	rules := map[string]rule{}
	in, done := false, false
	sc := bufio.NewScanner(bytes.NewReader(b))
	for n := 1; sc.Scan() && !done; n++ {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == begin:
			in = true
			continue
		case line == end:
			done = true
			continue
		case !in:
			continue
		}
		if !strings.HasPrefix(line, "|") || strings.HasPrefix(line, "|---") || strings.HasPrefix(line, "| package ") {
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		if len(cells) != 3 {
			t.Fatalf("%s:%d: a rule row has 3 cells (package, may import, its tests may also import), not %d: %q", path, n, len(cells), line)
		}
		pkg := paths(cells[0])
		if len(pkg) != 1 {
			t.Fatalf("%s:%d: the first cell names one package in backticks: %q", path, n, cells[0])
		}
		if _, dup := rules[pkg[0]]; dup {
			t.Fatalf("%s:%d: a second row for %s", path, n, pkg[0])
		}
		rules[pkg[0]] = rule{line: n, mayImport: paths(cells[1]), testsImport: paths(cells[2])}
	}
	if !done || len(rules) == 0 {
		t.Fatalf("%s: no import rule table between %q and %q", path, begin, end)
	}
	return rules
}

// paths returns the backticked names of a cell, in order.
func paths(cell string) []string {
	var out []string
	for i, part := range strings.Split(cell, "`") {
		if i%2 == 1 {
			out = append(out, part)
		}
	}
	return out
}

// listPackages lists every package of the module with its imports of the
// module's packages, as paths relative to the module. -e keeps a package
// whose imports do not resolve (an import cycle, say) so that the rule
// still names the import that broke it.
func listPackages(t *testing.T, root string) []listed {
	t.Helper()
	cmd := exec.Command("go", "list", "-e", "-json=ImportPath,Imports,TestImports,XTestImports", "./...")
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.String())
	}
	var pkgs []listed
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p listed
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("go list output: %v", err)
		}
		p.ImportPath = relative(p.ImportPath)
		p.Imports = ownOnly(p.Imports)
		p.TestImports = ownOnly(p.TestImports)
		p.XTestImports = ownOnly(p.XTestImports)
		pkgs = append(pkgs, p)
	}
	return pkgs
}

// ownOnly keeps the module's own packages, relative to the module.
func ownOnly(imports []string) []string {
	var out []string
	for _, imp := range imports {
		if imp == module || strings.HasPrefix(imp, module+"/") {
			out = append(out, relative(imp))
		}
	}
	return out
}

func relative(path string) string {
	if path == module {
		return "."
	}
	return strings.TrimPrefix(path, module+"/")
}
