package docscheck

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
)

// Index is what the module's own Go files declare, read with go/parser
// (nothing is compiled or type-checked): enough to tell whether a name a
// page cites exists.
type Index struct {
	// decls: package name -> its top-level names (test functions included).
	decls map[string]map[string]bool
	// types: package name -> type name -> its declaration.
	types map[string]map[string]*typeInfo
	// tests: every Test, Benchmark, Fuzz and Example function.
	tests map[string]bool
	// literals: the string literals of the module's non-test code (span
	// names, attribute keys), which a dotted code span may quote.
	literals map[string]bool
	// files: a Go file (slash path from the root) -> what it declares:
	// "Name" for a top-level name, "Type.Member" and ".Member" for a
	// method, and for a field of a type it declares.
	files map[string]map[string]bool
	// dirs: the module's directories that hold Go files.
	dirs map[string]bool
	// imports: the names the module's files import packages under
	// (virtual-kubelet's node, client-go's rest, ...).
	imports map[string]bool
	// comments: the Go comments that cite docs/ pages, by file and line.
	comments []Finding
}

// typeInfo is a declared type's members: fields, methods, interface
// methods, and the types it embeds (whose members it promotes).
type typeInfo struct {
	members map[string]bool
	embeds  []string
}

// LoadIndex parses every .go file under root, skipping the tools/
// modules (their own go.mod), testdata, hidden directories and vendor.
// A package's external test package (pool_test) counts as the package.
func LoadIndex(root string) (*Index, error) {
	ix := &Index{
		decls:    map[string]map[string]bool{},
		types:    map[string]map[string]*typeInfo{},
		tests:    map[string]bool{},
		literals: map[string]bool{},
		imports:  map[string]bool{},
		files:    map[string]map[string]bool{},
		dirs:     map[string]bool{},
	}
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			name := d.Name()
			if p != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "vendor" || hasGoMod(p)) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") {
			return nil
		}
		f, err := parser.ParseFile(fset, p, nil, parser.ParseComments|parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		ix.add(fset, filepath.ToSlash(rel), f, strings.HasSuffix(p, "_test.go"))
		return nil
	})
	return ix, err
}

func hasGoMod(dir string) bool {
	_, err := os.Stat(filepath.Join(dir, "go.mod"))
	return err == nil
}

func (ix *Index) add(fset *token.FileSet, rel string, f *ast.File, test bool) {
	pkg := strings.TrimSuffix(f.Name.Name, "_test")
	declared := map[string]bool{}
	ix.files[rel] = declared
	ix.dirs[path.Dir(rel)] = true
	if ix.decls[pkg] == nil {
		ix.decls[pkg] = map[string]bool{}
		ix.types[pkg] = map[string]*typeInfo{}
	}
	for _, imp := range f.Imports {
		name := ""
		if imp.Name != nil {
			name = imp.Name.Name
		} else if p, err := strconv.Unquote(imp.Path.Value); err == nil {
			name = path.Base(p)
		}
		ix.imports[name] = true
	}
	for _, decl := range f.Decls {
		switch d := decl.(type) {
		case *ast.FuncDecl:
			if d.Recv == nil {
				declared[d.Name.Name] = true
				ix.decls[pkg][d.Name.Name] = true
				if test && isTestName(d.Name.Name) {
					ix.tests[d.Name.Name] = true
				}
				continue
			}
			if len(d.Recv.List) > 0 {
				recv := recvName(d.Recv.List[0].Type)
				declared[recv+"."+d.Name.Name] = true
				declared["."+d.Name.Name] = true
				ix.typ(pkg, recv).members[d.Name.Name] = true
			}
		case *ast.GenDecl:
			for _, spec := range d.Specs {
				switch s := spec.(type) {
				case *ast.TypeSpec:
					declared[s.Name.Name] = true
					ix.decls[pkg][s.Name.Name] = true
					for _, m := range ix.addType(ix.typ(pkg, s.Name.Name), s.Type) {
						declared[s.Name.Name+"."+m] = true
						declared["."+m] = true
					}
				case *ast.ValueSpec:
					for _, n := range s.Names {
						declared[n.Name] = true
						ix.decls[pkg][n.Name] = true
					}
				}
			}
		}
	}
	ast.Inspect(f, func(n ast.Node) bool {
		if test {
			return false // a test's strings are no names the code emits
		}
		if lit, ok := n.(*ast.BasicLit); ok && lit.Kind == token.STRING {
			if s, err := strconv.Unquote(lit.Value); err == nil {
				ix.literals[s] = true
			}
		}
		return true
	})
	for _, cg := range f.Comments {
		for _, c := range cg.List {
			for _, m := range docPathRE.FindAllStringSubmatch(c.Text, -1) {
				ix.comments = append(ix.comments, Finding{File: rel, Line: fset.Position(c.Pos()).Line, What: m[1]})
			}
		}
	}
}

func (ix *Index) typ(pkg, name string) *typeInfo {
	t := ix.types[pkg][name]
	if t == nil {
		t = &typeInfo{members: map[string]bool{}}
		ix.types[pkg][name] = t
	}
	return t
}

// addType records a struct's fields and embedded types, or an
// interface's methods and embedded interfaces, and returns the names it
// declares (an embedded type's too: it is a field).
func (ix *Index) addType(t *typeInfo, expr ast.Expr) []string {
	var fields *ast.FieldList
	switch e := expr.(type) {
	case *ast.StructType:
		fields = e.Fields
	case *ast.InterfaceType:
		fields = e.Methods
	default:
		return nil
	}
	var names []string
	for _, f := range fields.List {
		if len(f.Names) == 0 {
			t.embeds = append(t.embeds, recvName(f.Type))
			names = append(names, recvName(f.Type))
		}
		for _, n := range f.Names {
			t.members[n.Name] = true
			names = append(names, n.Name)
		}
	}
	return names
}

// recvName is the bare type name of a receiver or embedded field:
// *T, T[K], pkg.T and *pkg.T all give T.
func recvName(e ast.Expr) string {
	switch x := e.(type) {
	case *ast.StarExpr:
		return recvName(x.X)
	case *ast.IndexExpr:
		return recvName(x.X)
	case *ast.IndexListExpr:
		return recvName(x.X)
	case *ast.SelectorExpr:
		return x.Sel.Name
	case *ast.Ident:
		return x.Name
	}
	return ""
}

func isTestName(name string) bool {
	for _, prefix := range []string{"Test", "Benchmark", "Fuzz", "Example"} {
		if rest, ok := strings.CutPrefix(name, prefix); ok && (rest == "" || !isLower(rest[0])) {
			return true
		}
	}
	return false
}

func isLower(b byte) bool { return 'a' <= b && b <= 'z' }

// hasMember reports whether type name of package pkg ("" for any
// package) has member, declared or promoted through an embedded type of
// the module.
func (ix *Index) hasMember(pkg, name, member string) bool {
	return ix.memberIn(pkg, name, member, map[string]bool{})
}

func (ix *Index) memberIn(pkg, name, member string, seen map[string]bool) bool {
	for p, types := range ix.types {
		if pkg != "" && p != pkg {
			continue
		}
		t := types[name]
		if t == nil || seen[p+"."+name] {
			continue
		}
		seen[p+"."+name] = true
		if t.members[member] {
			return true
		}
		for _, e := range t.embeds {
			if e == member || ix.memberIn("", e, member, seen) {
				return true
			}
		}
	}
	return false
}

// isType reports whether any package of the module declares a type name.
func (ix *Index) isType(name string) bool {
	for _, types := range ix.types {
		if _, ok := types[name]; ok {
			return true
		}
	}
	return false
}
