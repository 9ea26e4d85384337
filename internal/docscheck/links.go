package docscheck

import (
	"net/url"
	"os"
	"path"
	"path/filepath"
	"strings"
)

// Pages are the Markdown pages the checks read, relative to root: the
// README, every page of docs/ and bench/, and the chart's README.
func Pages(root string) ([]string, error) {
	pages := []string{"README.md", "charts/vk-sandbox/README.md"}
	for _, dir := range []string{"docs", "bench"} {
		m, err := filepath.Glob(filepath.Join(root, dir, "*.md"))
		if err != nil {
			return nil, err
		}
		for _, f := range m {
			pages = append(pages, dir+"/"+filepath.Base(f))
		}
	}
	return pages, nil
}

// checker holds what the checks share: the repository root and the pages
// read so far (a link target is read once).
type checker struct {
	root  string
	pages map[string]*page
}

func newChecker(root string) *checker { return &checker{root: root, pages: map[string]*page{}} }

func (c *checker) page(rel string) (*page, error) {
	if p, ok := c.pages[rel]; ok {
		return p, nil
	}
	p, err := readPage(c.root, rel)
	if err != nil {
		return nil, err
	}
	c.pages[rel] = p
	return p, nil
}

// CheckLinks reports every relative link of the pages whose file does
// not exist, and every #anchor that is not a heading of its target page.
func CheckLinks(root string, pages []string) ([]Finding, error) {
	c := newChecker(root)
	var out []Finding
	for _, rel := range pages {
		p, err := c.page(rel)
		if err != nil {
			return nil, err
		}
		for _, l := range p.links() {
			if what := c.resolve(rel, l.target); what != "" {
				out = append(out, Finding{rel, l.line, what})
			}
		}
	}
	return out, nil
}

// resolve checks one link target of the page from; "" means it resolves,
// anything else says why not.
func (c *checker) resolve(from, target string) string {
	if target == "" || external(target) {
		return ""
	}
	file, frag, _ := strings.Cut(target, "#")
	if i := strings.IndexByte(file, '?'); i >= 0 {
		file = file[:i]
	}
	if f, err := url.PathUnescape(file); err == nil {
		file = f
	}
	rel := from
	if file != "" {
		rel = path.Clean(path.Join(path.Dir(from), file))
		if rel == ".." || strings.HasPrefix(rel, "../") {
			return "link " + target + ": leaves the repository"
		}
		st, err := os.Stat(filepath.Join(c.root, filepath.FromSlash(rel)))
		if err != nil {
			return "link " + target + ": no file " + rel
		}
		if st.IsDir() && frag != "" {
			return "link " + target + ": an anchor into the directory " + rel
		}
	}
	if frag == "" {
		return ""
	}
	if !strings.HasSuffix(rel, ".md") {
		return "" // a line anchor (#L10) of a source file: GitHub's, not the file's
	}
	p, err := c.page(rel)
	if err != nil {
		return "link " + target + ": " + err.Error()
	}
	if !p.anchors()[frag] {
		return "link " + target + ": no heading #" + frag + " in " + rel
	}
	return ""
}
