package rategate

import (
	"go/ast"
	"go/doc"
	"go/doc/comment"
	"go/parser"
	"go/token"
	"io/fs"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode"
)

// The documents whose links TestDocLinks checks: every relative link and
// #anchor in them must resolve.
func docFiles(t *testing.T) []string {
	files := []string{"README.md", "bench/README.md"}
	more, err := filepath.Glob("docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	return append(files, more...)
}

var (
	// [text](target) and [text]: target, outside code.
	inlineLink = regexp.MustCompile(`\]\(([^()\s]+)(?:\s+"[^"]*")?\)`)
	refLink    = regexp.MustCompile(`(?m)^\s*\[[^\]]+\]:\s*(\S+)`)
	codeSpan   = regexp.MustCompile("`[^`]*`")
	htmlAnchor = regexp.MustCompile(`<a\s+(?:name|id)="([^"]+)"`)
)

// TestDocLinks: every relative link in the user docs points at a file or
// directory of the repository, and every #anchor at a heading (or an HTML
// anchor) of its target, as GitHub renders them.
func TestDocLinks(t *testing.T) {
	anchors := map[string]map[string]bool{} // by file
	anchorsOf := func(file string) map[string]bool {
		if a, ok := anchors[file]; ok {
			return a
		}
		a := headingAnchors(t, file)
		anchors[file] = a
		return a
	}
	for _, file := range docFiles(t) {
		for _, link := range markdownLinks(t, file) {
			if u, err := url.Parse(link); err != nil || u.Scheme != "" || strings.HasPrefix(link, "//") {
				continue // an absolute URL: not ours to check offline
			}
			target, frag, _ := strings.Cut(link, "#")
			target, _ = url.PathUnescape(target)
			resolved := file
			if target != "" {
				resolved = path.Join(path.Dir(file), target)
				if _, err := os.Stat(resolved); err != nil {
					t.Errorf("%s: link %q: %s does not exist", file, link, resolved)
					continue
				}
			}
			if frag != "" && !anchorsOf(resolved)[frag] {
				t.Errorf("%s: link %q: no heading #%s in %s", file, link, frag, resolved)
			}
		}
	}
}

// markdownLinks returns the link targets of a markdown file, outside fenced
// code blocks and code spans.
func markdownLinks(t *testing.T, file string) []string {
	var links []string
	for _, line := range proseLines(t, file) {
		line = codeSpan.ReplaceAllString(line, "")
		for _, m := range inlineLink.FindAllStringSubmatch(line, -1) {
			links = append(links, m[1])
		}
		for _, m := range refLink.FindAllStringSubmatch(line, -1) {
			links = append(links, m[1])
		}
	}
	return links
}

// proseLines returns a markdown file's lines outside fenced code blocks.
func proseLines(t *testing.T, file string) []string {
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	fenced := false
	for line := range strings.SplitSeq(string(data), "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		if !fenced {
			lines = append(lines, line)
		}
	}
	return lines
}

// headingAnchors returns the anchors GitHub gives a markdown file's
// headings (lower case, punctuation dropped, spaces to hyphens, -1, -2...
// for repeats) and its HTML anchors. A file that is not markdown has none.
func headingAnchors(t *testing.T, file string) map[string]bool {
	anchors := map[string]bool{}
	if !strings.HasSuffix(file, ".md") {
		return anchors
	}
	seen := map[string]int{}
	for _, line := range proseLines(t, file) {
		for _, m := range htmlAnchor.FindAllStringSubmatch(line, -1) {
			anchors[m[1]] = true
		}
		text, ok := strings.CutPrefix(line, "#")
		if !ok {
			continue
		}
		text = strings.TrimLeft(text, "#")
		if !strings.HasPrefix(text, " ") {
			continue
		}
		slug := githubSlug(codeSpan.ReplaceAllStringFunc(strings.TrimSpace(text), func(s string) string { return strings.Trim(s, "`") }))
		if n := seen[slug]; n > 0 {
			anchors[slug+"-"+itoa(n)] = true
		} else {
			anchors[slug] = true
		}
		seen[slug]++
	}
	return anchors
}

func itoa(n int) string {
	if n < 10 {
		return string(rune('0' + n))
	}
	return itoa(n/10) + string(rune('0'+n%10))
}

