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
// its tests included) into a fresh module in a temporary directory, as a
// user would copy it into their own, and runs go build and go vet there,
// outside the workspace (GOWORK=off; GOFLAGS=-mod=mod, so that the go
// command adds the requirements the copies need, from the module cache or
// GOPROXY, and -trimpath, so that the build cache serves later runs). The
// fresh module names rategate's modules by replace directives to this
// repository, and pins the third-party modules at this module's versions.
// All the copies share the one fresh module, each in a directory of its
// own: two go commands build and vet them all, in parallel. An import of an
// internal/ package fails the build ("use of internal package ... not
// allowed"); the test also names such imports itself.
func TestStandalone(t *testing.T) {
	if testing.Short() {
		t.Skip("builds every example in a module of its own: skipped with -short")
	}
	goCmd, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command on PATH")
	}
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	mains, err := filepath.Glob("*/main.go")
	if err != nil || len(mains) == 0 {
		t.Fatalf("no example found (%v)", err)
	}
	dir := t.TempDir()
	for _, m := range mains {
		name := filepath.Dir(m)
		if err := os.Mkdir(filepath.Join(dir, name), 0o755); err != nil {
			t.Fatal(err)
		}
		copyGoFiles(t, name, filepath.Join(dir, name))
	}
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte(freshGoMod(t, goCmd, root)), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"build", "./..."}, {"vet", "./..."}} {
		cmd := exec.Command(goCmd, args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod -trimpath")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("go %s in a fresh module holding a copy of each example: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

// freshGoMod returns the go.mod of the copies: replace directives to
// rategate's modules in root, and this module's third-party requirements at
// their versions.
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
	b.WriteString("module example.com/copies\n\ngo 1.25\n\n")
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
