package main

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
)

func report(w io.Writer, muts []*mutation, total, base time.Duration, logs string, interrupted bool) {
	counts := map[string]int{}
	for _, m := range muts {
		counts[m.result()]++
	}
	fmt.Fprintf(w, "\nmutants: %d mutations: %d killed, %d survived, %d errors", len(muts), counts["killed"], counts["SURVIVED"], counts["ERROR"])
	if n := counts["not run"]; n > 0 {
		fmt.Fprintf(w, ", %d not run", n)
	}
	fmt.Fprintf(w, "; total %s (baseline %s)\n\n", secs(total), secs(base))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tRESULT\tSECS\tDESCRIPTION\tTESTS")
	for _, m := range muts {
		s := "-"
		if m.took > 0 {
			s = fmt.Sprintf("%.1f", m.took.Seconds())
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s -run '%s'\n", m.ID, m.result(), s, m.Title, strings.Join(m.Pkgs, " "), m.Run)
	}
	tw.Flush()
	fmt.Fprintln(w)
	width := 0
	for _, m := range muts {
		width = max(width, len(m.ID))
	}
	for _, m := range muts {
		var why string
		switch {
		case m.applyErr != nil:
			why = m.applyErr.Error()
		case m.baseErr != nil:
			why = m.baseErr.Error()
		case m.runErr != nil:
			why = m.runErr.Error()
		default:
			why = m.note
		}
		if why == "" {
			continue
		}
		fmt.Fprintf(w, "  %-*s  %s: %s\n", width, m.ID, m.result(), why)
		if m.result() == "SURVIVED" {
			fmt.Fprintf(w, "  %-*s  should be caught because: %s\n", width, "", m.Why)
		}
	}
	fmt.Fprintf(w, "\nlogs: %s\n", logs)
	if interrupted {
		fmt.Fprintln(w, "interrupted: the remaining mutations did not run")
	}
}

func secs(d time.Duration) string { return d.Round(100 * time.Millisecond).String() }

func noteSuffix(n string) string {
	if n == "" {
		return ""
	}
	return " (" + n + ")"
}

func p2(ok bool, s string) string {
	if ok {
		return s
	}
	return ""
}

func firstLine(s string) string {
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			return l
		}
	}
	return strings.TrimSpace(s)
}

func shortPkg(p string) string { return strings.TrimPrefix(p, modulePath) }

func shortTest(t string) string {
	pkg, name, ok := strings.Cut(t, " ")
	if !ok {
		return t
	}
	return shortPkg(pkg) + "." + name
}

func uniq(ss []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, s := range ss {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}

func sanitize(s string) string { return strings.Trim(unsafeChars.ReplaceAllString(s, "_"), "_") }

func shellJoin(args []string) string {
	q := make([]string, len(args))
	for i, a := range args {
		if a == "" || strings.ContainsAny(a, " \t\n'\"\\|&;()<>*?$`^[]{}") {
			a = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
		q[i] = a
	}
	return strings.Join(q, " ")
}
