package docscheck

import (
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"
)

var (
	codeSpanRE = regexp.MustCompile("`([^`]+)`")
	// dottedRE: two or three identifiers joined by dots, with an optional
	// "()" (the shapes of doc.go's rule; anything else is not Go).
	dottedRE = regexp.MustCompile(`^([A-Za-z_][A-Za-z0-9_]*)\.([A-Za-z_][A-Za-z0-9_]*)(?:\.([A-Za-z_][A-Za-z0-9_]*))?(?:\(\))?$`)
	// testRE: a test, benchmark, fuzz target or example, optionally with
	// a subtest path.
	testRE    = regexp.MustCompile(`^((?:Test|Benchmark|Fuzz|Example)(?:[A-Z0-9_][A-Za-z0-9_]*)?)(?:/\S*)?$`)
	docPathRE = regexp.MustCompile(`\b(docs/[A-Za-z0-9_-]+\.md)\b`)
)

// CheckIdents reports every code span of the pages that has the shape of
// a Go identifier of this module (doc.go states the rule) and that the
// module does not declare, and how many spans it checked.
func CheckIdents(root string, pages []string, ix *Index) ([]Finding, int, error) {
	return overPages(root, pages, ix.idents)
}

// idents checks one page's code spans, and says how many it took for Go
// identifiers of the module.
func (ix *Index) idents(p *page) (out []Finding, checked int) {
	for i, line := range p.lines {
		for _, m := range codeSpanRE.FindAllStringSubmatch(line, -1) {
			ok, what := ix.Resolve(m[1])
			if ok {
				checked++
			}
			if what != "" {
				out = append(out, Finding{p.rel, i + 1, what})
			}
		}
	}
	return out, checked
}

// overPages runs check on each page and adds up what it finds and counts.
func overPages(root string, pages []string, check func(*page) ([]Finding, int)) (out []Finding, checked int, err error) {
	c := newChecker(root)
	for _, rel := range pages {
		p, err := c.page(rel)
		if err != nil {
			return nil, 0, err
		}
		f, n := check(p)
		out, checked = append(out, f...), checked+n
	}
	return out, checked, nil
}

// Resolve checks one code span. checked says whether doc.go's rule takes
// it for a Go identifier of this module; what is "" when it resolves (or
// is not checked) and otherwise says what is missing.
func (ix *Index) Resolve(span string) (checked bool, what string) {
	if m := testRE.FindStringSubmatch(span); m != nil {
		if !ix.tests[m[1]] {
			return true, "`" + span + "`: no test function " + m[1] + " in the module"
		}
		return true, ""
	}
	m := dottedRE.FindStringSubmatch(span)
	if m == nil {
		return false, ""
	}
	first, second, third := m[1], m[2], m[3]
	if decls, isPkg := ix.decls[first]; isPkg && first != "main" && exported(second) {
		switch {
		case !decls[second]:
			return true, "`" + span + "`: package " + first + " declares no " + second
		case third != "" && !ix.hasMember(first, second, third):
			return true, "`" + span + "`: " + first + "." + second + " has no field or method " + third
		}
		return true, ""
	}
	if third != "" || ix.literals[strings.TrimSuffix(span, "()")] || ix.imports[first] || !ix.isType(first) {
		return false, ""
	}
	if !ix.hasMember("", first, second) {
		return true, "`" + span + "`: no type " + first + " of the module has a field or method " + second
	}
	return true, ""
}

func exported(name string) bool { return name != "" && 'A' <= name[0] && name[0] <= 'Z' }

// CheckCommentPaths reports every docs/ page a Go comment of the module
// cites that does not exist.
func CheckCommentPaths(root string, ix *Index) []Finding {
	var out []Finding
	for _, c := range ix.comments {
		if _, err := os.Stat(filepath.Join(root, filepath.FromSlash(c.What))); err != nil {
			out = append(out, Finding{c.File, c.Line, "comment cites " + c.What + ", which does not exist"})
		}
	}
	return out
}

var (
	// goFileSpan: a code span naming a Go file, bare or as a link's text.
	goFileSpan = regexp.MustCompile("`([A-Za-z0-9_./-]+\\.go)`(?:\\]\\([^)]*\\))?")
	// nextIdent: the next code span of a list after it (separated by
	// spaces, a comma, "and" or "or"), when it is Name or Type.Member.
	nextIdent = regexp.MustCompile("^(?:\\s+|\\s*,\\s*)(?:(?:and|or)\\s+)?`([A-Za-z_][A-Za-z0-9_]*(?:\\.[A-Za-z_][A-Za-z0-9_]*)?)(?:\\(\\))?`")
)

// historical are the pages that record runs against the tree as it was
// then: a Go file they cite may since have moved.
var historical = map[string]bool{"bench/HISTORY.md": true}

// CheckFileCitations reports every identifier the pages cite after a Go
// file of the module ("`pipeline/claim.go` `Engine.reconcile`") that the
// file does not declare, and every cited Go file of the module's
// directories that does not exist (doc.go states the rule).
func CheckFileCitations(root string, pages []string, ix *Index) ([]Finding, int, error) {
	return overPages(root, pages, ix.fileCitations)
}

// fileCitations checks one page's citations after Go files, and says how
// many identifiers it read.
func (ix *Index) fileCitations(p *page) (out []Finding, checked int) {
	rel := p.rel
	for i, line := range p.lines {
		for _, loc := range goFileSpan.FindAllStringSubmatchIndex(line, -1) {
			file := line[loc[2]:loc[3]]
			declared, ours := ix.files[file]
			if !ours {
				if ix.dirs[path.Dir(file)] && !historical[rel] {
					out = append(out, Finding{rel, i + 1, "`" + file + "`: no such Go file in the module"})
				}
				continue
			}
			rest := line[loc[1]:]
			for m := nextIdent.FindStringSubmatchIndex(rest); m != nil; m = nextIdent.FindStringSubmatchIndex(rest) {
				name := rest[m[2]:m[3]]
				rest = rest[m[1]:]
				if first, _, _ := strings.Cut(name, "."); ix.decls[first] != nil && !declared[first] && strings.Contains(name, ".") {
					continue // pkg.Name: CheckIdents' business
				}
				checked++
				if !declared[name] && (strings.Contains(name, ".") || !declared["."+name]) {
					out = append(out, Finding{rel, i + 1, "`" + name + "` is not declared in " + file})
				}
			}
		}
	}
	return out, checked
}
