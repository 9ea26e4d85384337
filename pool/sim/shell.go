package sim

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"maps"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The emulator has no guest to run commands in. It runs a small, fixed set
// of them itself, enough for a test to see output on both streams, an exit
// code, a timeout and an oversized answer:
//
//	echo [-n] WORD...      WORDs joined by spaces, then a newline (none with -n)
//	true, false            exit 0, exit 1
//	env                    the request's env, one K=V a line, sorted
//	pwd                    the request's cwd, "/" without one
//	sleep SECONDS          waits (a fraction is fine), or until the timeout
//	head -c N FILE         N bytes of /dev/zero or /dev/urandom
//	sh -c SCRIPT           SCRIPT's statements, split at ";", each one of the
//	                       above or "exit N"; a statement ending in ">&2"
//	                       writes its output to stderr; an unknown command
//	                       prints "sh: NAME: not found" and exits 127. Words
//	                       are split at spaces: there is no quoting.
//
// argv[0] is matched by its base name (/bin/sh is sh). Any other argv[0] is
// a missing command: 400, as sandboxd answers a command it cannot start.

// errOutputCap stops a command whose stdout plus stderr passed the cap.
var errOutputCap = errors.New("output exceeds the buffered exec limit")

// shell is one command's environment and output.
type shell struct {
	ctx            context.Context
	cwd            string
	env            map[string]string
	stdout, stderr bytes.Buffer
	limit          int
}

// builtins are the commands argv[0] may name directly.
var builtins = map[string]bool{"echo": true, "true": true, "false": true, "env": true, "pwd": true, "sleep": true, "head": true, "sh": true}

// known reports whether argv names a command the emulator runs.
func known(argv []string) bool { return builtins[path.Base(argv[0])] }

// run executes argv and returns its exit code; the error is the context's
// (the timeout or the caller leaving) or errOutputCap.
func (sh *shell) run(argv []string) (int, error) {
	return sh.command(argv, &sh.stdout)
}

func (sh *shell) command(argv []string, out *bytes.Buffer) (int, error) {
	name, args := path.Base(argv[0]), argv[1:]
	switch name {
	case "echo":
		nl := "\n"
		if len(args) > 0 && args[0] == "-n" {
			nl, args = "", args[1:]
		}
		return 0, sh.write(out, strings.Join(args, " ")+nl)
	case "true":
		return 0, nil
	case "false":
		return 1, nil
	case "env":
		var b strings.Builder
		for _, k := range slices.Sorted(maps.Keys(sh.env)) {
			fmt.Fprintf(&b, "%s=%s\n", k, sh.env[k])
		}
		return 0, sh.write(out, b.String())
	case "pwd":
		return 0, sh.write(out, cmp.Or(sh.cwd, "/")+"\n")
	case "sleep":
		return sh.sleep(args)
	case "head":
		return sh.head(args, out)
	case "sh":
		if len(args) != 2 || args[0] != "-c" {
			return 2, sh.write(&sh.stderr, "sh: usage: sh -c SCRIPT\n")
		}
		return sh.script(args[1])
	}
	return 127, sh.write(&sh.stderr, "sh: "+name+": not found\n")
}

// script runs the statements of sh -c; its exit code is the last one's.
func (sh *shell) script(src string) (int, error) {
	code := 0
	for stmt := range strings.SplitSeq(src, ";") {
		words := strings.Fields(stmt)
		if len(words) == 0 {
			continue
		}
		out := &sh.stdout
		if last := words[len(words)-1]; last == ">&2" || last == "1>&2" {
			out, words = &sh.stderr, words[:len(words)-1]
			if len(words) == 0 {
				continue
			}
		}
		if words[0] == "exit" {
			n := 0
			if len(words) > 1 {
				v, err := strconv.Atoi(words[1])
				if err != nil {
					return 2, sh.write(&sh.stderr, "sh: exit: "+words[1]+": numeric argument required\n")
				}
				n = v & 0xff
			}
			return n, nil
		}
		var err error
		if code, err = sh.command(words, out); err != nil {
			return code, err
		}
	}
	return code, nil
}

func (sh *shell) sleep(args []string) (int, error) {
	if len(args) != 1 {
		return 1, sh.write(&sh.stderr, "sleep: missing operand\n")
	}
	secs, err := strconv.ParseFloat(args[0], 64)
	if err != nil || secs < 0 {
		return 1, sh.write(&sh.stderr, "sleep: invalid time interval "+args[0]+"\n")
	}
	if !sleepCtx(sh.ctx, time.Duration(secs*float64(time.Second))) {
		return 0, sh.ctx.Err()
	}
	return 0, nil
}

func (sh *shell) head(args []string, out *bytes.Buffer) (int, error) {
	if len(args) != 3 || args[0] != "-c" {
		return 1, sh.write(&sh.stderr, "head: usage: head -c N FILE\n")
	}
	n, err := strconv.Atoi(args[1])
	if err != nil || n < 0 {
		return 1, sh.write(&sh.stderr, "head: invalid number of bytes: "+args[1]+"\n")
	}
	b := make([]byte, min(n, sh.limit+1))
	switch args[2] {
	case "/dev/zero":
	case "/dev/urandom":
		_, _ = rand.Read(b)
	default:
		return 1, sh.write(&sh.stderr, "head: cannot open '"+args[2]+"' for reading: No such file or directory\n")
	}
	return 0, sh.write(out, string(b))
}

// write appends to out, or fails once both streams together pass the cap.
func (sh *shell) write(out *bytes.Buffer, s string) error {
	if sh.stdout.Len()+sh.stderr.Len()+len(s) > sh.limit {
		return errOutputCap
	}
	out.WriteString(s)
	return nil
}
