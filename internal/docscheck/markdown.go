package docscheck

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"unicode"
)

// Finding is one thing a page says that the tree does not back: the page
// (relative to the repository root), the line, and what is wrong.
type Finding struct {
	File string
	Line int
	What string
}

func (f Finding) String() string { return fmt.Sprintf("%s:%d: %s", f.File, f.Line, f.What) }

// page is a Markdown file split into the lines that are prose: fenced
// code blocks are blanked (their text is an example, not a claim about
// the tree), so line numbers stay those of the file.
type page struct {
	rel   string   // path from the repository root, slash-separated
	lines []string // fenced lines are ""
	slugs map[string]bool
}

func readPage(root, rel string) (*page, error) {
	b, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(rel)))
	if err != nil {
		return nil, err
	}
	p := &page{rel: rel}
	fence := ""
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 1<<20) // a table row is one long line
	for sc.Scan() {
		line := sc.Text()
		trimmed := strings.TrimLeft(line, " ")
		switch {
		case fence == "" && (strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~")):
			fence = trimmed[:3]
			line = ""
		case fence != "":
			if strings.HasPrefix(trimmed, fence) {
				fence = ""
			}
			line = ""
		}
		p.lines = append(p.lines, line)
	}
	return p, sc.Err()
}

var (
	headingRE  = regexp.MustCompile(`^#{1,6}\s+(.*?)\s*#*\s*$`)
	htmlIDRE   = regexp.MustCompile(`<a\s+(?:id|name)="([^"]+)"`)
	inlineLink = regexp.MustCompile(`\[([^\]]*)\]\(([^)\s]*)\)`)
	refLinkDef = regexp.MustCompile(`^\s*\[[^\]]+\]:\s*(\S+)`)
)

// anchors are the fragments a page answers to: each heading's GitHub slug
// (the second heading of one slug gets "-1", the third "-2") and every
// explicit <a id> or <a name>.
func (p *page) anchors() map[string]bool {
	if p.slugs != nil {
		return p.slugs
	}
	set := map[string]bool{}
	p.slugs = set
	seen := map[string]int{}
	for _, line := range p.lines {
		for _, m := range htmlIDRE.FindAllStringSubmatch(line, -1) {
			set[m[1]] = true
		}
		m := headingRE.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		s := Slug(m[1])
		if n := seen[s]; n > 0 {
			set[fmt.Sprintf("%s-%d", s, n)] = true
		} else {
			set[s] = true
		}
		seen[s]++
	}
	return set
}

// Slug is GitHub's anchor for a heading: the rendered text (a link
// becomes its text, code spans and emphasis lose their marks) in lower
// case, each space turned into '-', and every character that is not a
// letter, a digit, '-' or '_' dropped.
func Slug(heading string) string {
	text := inlineLink.ReplaceAllString(heading, "$1")
	var b strings.Builder
	for _, r := range strings.ToLower(text) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// link is one link target a page holds, on its line.
type link struct {
	line   int
	target string
}

func (p *page) links() []link {
	var out []link
	for i, line := range p.lines {
		for _, m := range inlineLink.FindAllStringSubmatch(stripCode(line), -1) {
			out = append(out, link{i + 1, m[2]})
		}
		if m := refLinkDef.FindStringSubmatch(line); m != nil {
			out = append(out, link{i + 1, m[1]})
		}
	}
	return out
}

// stripCode blanks the code spans of a line, so that text such as
// `a[i](x)` inside backticks is not read as a link. A link whose text is
// a code span ([`x`](path)) keeps its target: only the span goes.
func stripCode(line string) string {
	parts := strings.Split(line, "`")
	for i := 1; i < len(parts); i += 2 {
		if i == len(parts)-1 {
			break // an unpaired backtick: the rest is prose
		}
		parts[i] = ""
	}
	return strings.Join(parts, "`")
}

// external reports whether a link target leaves the repository: it has a
// URL scheme (https:, mailto:) or is protocol-relative.
func external(target string) bool {
	if strings.HasPrefix(target, "//") {
		return true
	}
	i := strings.IndexAny(target, ":/#?")
	return i > 0 && target[i] == ':'
}
