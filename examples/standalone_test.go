// Package examples_test checks that every example stands on its own: it
// imports only rategate's public packages, the standard library and public
// modules, so that a user who copies its directory into a module of their
// own can build it.
package examples_test

import (
	"encoding/json"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestStandalone copies each example (every directory here with a main.go,
// its tests included) into a fresh module of its own in a temporary
// directory, as a user would, and runs go build and go vet there, outside
// the workspace (GOWORK=off, GOFLAGS=-mod=mod: the go command adds the
// requirements the copy needs, from the module cache or GOPROXY). The
// fresh module names rategate's modules by replace directives to this
// repository, and pins the third-party modules at this module's versions.
// An import of an internal/ package fails the build ("use of internal
// package ... not allowed"); the test also names such imports itself.
func TestStandalone(t *testing.T) {
	if testing.Short() {
		t.Skip("builds nine modules: skipped with -short")
	}
	goCmd, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command on PATH")
	}
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	gomod := freshGoMod(t, goCmd, root)
	dirs, err := filepath.Glob("*/main.go")
	if err != nil || len(dirs) == 0 {
		t.Fatalf("no example found (%v)", err)
	}
	for _, mainFile := range dirs {
		name := filepath.Dir(mainFile)
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			copyGoFiles(t, name, dir)
			if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte(strings.Replace(gomod, "NAME", name, 1)), 0o644); err != nil {
				t.Fatal(err)
			}
			for _, args := range [][]string{{"build", "-o", os.DevNull, "."}, {"vet", "."}} {
				cmd := exec.Command(goCmd, args...)
				cmd.Dir = dir
				cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod")
				if out, err := cmd.CombinedOutput(); err != nil {
					t.Errorf("go %s in a copy of %s: %v\n%s", strings.Join(args, " "), name, err, out)
				}
			}
		})
	}
}

// freshGoMod returns the go.mod of a copied example, with NAME for its
// directory's name: replace directives to rategate's modules in root, and
// this module's third-party requirements at their versions.
func freshGoMod(t *testing.T, goCmd, root string) string {
	t.Helper()
	out, err := exec.Command(goCmd, "mod", "edit", "-json").Output()
	if err != nil {
		t.Fatalf("go mod edit -json: %v", err)
	}
	var mod struct {
		Require []struct{ Path, Version string }
		Replace []struct{ Old, New struct{ Path string } }
	}
	if err := json.Unmarshal(out, &mod); err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	b.WriteString("module example.com/NAME\n\ngo 1.25\n\n")
	for _, r := range mod.Require {
		if !strings.HasPrefix(r.Path, "github.com/rategate/rategate") {
			b.WriteString("require " + r.Path + " " + r.Version + "\n")
		}
	}
	for _, r := range mod.Replace { // each to a directory of this repository
		b.WriteString("replace " + r.Old.Path + " => " + strconv.Quote(filepath.Join(root, "examples", r.New.Path)) + "\n")
	}
	return b.String()
}

// copyGoFiles copies the Go files of directory from into to, and reports
// each import of an internal package.
func copyGoFiles(t *testing.T, from, to string) {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(from, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		parsed, err := parser.ParseFile(token.NewFileSet(), f, src, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range parsed.Imports {
			if path, _ := strconv.Unquote(imp.Path.Value); strings.Contains("/"+path+"/", "/internal/") {
				t.Errorf("%s imports %s: a copy of the example cannot", f, path)
			}
		}
		if err := os.WriteFile(filepath.Join(to, filepath.Base(f)), src, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
