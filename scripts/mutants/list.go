package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"regexp"
	"strings"
	"time"
)

// The list format (scripts/mutants.txt): one block per mutation.
//
//	[id]
//	title:   one line, shown in the table
//	file:    path of the one file it changes, from the repository root
//	pkgs:    go test package patterns, separated by spaces
//	run:     the go test -run regex of the tests that must catch it
//	timeout: go test -timeout (optional; default the -timeout flag)
//	why:     the real bug it stands for and why those tests must fail
//	find:
//	|<text that must occur exactly once in file, one line per |>
//	replace:
//	|<the text put in its place>
//
// Text lines start with "|"; everything after it is kept verbatim, tabs
// included, and a line that is only "|" is an empty line. A line that
// starts with a space or a tab continues the field above it. Lines
// starting with "#" and blank lines are ignored.

var (
	idRE    = regexp.MustCompile(`^[a-z0-9][a-z0-9-]*$`)
	fieldRE = regexp.MustCompile(`^([a-z]+):\s*(.*)$`)
)

func parseListFile(path string) ([]*mutation, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	muts, err := parseList(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return muts, nil
}

func parseList(data []byte) ([]*mutation, error) {
	var (
		muts  []*mutation
		cur   *mutation
		seen  = map[string]map[string]bool{}
		text  *[]string // the find or replace lines being read
		last  string    // the scalar field a continuation line extends
		finds = map[*mutation]*[]string{}
		repls = map[*mutation]*[]string{}
	)
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 1<<16), 1<<20)
	n := 0
	for sc.Scan() {
		n++
		line := strings.TrimSuffix(sc.Text(), "\r")
		switch {
		case strings.HasPrefix(line, "|"):
			if text == nil {
				return nil, fmt.Errorf("line %d: a text line outside the find and replace sections", n)
			}
			*text = append(*text, line[1:])
			continue
		case strings.TrimSpace(line) == "" || strings.HasPrefix(line, "#"):
			continue
		case strings.HasPrefix(line, "["):
			if !strings.HasSuffix(line, "]") || !idRE.MatchString(line[1:len(line)-1]) {
				return nil, fmt.Errorf("line %d: want [id] with an id of lower-case letters, digits and dashes", n)
			}
			cur = &mutation{ID: line[1 : len(line)-1], line: n}
			for _, m := range muts {
				if m.ID == cur.ID {
					return nil, fmt.Errorf("line %d: mutation %s is defined twice (first at line %d)", n, cur.ID, m.line)
				}
			}
			muts = append(muts, cur)
			seen[cur.ID] = map[string]bool{}
			text, last = nil, ""
			continue
		}
		if cur == nil {
			return nil, fmt.Errorf("line %d: a field before the first [id]", n)
		}
		if line[0] == ' ' || line[0] == '\t' {
			if last == "" {
				return nil, fmt.Errorf("line %d: a continuation line with no field above it", n)
			}
			setField(cur, last, getField(cur, last)+" "+strings.TrimSpace(line))
			continue
		}
		f := fieldRE.FindStringSubmatch(line)
		if f == nil {
			return nil, fmt.Errorf("line %d: want field: value, |text, or [id]", n)
		}
		key, val := f[1], strings.TrimSpace(f[2])
		if seen[cur.ID][key] {
			return nil, fmt.Errorf("line %d: %s: field %s given twice", n, cur.ID, key)
		}
		seen[cur.ID][key] = true
		text, last = nil, ""
		switch key {
		case "find", "replace":
			if val != "" {
				return nil, fmt.Errorf("line %d: %s: put the %s text on the lines below, each starting with |", n, cur.ID, key)
			}
			lines := &[]string{}
			if key == "find" {
				finds[cur] = lines
			} else {
				repls[cur] = lines
			}
			text = lines
		case "title", "file", "pkgs", "run", "why", "timeout":
			setField(cur, key, val)
			last = key
		default:
			return nil, fmt.Errorf("line %d: %s: unknown field %q", n, cur.ID, key)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(muts) == 0 {
		return nil, fmt.Errorf("no mutations")
	}
	for _, m := range muts {
		for _, k := range []string{"title", "file", "pkgs", "run", "why", "find", "replace"} {
			if !seen[m.ID][k] {
				return nil, fmt.Errorf("mutation %s (line %d): no %q field", m.ID, m.line, k+":")
			}
		}
		m.Find = strings.Join(*finds[m], "\n")
		m.Replace = strings.Join(*repls[m], "\n")
		if strings.TrimSpace(m.Find) == "" {
			return nil, fmt.Errorf("mutation %s (line %d): empty find text", m.ID, m.line)
		}
		if m.Find == m.Replace {
			return nil, fmt.Errorf("mutation %s (line %d): replace is the same as find", m.ID, m.line)
		}
		if _, err := regexp.Compile(m.Run); err != nil {
			return nil, fmt.Errorf("mutation %s (line %d): run: %v", m.ID, m.line, err)
		}
		if strings.Contains(m.Run, "/") {
			return nil, fmt.Errorf("mutation %s (line %d): run: name top-level tests only (no /)", m.ID, m.line)
		}
		m.Pkgs = strings.Fields(getField(m, "pkgs"))
		if len(m.Pkgs) == 0 {
			return nil, fmt.Errorf("mutation %s (line %d): no packages", m.ID, m.line)
		}
		if t := getField(m, "timeout"); t != "" {
			d, err := time.ParseDuration(t)
			if err != nil || d <= 0 {
				return nil, fmt.Errorf("mutation %s (line %d): timeout %q: want a Go duration", m.ID, m.line, t)
			}
			m.Timeout = d
		}
	}
	return muts, nil
}

// setField records a scalar field as read; pkgs and timeout are parsed
// once the block is complete.
func setField(m *mutation, key, val string) {
	switch key {
	case "title":
		m.Title = val
	case "file":
		m.File = val
	case "run":
		m.Run = val
	case "why":
		m.Why = val
	}
	if m.fields == nil {
		m.fields = map[string]string{}
	}
	m.fields[key] = val
}

func getField(m *mutation, key string) string { return m.fields[key] }
