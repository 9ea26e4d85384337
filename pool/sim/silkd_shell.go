package sim

import (
	"cmp"
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The commands silkd's exec runs in the emulator, streaming: output is
// written as it is made and stdin is read as it arrives. Paths are the
// guest's, rooted at the sandbox's scratch directory; a relative path is
// taken from cwd ("/" without one).
//
//	echo [-n] WORD...       true, false, env, pwd
//	sleep SECONDS           waits, or until killed
//	cat [FILE...]           the files, or stdin
//	head -c N [FILE]        N bytes of FILE (/dev/zero and /dev/urandom
//	                        included), or of stdin
//	test -d|-f|-e PATH      exit 0 if PATH is a directory, file, either
//	mkdir [-p] DIR...       rm [-f] FILE...
//	tar cf - PATH...        a tar stream of the PATHs (what kubectl cp
//	                        reads from a Pod)
//	tar xmf - [-C DIR]      unpacks stdin into DIR (what kubectl cp writes)
//	sh -c SCRIPT            statements split at ";", each one of the above
//	                        or "exit N"; ">&2" at the end sends its output
//	                        to stderr, "> FILE" to FILE. No quoting.

var streamBuiltins = map[string]bool{"echo": true, "true": true, "false": true, "env": true, "pwd": true, "sleep": true,
	"cat": true, "head": true, "test": true, "mkdir": true, "rm": true, "tar": true, "sh": true}

// streamKnown reports whether argv names a command exec runs.
func streamKnown(argv []string) bool { return streamBuiltins[path.Base(argv[0])] }

// stream is one command's environment and streams.
type stream struct {
	ctx            context.Context
	root           string // the guest's "/" on the host
	cwd            string
	env            map[string]string
	stdin          io.Reader
	stdout, stderr io.Writer
}

// host maps a guest path onto the scratch directory; ".." cannot leave it.
func (st *stream) host(p string) string {
	if !path.IsAbs(p) {
		p = path.Join(cmp.Or(st.cwd, "/"), p)
	}
	return filepath.Join(st.root, filepath.FromSlash(path.Clean("/"+p)))
}

func (st *stream) fail(code int, format string, a ...any) int {
	fmt.Fprintf(st.stderr, format+"\n", a...)
	return code
}

// run executes argv and returns its exit code; a killed command's code is
// replaced by the caller.
func (st *stream) run(argv []string) int {
	name, args := path.Base(argv[0]), argv[1:]
	switch name {
	case "echo":
		nl := "\n"
		if len(args) > 0 && args[0] == "-n" {
			nl, args = "", args[1:]
		}
		_, _ = io.WriteString(st.stdout, strings.Join(args, " ")+nl)
	case "true":
	case "false":
		return 1
	case "env":
		for _, k := range slices.Sorted(maps.Keys(st.env)) {
			fmt.Fprintf(st.stdout, "%s=%s\n", k, st.env[k])
		}
	case "pwd":
		fmt.Fprintln(st.stdout, cmp.Or(st.cwd, "/"))
	case "sleep":
		secs, err := strconv.ParseFloat(strings.Join(args, ""), 64)
		if len(args) != 1 || err != nil || secs < 0 {
			return st.fail(1, "sleep: invalid time interval")
		}
		if !sleepCtx(st.ctx, time.Duration(secs*float64(time.Second))) {
			return 137
		}
	case "cat":
		return st.cat(args)
	case "head":
		return st.head(args)
	case "test":
		return st.test(args)
	case "mkdir":
		for _, d := range args {
			if d != "-p" {
				if err := os.MkdirAll(st.host(d), 0o755); err != nil {
					return st.fail(1, "mkdir: %s: %v", d, err)
				}
			}
		}
	case "rm":
		for _, f := range args {
			if f != "-f" && f != "-rf" {
				_ = os.RemoveAll(st.host(f))
			}
		}
	case "tar":
		return st.tar(args)
	case "sh":
		if len(args) != 2 || args[0] != "-c" {
			return st.fail(2, "sh: usage: sh -c SCRIPT")
		}
		return st.script(args[1])
	default:
		return st.fail(127, "sh: %s: not found", name)
	}
	return 0
}

func (st *stream) script(src string) int {
	code := 0
	for stmt := range strings.SplitSeq(src, ";") {
		words := strings.Fields(stmt)
		if len(words) == 0 {
			continue
		}
		if st.ctx.Err() != nil {
			return 137
		}
		sub := *st
		switch n := len(words); {
		case words[n-1] == ">&2" || words[n-1] == "1>&2":
			sub.stdout, words = st.stderr, words[:n-1]
		case n >= 2 && words[n-2] == ">":
			f, err := os.Create(st.host(words[n-1]))
			if err != nil {
				return st.fail(1, "sh: %s: %v", words[n-1], err)
			}
			defer f.Close()
			sub.stdout, words = f, words[:n-2]
		}
		if len(words) == 0 {
			continue
		}
		if words[0] == "exit" {
			if len(words) == 1 {
				return code
			}
			v, err := strconv.Atoi(words[1])
			if err != nil {
				return st.fail(2, "sh: exit: %s: numeric argument required", words[1])
			}
			return v & 0xff
		}
		if !streamKnown(words) {
			code = st.fail(127, "sh: %s: not found", words[0])
			continue
		}
		code = sub.run(words)
	}
	return code
}

func (st *stream) open(name string) (io.ReadCloser, error) {
	switch name {
	case "-":
		return io.NopCloser(st.stdin), nil
	case "/dev/zero":
		return io.NopCloser(zeros{}), nil
	case "/dev/urandom":
		return io.NopCloser(rand.Reader), nil
	}
	return os.Open(st.host(name))
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) { clear(p); return len(p), nil }

func (st *stream) cat(args []string) int {
	if len(args) == 0 {
		args = []string{"-"}
	}
	for _, a := range args {
		f, err := st.open(a)
		if err != nil {
			return st.fail(1, "cat: %s: No such file or directory", a)
		}
		_, err = io.Copy(st.stdout, f)
		_ = f.Close()
		if err != nil {
			return 1
		}
	}
	return 0
}

func (st *stream) head(args []string) int {
	if len(args) < 2 || args[0] != "-c" {
		return st.fail(1, "head: usage: head -c N [FILE]")
	}
	n, err := strconv.ParseInt(args[1], 10, 64)
	if err != nil || n < 0 {
		return st.fail(1, "head: invalid number of bytes: %s", args[1])
	}
	name := "-"
	if len(args) > 2 {
		name = args[2]
	}
	f, err := st.open(name)
	if err != nil {
		return st.fail(1, "head: cannot open '%s' for reading: No such file or directory", name)
	}
	defer f.Close()
	if _, err := io.CopyN(st.stdout, f, n); err != nil && err != io.EOF {
		return 1
	}
	return 0
}

func (st *stream) test(args []string) int {
	if len(args) != 2 {
		return 2
	}
	fi, err := os.Stat(st.host(args[1]))
	switch {
	case err != nil:
		return 1
	case args[0] == "-d" && !fi.IsDir(), args[0] == "-f" && !fi.Mode().IsRegular():
		return 1
	}
	return 0
}
