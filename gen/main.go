// Command gen renders every kernel variant and the Go ABI files from the Target and Spec
// tables in package kernels, after validating both tables.
//
//	go run ./gen            (or `go generate ./...`) rewrite everything gen owns
//	go run ./gen -check     exit 1, naming the files, if the committed output is stale
//
// gen owns kernels/out (wholesale: it deletes it before writing) and kernels/abi/z*.go,
// and writes the files the format tables render (see tables.go).
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
)

func main() {
	root := flag.String("root", "", "repository root (default: the directory holding go.mod, searched upward)")
	check := flag.Bool("check", false, "compare instead of writing; exit 1 listing stale files")
	flag.Parse()
	if err := run(*root, *check); err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
}

func run(root string, check bool) error {
	if root == "" {
		r, err := findRoot()
		if err != nil {
			return err
		}
		root = r
	}
	files, err := renderAll(root)
	if err != nil {
		return err
	}
	if check {
		diffs, err := compareTree(root, files)
		if err != nil {
			return err
		}
		if len(diffs) > 0 {
			for _, d := range diffs {
				fmt.Fprintln(os.Stderr, d)
			}
			return errors.New("generated files are stale: run `go generate ./...` and commit the result")
		}
		return nil
	}
	return writeTree(root, files)
}

// findRoot walks up from the working directory to the directory holding go.mod.
func findRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod above the working directory: run gen inside the repository or pass -root")
		}
		dir = parent
	}
}
