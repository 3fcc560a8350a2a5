package main

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// owned reports whether gen owns path (slash-separated, relative to the root): everything
// under kernels/out, and kernels/abi/z*.go. Owned files that gen no longer renders are
// deleted, so a dropped target or family cannot linger.
func owned(path string) bool {
	if strings.HasPrefix(path, outDir+"/") {
		return true
	}
	dir, base := filepath.ToSlash(filepath.Dir(path)), filepath.Base(path)
	return dir == abiDir && strings.HasPrefix(base, "z") && strings.HasSuffix(base, ".go")
}

// ownedOnDisk lists the owned files that exist under root.
func ownedOnDisk(root string) ([]string, error) {
	var out []string
	for _, dir := range []string{outDir, abiDir} {
		err := filepath.WalkDir(filepath.Join(root, dir), func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				if os.IsNotExist(err) {
					return nil
				}
				return err
			}
			if d.IsDir() {
				return nil
			}
			rel, err := filepath.Rel(root, p)
			if err != nil {
				return err
			}
			if rel = filepath.ToSlash(rel); owned(rel) {
				out = append(out, rel)
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// writeTree deletes what gen owns, then writes files.
func writeTree(root string, files []File) error {
	old, err := ownedOnDisk(root)
	if err != nil {
		return err
	}
	for _, p := range old {
		if err := os.Remove(filepath.Join(root, p)); err != nil {
			return err
		}
	}
	if err := os.RemoveAll(filepath.Join(root, outDir)); err != nil {
		return err
	}
	for _, f := range files {
		p := filepath.Join(root, filepath.FromSlash(f.Path))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, f.Data, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// compareTree returns one line per difference between files and the tree under root:
// a file that differs, is missing, or is owned by gen but no longer rendered.
func compareTree(root string, files []File) ([]string, error) {
	var diffs []string
	want := map[string]bool{}
	for _, f := range files {
		want[f.Path] = true
		got, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(f.Path)))
		switch {
		case os.IsNotExist(err):
			diffs = append(diffs, f.Path+": missing")
		case err != nil:
			return nil, err
		case !bytes.Equal(got, f.Data):
			diffs = append(diffs, fmt.Sprintf("%s: differs from a fresh render (first difference at line %d)", f.Path, firstDiffLine(got, f.Data)))
		}
	}
	old, err := ownedOnDisk(root)
	if err != nil {
		return nil, err
	}
	for _, p := range old {
		if !want[p] {
			diffs = append(diffs, p+": owned by gen but no longer rendered (stale)")
		}
	}
	return diffs, nil
}

func firstDiffLine(a, b []byte) int {
	line := 1
	for i := 0; i < len(a) && i < len(b); i++ {
		if a[i] != b[i] {
			return line
		}
		if a[i] == '\n' {
			line++
		}
	}
	return line
}
