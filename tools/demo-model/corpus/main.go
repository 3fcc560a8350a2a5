// Command corpus assembles the training corpus of the embedded demo model from the Go
// installation that runs it: the .go files under $(go env GOROOT)/src, split into a
// training and a validation set by package (the validation packages are listed in
// heldOut), and records what it took in a manifest.
//
//	go run ./tools/demo-model/corpus [-out .dev/demo-corpus] [-manifest FILE]
//
// What is left out, and why:
//   - vendor/ trees: they hold code of other projects under their own licences;
//   - testdata/ trees: inputs to tests, often deliberately malformed;
//   - generated files ("// Code generated ... DO NOT EDIT." before the package clause):
//     tables and rewrite rules, which would crowd out hand-written code.
//
// Test files (_test.go) are kept: they are Go written by the Go authors under the same
// licence. The output is deterministic for a given Go installation: files are visited
// in lexical order and the gzip streams carry no time stamp.
package main

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strings"
)

// heldOut are the validation packages (directories relative to GOROOT/src; files directly
// in them, not in subdirectories). Chosen by hand: mid-sized, varied, and none of them a
// package that most other code imports, so the model's view of the core library stays whole.
var heldOut = []string{
	"archive/tar",
	"compress/bzip2",
	"container/ring",
	"encoding/csv",
	"go/printer",
	"hash/crc64",
	"image/gif",
	"index/suffixarray",
	"mime/multipart",
	"net/mail",
	"text/tabwriter",
}

// generated matches Go's convention for generated files (https://go.dev/s/generatedcode).
var generated = regexp.MustCompile(`(?m)^// Code generated .* DO NOT EDIT\.$`)

// doc is one line of the JSONL output.
type doc struct {
	Path string `json:"path"` // relative to GOROOT/src, slash-separated
	Text string `json:"text"`
}

// entry is one manifest row.
type entry struct {
	split, path string
	size        int
	sha         string
}

func main() {
	out := flag.String("out", ".dev/demo-corpus", "directory for train.jsonl.gz and valid.jsonl.gz")
	manifest := flag.String("manifest", "bench/results/2026-11-29-demo-model/corpus-manifest.tsv", "manifest file to write")
	flag.Parse()
	if err := run(*out, *manifest); err != nil {
		fmt.Fprintln(os.Stderr, "corpus:", err)
		os.Exit(1)
	}
}

func run(outDir, manifestPath string) error {
	goroot, version, err := goEnv()
	if err != nil {
		return err
	}
	src := filepath.Join(goroot, "src")
	held := map[string]bool{}
	for _, p := range heldOut {
		held[p] = true
	}
	seenHeld := map[string]bool{}

	var train, valid []doc
	var entries []entry
	skipped := map[string]int{}
	err = filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); n == "vendor" || n == "testdata" {
				skipped[n+"/ trees"]++
				return filepath.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() || !strings.HasSuffix(path, ".go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if isGenerated(b) {
			skipped["generated files"]++
			return nil
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		sum := sha256.Sum256(b)
		e := entry{split: "train", path: rel, size: len(b), sha: hex.EncodeToString(sum[:])}
		if pkg := filepath.ToSlash(filepath.Dir(rel)); held[pkg] {
			e.split = "valid"
			seenHeld[pkg] = true
			valid = append(valid, doc{rel, string(b)})
		} else {
			train = append(train, doc{rel, string(b)})
		}
		entries = append(entries, e)
		return nil
	})
	if err != nil {
		return err
	}
	for _, p := range heldOut {
		if !seenHeld[p] {
			return fmt.Errorf("held-out package %s has no files in %s (another Go version?)", p, src)
		}
	}
	if len(train) == 0 {
		return errors.New("no training files found under " + src)
	}
	if err := os.MkdirAll(outDir, 0o755); err != nil {
		return err
	}
	if err := writeJSONL(filepath.Join(outDir, "train.jsonl.gz"), train); err != nil {
		return err
	}
	if err := writeJSONL(filepath.Join(outDir, "valid.jsonl.gz"), valid); err != nil {
		return err
	}
	var buf bytes.Buffer
	writeManifest(&buf, version, entries, skipped)
	if err := os.MkdirAll(filepath.Dir(manifestPath), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(manifestPath, buf.Bytes(), 0o644); err != nil {
		return err
	}
	// A copy travels with the corpus so that the training run can record which corpus it saw.
	if err := os.WriteFile(filepath.Join(outDir, "manifest.tsv"), buf.Bytes(), 0o644); err != nil {
		return err
	}
	tb, vb := 0, 0
	for _, e := range entries {
		if e.split == "train" {
			tb += e.size
		} else {
			vb += e.size
		}
	}
	fmt.Printf("%s: train %d files %d bytes, valid %d files %d bytes -> %s\n", version, len(train), tb, len(valid), vb, outDir)
	return nil
}

// isGenerated reports whether the generated-code comment appears before the package clause.
func isGenerated(b []byte) bool {
	head := b
	if bytes.HasPrefix(b, []byte("package ")) {
		head = nil
	} else if i := bytes.Index(b, []byte("\npackage ")); i >= 0 {
		head = b[:i]
	}
	return generated.Match(head)
}

func goEnv() (goroot, version string, err error) {
	out, err := exec.Command("go", "env", "GOROOT").Output()
	if err != nil {
		return "", "", fmt.Errorf("go env GOROOT: %w", err)
	}
	goroot = strings.TrimSpace(string(out))
	out, err = exec.Command("go", "version").Output()
	if err != nil {
		return "", "", fmt.Errorf("go version: %w", err)
	}
	return goroot, strings.TrimSpace(string(out)), nil
}

func writeJSONL(path string, docs []doc) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	zw, err := gzip.NewWriterLevel(f, gzip.BestCompression)
	if err != nil {
		f.Close()
		return err
	}
	bw := bufio.NewWriter(zw)
	enc := json.NewEncoder(bw)
	enc.SetEscapeHTML(false)
	for _, d := range docs {
		if err := enc.Encode(d); err != nil {
			f.Close()
			return err
		}
	}
	if err := bw.Flush(); err != nil {
		f.Close()
		return err
	}
	if err := zw.Close(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func writeManifest(w *bytes.Buffer, version string, entries []entry, skipped map[string]int) {
	fmt.Fprintf(w, "# corpus of the strata demo model, written by `go run ./tools/demo-model/corpus`\n")
	fmt.Fprintf(w, "# %s (GOOS/GOARCH of the tool: %s/%s)\n", version, runtime.GOOS, runtime.GOARCH)
	fmt.Fprintf(w, "# source: $(go env GOROOT)/src, *.go, without vendor/ and testdata/ trees and generated files\n")
	fmt.Fprintf(w, "# held-out (valid) packages: %s\n", strings.Join(heldOut, " "))
	keys := make([]string, 0, len(skipped))
	for k := range skipped {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(w, "# skipped %s: %d\n", k, skipped[k])
	}
	n := map[string]int{}
	bytesBy := map[string]int{}
	for _, e := range entries {
		n[e.split]++
		bytesBy[e.split] += e.size
	}
	for _, s := range []string{"train", "valid"} {
		fmt.Fprintf(w, "# %s: %d files, %d bytes\n", s, n[s], bytesBy[s])
	}
	fmt.Fprintf(w, "split\tpath\tbytes\tsha256\n")
	for _, e := range entries {
		fmt.Fprintf(w, "%s\t%s\t%d\t%s\n", e.split, e.path, e.size, e.sha)
	}
}