// githubSlug is GitHub's heading anchor: lower case; letters, digits,
// hyphens, underscores and spaces kept (spaces become hyphens); everything
// else dropped.
func githubSlug(s string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(s) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

func TestGithubSlug(t *testing.T) {
	for in, want := range map[string]string{
		"Tests, properties, CI":                               "tests-properties-ci",
		"channel: a channel whose buffered items hold leases": "channel-a-channel-whose-buffered-items-hold-leases",
		"The 1.2× floor (x/time/rate)":                        "the-12-floor-xtimerate",
	} {
		if got := githubSlug(in); got != want {
			t.Errorf("githubSlug(%q) = %q, want %q", in, got, want)
		}
	}
}

// repoPackages returns the directories of the repository's packages
// (every directory with Go files, but testdata), each with whether it is in
// the root module: not below a directory with a go.mod of its own (the
// workspace's other modules).
func repoPackages(t *testing.T) map[string]bool {
	dirs := map[string]bool{}
	err := filepath.WalkDir(".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		if p != "." && (d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) {
			return filepath.SkipDir
		}
		if gos, _ := filepath.Glob(filepath.Join(p, "*.go")); len(gos) > 0 {
			dirs[p] = inRootModule(p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return dirs
}

// inRootModule reports whether directory p belongs to the root module.
func inRootModule(p string) bool {
	for ; p != "." && p != "/"; p = filepath.Dir(p) {
		if _, err := os.Stat(filepath.Join(p, "go.mod")); err == nil {
			return false
		}
	}
	return true
}

const modulePath = "github.com/rategate/rategate"

// TestGodocLinks: every [Name], [Type.Method] and [pkg.Name] doc link in
// the root module's documentation (exported or not, tests excluded)
// resolves: a name of its own package, or, for a package of this
// repository (the workspace's other modules too), a name that package
// declares. go/doc leaves a link to a missing name as
// plain text; this test does not.
func TestGodocLinks(t *testing.T) {
	pkgs := map[string]*doc.Package{} // by import path
	root := map[string]bool{}
	for dir, inRoot := range repoPackages(t) {
		fset := token.NewFileSet()
		matches, _ := filepath.Glob(filepath.Join(dir, "*.go"))
		var files []*ast.File
		for _, m := range matches {
			if strings.HasSuffix(m, "_test.go") {
				continue
			}
			f, err := parser.ParseFile(fset, m, nil, parser.ParseComments)
			if err != nil {
				t.Fatal(err)
			}
			files = append(files, f)
		}
		if len(files) == 0 {
			continue
		}
		ip := path.Join(modulePath, filepath.ToSlash(dir))
		p, err := doc.NewFromFiles(fset, files, ip, doc.AllDecls|doc.AllMethods|doc.PreserveAST)
		if err != nil {
			t.Fatal(err)
		}
		pkgs[ip], root[ip] = p, inRoot
	}
	for ip, p := range pkgs {
		if !root[ip] {
			continue // another module's: only a target of links
		}
		pr := p.Parser()
		lookup := pr.LookupSym
		var missing []string
		pr.LookupSym = func(recv, name string) bool {
			ok := lookup(recv, name)
			if !ok && (recv == "" || token.IsExported(recv)) && token.IsIdentifier(name) {
				missing = append(missing, strings.TrimPrefix(recv+"."+name, "."))
			}
			return ok
		}
		for _, text := range docTexts(p) {
			missing = missing[:0]
			d := pr.Parse(text)
			for _, name := range missing {
				t.Errorf("%s: doc link [%s] names nothing in the package", ip, name)
			}
			for _, l := range docLinks(d) {
				if l.ImportPath == ip || !strings.HasPrefix(l.ImportPath, modulePath) {
					continue
				}
				q, ok := pkgs[l.ImportPath]
				if !ok {
					t.Errorf("%s: doc link to %s, not a package of this repository", ip, l.ImportPath)
				} else if l.Name != "" && !declares(q, l.Recv, l.Name) {
					t.Errorf("%s: doc link [%s.%s] names nothing in %s", ip, path.Base(l.ImportPath), strings.TrimPrefix(l.Recv+"."+l.Name, "."), l.ImportPath)
				}
			}
		}
	}
}

// docTexts returns every doc comment of p.
func docTexts(p *doc.Package) []string {
	texts := []string{p.Doc}
	values := func(vs []*doc.Value) {
		for _, v := range vs {
			texts = append(texts, v.Doc)
		}
	}
	funcs := func(fs []*doc.Func) {
		for _, f := range fs {
			texts = append(texts, f.Doc)
		}
	}
	values(p.Consts)
	values(p.Vars)
	funcs(p.Funcs)
	for _, typ := range p.Types {
		texts = append(texts, typ.Doc)
		values(typ.Consts)
		values(typ.Vars)
		funcs(typ.Funcs)
		funcs(typ.Methods)
	}
	return texts
}

// docLinks returns the doc links of a parsed comment.
func docLinks(d *comment.Doc) []*comment.DocLink {
	var links []*comment.DocLink
	var walk func(text []comment.Text)
	walk = func(text []comment.Text) {
		for _, x := range text {
			switch x := x.(type) {
			case *comment.DocLink:
				links = append(links, x)
			case *comment.Link:
				walk(x.Text)
			case *comment.Italic, comment.Plain:
			}
		}
	}
	for _, b := range d.Content {
		switch b := b.(type) {
		case *comment.Paragraph:
			walk(b.Text)
		case *comment.Heading:
			walk(b.Text)
		case *comment.List:
			for _, it := range b.Items {
				for _, c := range it.Content {
					if p, ok := c.(*comment.Paragraph); ok {
						walk(p.Text)
					}
				}
			}
		}
	}
	return links
}

// declares reports whether p declares name (a method of recv, when recv is
// not empty).
func declares(p *doc.Package, recv, name string) bool {
	hasValue := func(vs []*doc.Value) bool {
		return slices.ContainsFunc(vs, func(v *doc.Value) bool { return slices.Contains(v.Names, name) })
	}
	hasFunc := func(fs []*doc.Func) bool {
		return slices.ContainsFunc(fs, func(f *doc.Func) bool { return f.Name == name })
	}
	if recv == "" && (hasValue(p.Consts) || hasValue(p.Vars) || hasFunc(p.Funcs)) {
		return true
	}
	for _, typ := range p.Types {
		if recv == "" && (typ.Name == name || hasValue(typ.Consts) || hasValue(typ.Vars) || hasFunc(typ.Funcs)) {
			return true
		}
		if recv == typ.Name && hasFunc(typ.Methods) {
			return true
		}
	}
	return false
}
