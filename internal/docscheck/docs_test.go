package docscheck

import "testing"

// root is the repository root, from this package's directory.
const root = "../.."

func load(t *testing.T) ([]string, *Index) {
	t.Helper()
	pages, err := Pages(root)
	if err != nil {
		t.Fatal(err)
	}
	ix, err := LoadIndex(root)
	if err != nil {
		t.Fatal(err)
	}
	return pages, ix
}

func report(t *testing.T, findings []Finding) {
	t.Helper()
	for _, f := range findings {
		t.Error(f)
	}
}

// Every relative link of the pages (README.md, docs/, bench/, the chart's
// README) names a file of the repository, and every #anchor a heading of
// its page.
func TestDocsLinksResolve(t *testing.T) {
	pages, _ := load(t)
	findings, err := CheckLinks(root, pages)
	if err != nil {
		t.Fatal(err)
	}
	report(t, findings)
}

// Every backticked Go identifier of this module that a page cites (the
// rule of doc.go) is declared by the module, and every docs/ page a Go
// comment cites exists.
func TestDocsGoIdentifiersResolve(t *testing.T) {
	pages, ix := load(t)
	findings, checked, err := CheckIdents(root, pages, ix)
	if err != nil {
		t.Fatal(err)
	}
	report(t, findings)
	// The pages cite hundreds of identifiers: far fewer means the rule
	// stopped recognising them, and the check would pass on anything.
	if checked < 300 {
		t.Errorf("only %d code spans were taken for Go identifiers of the module: has the rule (doc.go) or the index broken?", checked)
	}
	report(t, CheckCommentPaths(root, ix))
}

// What a page cites right after a Go file of the module is declared in
// that file, so a function that moved to another file takes its citation
// with it.
func TestDocsCiteEachIdentifierInItsFile(t *testing.T) {
	pages, ix := load(t)
	findings, checked, err := CheckFileCitations(root, pages, ix)
	if err != nil {
		t.Fatal(err)
	}
	report(t, findings)
	if checked < 80 {
		t.Errorf("only %d identifiers were read after a Go file: has the rule (doc.go) broken?", checked)
	}
}

// Slug makes the anchors GitHub makes: lower case, spaces to '-',
// punctuation dropped, a link's or a code span's text kept.
func TestSlugFollowsGitHubRules(t *testing.T) {
	for heading, want := range map[string]string{
		"Delete authorization (`kube/authorize.go`)":      "delete-authorization-kubeauthorizego",
		"sandboxd-sim (the emulator) flags":               "sandboxd-sim-the-emulator-flags",
		"Real backends: Jaeger, Prometheus and a browser": "real-backends-jaeger-prometheus-and-a-browser",
		"12. Kubelet API served by the node":              "12-kubelet-api-served-by-the-node",
		"R3: sandboxd faults":                             "r3-sandboxd-faults",
		"See [the table](#x) — now":                       "see-the-table--now",
	} {
		if got := Slug(heading); got != want {
			t.Errorf("Slug(%q) = %q, want %q", heading, got, want)
		}
	}
}

// The rule of doc.go, on spans the pages use: identifiers of the module
// are checked (and a missing one is reported), everything else is not.
func TestTheRuleTellsGoIdentifiersFromOtherSpans(t *testing.T) {
	_, ix := load(t)
	for span, want := range map[string]struct{ checked, resolves bool }{
		"records.died":           {true, true},  // unexported type, method
		"records.buried":         {true, false}, // renamed away
		"Engine.reconcile":       {true, true},
		"pool.Client.Detect":     {true, true},
		"pool.Client.Vanished":   {true, false},
		"store.OwnerUnknown":     {true, true},
		"store.Range":            {true, false}, // a method, not a package-level name
		"Verdict.FromOwner":      {true, true},  // a field
		"TestDocsLinksResolve":   {true, true},
		"TestNoSuchContract/sub": {true, false},
		"store.commit":           {false, true}, // a span name
		"queue.wait":             {false, true},
		"node.nameSuffix":        {false, true}, // a Helm value; node is an imported package
		"nodeutil.Node.runHTTP":  {false, true}, // another module's
		"spec.nodeName":          {false, true},
		"--node-name":            {false, true},
		"pool/store":             {false, true},
		"Running":                {false, true},
		"make bench-interactive": {false, true},
	} {
		checked, what := ix.Resolve(span)
		if checked != want.checked || (what == "") != want.resolves {
			t.Errorf("Resolve(%q) = checked %v, %q; want checked %v, resolves %v", span, checked, what, want.checked, want.resolves)
		}
	}
}

// An identifier cited after a Go file is looked up in that file: a method
// that moved to another file is reported, a list that names its next file
// is read against that file.
func TestFileCitationsReadTheFileTheyName(t *testing.T) {
	_, ix := load(t)
	for line, want := range map[string]int{
		"[`pipeline/claim.go`](../pipeline/claim.go) `Engine.reconcile`":                           0,
		"`pipeline/claim.go` `reconcile`, `Engine.ownerMatches` and `Engine.reconcile`":            0,
		"`pipeline/claim.go` `Engine.delete`":                                                      1, // in delete.go
		"`pipeline/types.go` `Verdict.FromOwner`, read by `Engine.delete` in `pipeline/delete.go`": 0,
		"`pipeline/types.go` `Verdict`, `Engine.delete`":                                           1,
		"`pipeline/gone.go` `Engine.delete`":                                                       1, // no such file
		"`node/nodeutil/controller.go` `nodeutil.Node.runHTTP`":                                    0, // another module's
	} {
		got, _ := ix.fileCitations(&page{rel: "docs/x.md", lines: []string{line}})
		if len(got) != want {
			t.Errorf("%s: %d findings %v, want %d", line, len(got), got, want)
		}
	}
}
