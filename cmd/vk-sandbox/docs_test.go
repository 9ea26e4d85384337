package main

import (
	"bufio"
	"flag"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"
)

// docRow is one row of the vk-sandbox flag table in docs/configuration.md.
// docRow is one flag row of docs/configuration.md's vk-sandbox table: its
// variable, default and description.
type docRow struct{ env, def, desc string }

var rowRE = regexp.MustCompile("^\\| `--([a-z0-9-]+)` \\| ([^|]*) \\| ([^|]*) \\| (.*) \\|$")

func docRows(t *testing.T) map[string]docRow {
	t.Helper()
	f, err := os.Open("../../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows := map[string]docRow{}
	in := false
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20) // a description is one long line
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "## vk-sandbox flags"):
			in = true
		case strings.HasPrefix(line, "## "):
			in = false
		}
		if m := rowRE.FindStringSubmatch(line); in && m != nil {
			rows[m[1]] = docRow{env: strings.Trim(strings.TrimSpace(m[2]), "`"), def: strings.TrimSpace(m[3]), desc: m[4]}
		}
	}
	return rows
}

// sameDefault compares a documented default with the flag's: a single
// literal in backticks must be the same value (durations compared as
// durations), "*(empty)*" is the empty string; prose (a default computed
// from another flag) is not compared.
func sameDefault(doc, def string) (bool, bool) {
	if doc == "*(empty)*" {
		return def == "", true
	}
	lit, ok := strings.CutPrefix(doc, "`")
	if !ok || strings.Count(lit, "`") != 1 || !strings.HasSuffix(lit, "`") {
		return false, false
	}
	lit = strings.TrimSuffix(lit, "`")
	if d1, err1 := time.ParseDuration(lit); err1 == nil {
		d2, err2 := time.ParseDuration(def)
		return err2 == nil && d1 == d2, true
	}
	return lit == def, true
}

// docs/configuration.md and packaging/env.example list every flag and
// variable the binary defines, with the same defaults.
func TestDocsListEveryFlagWithItsVariableAndDefault(t *testing.T) {
	rows := docRows(t)
	example, err := os.ReadFile("../../packaging/env.example")
	if err != nil {
		t.Fatal(err)
	}
	fs := newFlagSet()
	defineFlags(fs, &config{})
	seen := map[string]bool{}
	fs.VisitAll(func(f *flag.Flag) {
		seen[f.Name] = true
		row, ok := rows[f.Name]
		if !ok {
			t.Errorf("--%s is not in docs/configuration.md", f.Name)
			return
		}
		env := envName(f.Name)
		if want := map[bool]string{true: env, false: "—"}[env != ""]; row.env != want {
			t.Errorf("--%s: docs name its variable %q, the binary reads %q", f.Name, row.env, want)
		}
		if same, compared := sameDefault(row.def, f.DefValue); compared && !same {
			t.Errorf("--%s: docs say the default is %s, the binary's is %q", f.Name, row.def, f.DefValue)
		}
		if env == "" {
			return
		}
		re := regexp.MustCompile(`(?m)^#?` + env + `=(.*)$`)
		m := re.FindSubmatch(example)
		if m == nil {
			t.Errorf("%s (--%s) is not in packaging/env.example", env, f.Name)
		}
	})
	for name := range rows {
		if !seen[name] {
			t.Errorf("docs/configuration.md lists --%s, which the binary does not define", name)
		}
	}
}
