package main

import (
	"os"
	"strings"
	"testing"
)

// The list in the repository parses. Whether each anchor still applies is
// the mutation check's own business (make mutants), not make test's.
func TestTheRepositorysListParses(t *testing.T) {
	muts, err := parseListFile("../mutants.txt")
	if err != nil {
		t.Fatal(err)
	}
	if len(muts) < 12 {
		t.Fatalf("%d mutations, want at least 12", len(muts))
	}
}

func TestParseKeepsTextVerbatimAndJoinsContinuations(t *testing.T) {
	muts, err := parseList([]byte(`# a comment
[one]
title: a title
file:  a/b.go
pkgs:  ./a/ ./b/...
run:   ^TestA$
timeout: 2m
why:   first half
       second half
find:
|	if x {
|
|		return
replace:
|	if !x {
`))
	if err != nil {
		t.Fatal(err)
	}
	m := muts[0]
	if m.ID != "one" || m.Title != "a title" || m.File != "a/b.go" || m.Run != "^TestA$" || m.Timeout.String() != "2m0s" {
		t.Errorf("fields: %+v", m)
	}
	if strings.Join(m.Pkgs, ",") != "./a/,./b/..." {
		t.Errorf("pkgs %q", m.Pkgs)
	}
	if m.Why != "first half second half" {
		t.Errorf("why %q", m.Why)
	}
	if m.Find != "\tif x {\n\n\t\treturn" || m.Replace != "\tif !x {" {
		t.Errorf("find %q replace %q", m.Find, m.Replace)
	}
}

func TestParseRejectsAnIncompleteOrAmbiguousList(t *testing.T) {
	const ok = "title: t\nfile: f\npkgs: ./p/\nrun: ^T$\nwhy: w\nfind:\n|a\nreplace:\n|b\n"
	for name, list := range map[string]string{
		"duplicate id":     "[x]\n" + ok + "[x]\n" + ok,
		"missing field":    "[x]\ntitle: t\nfile: f\npkgs: ./p/\nrun: ^T$\nfind:\n|a\nreplace:\n|b\n",
		"text outside":     "[x]\n|a\n" + ok,
		"find equals repl": "[x]\ntitle: t\nfile: f\npkgs: ./p/\nrun: ^T$\nwhy: w\nfind:\n|a\nreplace:\n|a\n",
		"bad regex":        "[x]\ntitle: t\nfile: f\npkgs: ./p/\nrun: ^(T$\nwhy: w\nfind:\n|a\nreplace:\n|b\n",
		"subtest regex":    "[x]\ntitle: t\nfile: f\npkgs: ./p/\nrun: ^T$/sub\nwhy: w\nfind:\n|a\nreplace:\n|b\n",
		"unknown field":    "[x]\n" + ok + "colour: red\n",
		"bad id":           "[X y]\n" + ok,
		"empty":            "# nothing\n",
	} {
		if _, err := parseList([]byte(list)); err == nil {
			t.Errorf("%s: parsed", name)
		}
	}
}

func TestCheckWantsTheAnchorExactlyOnce(t *testing.T) {
	dir := t.TempDir()
	write := func(s string) {
		t.Helper()
		if err := writeFile(dir+"/f.go", s); err != nil {
			t.Fatal(err)
		}
	}
	m := &mutation{File: "f.go", Find: "return err"}
	for content, want := range map[string]string{
		"x\nreturn err\n":          "",
		"\treturn err // why\n":    "",
		"x\n":                      "not in f.go",
		"return\terr\n":            "not in f.go",
		"return err\nreturn err\n": "occurs 2 times",
		// A plain substring: a longer anchor is what makes it unique.
		"return errors.New(\"e\")\nreturn err\n": "occurs 2 times",
	} {
		write(content)
		_, err := m.check(dir)
		switch {
		case want == "" && err != nil:
			t.Errorf("%q: %v", content, err)
		case want != "" && (err == nil || !strings.Contains(err.Error(), want)):
			t.Errorf("%q: %v, want %q", content, err, want)
		}
	}
}

func writeFile(path, s string) error { return os.WriteFile(path, []byte(s), 0o644) }
