package main

import (
	"encoding/json"
	"errors"
	"io"
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/strata-hip/strata"

// importRules is DESIGN.md's import direction as data. For every package of the module,
// the first rule whose pattern matches lists what it may import directly besides the
// standard library: module packages (relative paths) and outside modules (full paths).
// A pattern ending in "/..." matches the package and everything below it; "*" allows any
// import. Never allowed anywhere: gen and parity (nothing imports them).
var importRules = []struct {
	pkg   string
	allow []string
}{
	{"kernels", nil},     // data, standard library only
	{"kernels/abi", nil}, // generated; loaded by runtime users without pulling in gen or kernels
	{"quant/...", []string{"quant/..."}},
	{"gguf/...", []string{"gguf/..."}},
	{"gen", []string{"kernels", "github.com/dave/jennifer/..."}}, // never what it writes
	{"runtime/gpu", []string{"github.com/ebitengine/purego"}},
	{"runtime/hip", []string{"runtime/gpu", "github.com/ebitengine/purego"}},
	{"runtime/cuda", []string{"runtime/gpu", "github.com/ebitengine/purego"}},
	{"parity/...", []string{"parity/...", "kernels", "kernels/abi", "quant/...", "runtime/..."}},
	{"model/...", []string{"model/...", "quant/...", "gguf/...", "runtime/gpu", "kernels/abi"}},
	{"models/...", nil}, // embedded model files (go:embed): standard library only
	{"cmd/...", []string{"*"}},
	{"tools/...", []string{"*"}}, // developer tools: anything but gen and parity
	{"bench/...", []string{"*"}}, // benchmark drivers and their result tooling, likewise
}

var neverImported = []string{"gen", "parity/..."}

func matchPattern(pattern, path string) bool {
	if pattern == "*" {
		return true
	}
	if base, ok := strings.CutSuffix(pattern, "/..."); ok {
		return path == base || strings.HasPrefix(path, base+"/")
	}
	return path == pattern
}

type listedPackage struct {
	ImportPath string
	Name       string
	Imports    []string
	Standard   bool
	Module     *struct{ Path string }
}

// modulePackages runs `go list -deps` over the module and returns its own packages.
func modulePackages(t *testing.T) []listedPackage {
	t.Helper()
	cmd := exec.Command("go", "list", "-deps", "-json=ImportPath,Name,Imports,Standard,Module", "./...")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			t.Fatalf("go list: %v\n%s", err, ee.Stderr)
		}
		t.Fatalf("go list: %v", err)
	}
	var pkgs []listedPackage
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for {
		var p listedPackage
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		if p.Module != nil && p.Module.Path == module {
			pkgs = append(pkgs, p)
		}
	}
	if len(pkgs) == 0 {
		t.Fatal("go list found no packages of the module")
	}
	return pkgs
}

// checkImports returns one message per import that breaks the rules.
func checkImports(pkgs []listedPackage, isStd func(string) bool) []string {
	var bad []string
	for _, p := range pkgs {
		rel := strings.TrimPrefix(strings.TrimPrefix(p.ImportPath, module), "/")
		if rel == "" {
			rel = "."
		}
		if p.Name == "runtime" {
			bad = append(bad, rel+": package named runtime shadows the standard library's; rename it")
		}
		ruleIdx := -1
		for i, r := range importRules {
			if matchPattern(r.pkg, rel) {
				ruleIdx = i
				break
			}
		}
		if ruleIdx < 0 {
			bad = append(bad, rel+": no import rule covers this package; add one to importRules in gen/deps_test.go (see DESIGN.md)")
			continue
		}
		for _, imp := range p.Imports {
			if isStd(imp) {
				continue
			}
			name := imp
			if after, ok := strings.CutPrefix(imp, module+"/"); ok {
				name = after
				never := false
				for _, n := range neverImported {
					never = never || matchPattern(n, name)
				}
				if never {
					bad = append(bad, rel+" imports "+name+": nothing may import gen or parity")
					continue
				}
			}
			ok := false
			for _, a := range importRules[ruleIdx].allow {
				ok = ok || matchPattern(a, name)
			}
			if !ok {
				bad = append(bad, rel+" imports "+name+": not allowed by the rule for "+importRules[ruleIdx].pkg+" (DESIGN.md, import direction)")
			}
		}
	}
	return bad
}

func TestImportRules(t *testing.T) {
	pkgs := modulePackages(t)
	std := map[string]bool{}
	cmd := exec.Command("go", "list", "std")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list std: %v", err)
	}
	for _, p := range strings.Fields(string(out)) {
		std[p] = true
	}
	for _, msg := range checkImports(pkgs, func(p string) bool { return std[p] }) {
		t.Error(msg)
	}
}

// The checker must flag each kind of violation (a rule table that allows everything
// would otherwise pass silently).
func TestImportRulesCatchViolations(t *testing.T) {
	std := func(p string) bool { return !strings.Contains(p, ".") }
	pkgs := []listedPackage{
		{ImportPath: module + "/kernels", Name: "kernels", Imports: []string{"fmt", module + "/quant"}},
		{ImportPath: module + "/gen", Name: "main", Imports: []string{module + "/kernels/abi"}},
		{ImportPath: module + "/model", Name: "model", Imports: []string{module + "/parity"}},
		{ImportPath: module + "/runtime/hip", Name: "hip", Imports: []string{"github.com/google/go-cmp/cmp"}},
		{ImportPath: module + "/runtime/x", Name: "runtime"},
		{ImportPath: module + "/model/ok", Name: "ok", Imports: []string{"strings", module + "/quant", module + "/kernels/abi"}},
	}
	got := checkImports(pkgs, std)
	want := []string{"kernels imports quant", "gen imports kernels/abi", "model imports parity", "runtime/hip imports github.com/google/go-cmp/cmp",
		"runtime/x: package named runtime", "runtime/x: no import rule"}
	for _, w := range want {
		found := false
		for _, g := range got {
			found = found || strings.HasPrefix(g, w)
		}
		if !found {
			t.Errorf("no violation reported starting %q; got %q", w, got)
		}
	}
	if len(got) != len(want) {
		t.Errorf("got %d violations, want %d: %q", len(got), len(want), got)
	}
}
