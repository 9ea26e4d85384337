package sim

import (
	"archive/tar"
	"cmp"
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
)

// tar is the two forms kubectl cp runs: "tar cf - PATH..." writes a tar
// stream of the PATHs to stdout (names as given, less a leading "/", as
// GNU tar writes them); "tar xmf - [-C DIR]" unpacks stdin into DIR. Only
// directories and regular files are carried; a name that would leave DIR
// is refused.
func (st *stream) tar(args []string) int {
	var create, extract bool
	dir, rest := "", []string{}
	for i := 0; i < len(args); i++ {
		switch a := args[i]; {
		case a == "-C" && i+1 < len(args):
			dir = args[i+1]
			i++
		case strings.HasPrefix(a, "--"): // --no-same-owner, --no-same-permissions
		case strings.Contains(strings.TrimPrefix(a, "-"), "f") && len(rest) == 0 && !create && !extract:
			flags := strings.TrimPrefix(a, "-")
			create, extract = strings.Contains(flags, "c"), strings.Contains(flags, "x")
			if i+1 >= len(args) || args[i+1] != "-" {
				return st.fail(2, "tar: only the archive - (stdin or stdout) is supported")
			}
			i++
		default:
			rest = append(rest, a)
		}
	}
	switch {
	case create && len(rest) > 0:
		return st.tarCreate(rest)
	case extract:
		return st.tarExtract(dir)
	}
	return st.fail(2, "tar: want cf - PATH... or xmf - [-C DIR]")
}

func (st *stream) tarCreate(paths []string) int {
	tw := tar.NewWriter(st.stdout)
	for _, p := range paths {
		base := st.host(p)
		name := strings.TrimLeft(path.Clean(p), "/")
		err := filepath.WalkDir(base, func(hp string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(base, hp)
			return st.tarEntry(tw, hp, path.Join(name, filepath.ToSlash(rel)), d)
		})
		if err != nil {
			return st.fail(2, "tar: %s: %v", p, err)
		}
	}
	if err := tw.Close(); err != nil {
		return 2
	}
	return 0
}

func (st *stream) tarEntry(tw *tar.Writer, hp, name string, d fs.DirEntry) error {
	if d.Type()&fs.ModeType != 0 && !d.IsDir() {
		return nil // neither a file nor a directory
	}
	fi, err := d.Info()
	if err != nil {
		return err
	}
	hdr, err := tar.FileInfoHeader(fi, "")
	if err != nil {
		return err
	}
	hdr.Name = name
	if d.IsDir() {
		hdr.Name += "/"
	}
	if err := tw.WriteHeader(hdr); err != nil {
		return err
	}
	if d.IsDir() {
		return nil
	}
	f, err := os.Open(hp)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = io.Copy(tw, f)
	return err
}

func (st *stream) tarExtract(dir string) int {
	base := st.host(cmp.Or(dir, "."))
	tr := tar.NewReader(st.stdin)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return 0
		}
		if err != nil {
			return st.fail(2, "tar: %v", err)
		}
		name := filepath.FromSlash(strings.TrimLeft(hdr.Name, "/"))
		if !filepath.IsLocal(name) {
			return st.fail(2, "tar: %s: refusing a name outside the directory", hdr.Name)
		}
		target := filepath.Join(base, name)
		switch hdr.Typeflag {
		case tar.TypeDir:
			err = os.MkdirAll(target, 0o755)
		case tar.TypeReg:
			err = st.tarFile(target, tr)
		}
		if err != nil {
			return st.fail(2, "tar: %s: %v", hdr.Name, err)
		}
	}
}

func (st *stream) tarFile(target string, r io.Reader) error {
	if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
		return err
	}
	f, err := os.Create(target)
	if err != nil {
		return err
	}
	_, err = io.Copy(f, r)
	return errors.Join(err, f.Close())
}

// ctxWriter fails every write once ctx ends, so that a killed command
// stops writing at once.
type ctxWriter struct {
	ctx context.Context
	w   io.Writer
}

func (c ctxWriter) Write(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.w.Write(p)
}
