package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestTableFiles renders the tables and compares them with the committed files (gen's
// render-all writes them; TestGenerated covers them too, this names the table step).
func TestTableFiles(t *testing.T) {
	files, err := tableFiles(root)
	if err != nil || len(files) != 2 {
		t.Fatalf("tableFiles: %d files, %v", len(files), err)
	}
	for _, f := range files {
		old, err := os.ReadFile(filepath.Join(root, f.Path))
		if err != nil {
			t.Fatalf("%v; run: go generate ./... and commit", err)
		}
		if !bytes.Equal(old, f.Data) {
			t.Errorf("%s differs from what gen renders from %s; run: go generate ./... and commit", f.Path, tablesDir)
		}
	}
	if !strings.HasPrefix(string(files[1].Data), tablesCHeader+"\n") {
		t.Errorf("%s does not start with the generated-file line", files[1].Path)
	}
}

// TestTableValidation corrupts a copy of the tables in several ways and checks that each
// is refused with an error naming the file and line.
func TestTableValidation(t *testing.T) {
	src := filepath.Join(root, tablesDir)
	cases := []struct {
		name, file, from, to, want string
	}{
		{"short", "iq3s_grid.txt", "0x01010103\n", "", "511 entries, want 512"},
		{"upper-case", "iq3s_grid.txt", "0x01010103\n", "0x0101010B\n", "iq3s_grid.txt:3"},
		{"bad byte", "iq3xxs_grid.txt", "0x04040414\n", "0x04040415\n", "iq3xxs_grid.txt:3: entry 1"},
		{"duplicate", "iq2xs_grid.txt", "0x080808080808082b\n", "0x0808080808080808\n", "both"},
		{"parity", "ksigns_iq2xs.txt", "0x81\n", "0x01\n", "ksigns_iq2xs.txt:3"},
		{"gpu form", "iq1s_grid_gpu.txt", "0x00000002\n", "0x00000001\n", "iq1s_grid_gpu.txt:3: entry 1"},
		{"delta", "iq1m_delta.txt", "0x3e000000\n0x3e000000\n", "0x3e000000\n0x3e800000\n", "want 0.125"},
		{"too many", "kmask_iq2xs.txt", "0x80\n", "0x80\n0x80\n", "more than 8"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			root := t.TempDir()
			dst := filepath.Join(root, tablesDir)
			if err := os.MkdirAll(dst, 0o755); err != nil {
				t.Fatal(err)
			}
			ents, err := os.ReadDir(src)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range ents {
				data, err := os.ReadFile(filepath.Join(src, e.Name()))
				if err != nil {
					t.Fatal(err)
				}
				if e.Name() == c.file {
					if !strings.Contains(string(data), c.from) {
						t.Fatalf("%s does not contain %q", c.file, c.from)
					}
					data = []byte(strings.Replace(string(data), c.from, c.to, 1))
				}
				if err := os.WriteFile(filepath.Join(dst, e.Name()), data, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			_, err = tableFiles(root)
			if err == nil || !strings.Contains(err.Error(), c.file) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got error %v, want one naming %s and %q", err, c.file, c.want)
			}
		})
	}
}

// TestTablesHeaderCompiles compiles strata_tables.h as host C++ (STRATA_CONSTANT empty)
// with a program that prints a checksum of every table, and compares the checksums with
// the parsed text files: the C values are the Go values. Skips without clang-19 or c++.
func TestTablesHeaderCompiles(t *testing.T) {
	cxx := ""
	for _, c := range []string{"clang++-19", "clang-19", "c++"} {
		if p, err := exec.LookPath(c); err == nil {
			cxx = p
			break
		}
	}
	if cxx == "" {
		t.Skip("no C++ compiler (clang-19 or c++) on PATH")
	}
	files, err := tableFiles(root)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "strata_tables.h"), files[1].Data, 0o644); err != nil {
		t.Fatal(err)
	}
	var src, want strings.Builder
	src.WriteString("#define STRATA_CONSTANT\n#include \"strata_tables.h\"\n#include <cstdio>\n#include <cstring>\nint main() {\n")
	for _, s := range tableSpecs {
		data, err := os.ReadFile(filepath.Join(root, tablesDir, s.file))
		if err != nil {
			t.Fatal(err)
		}
		vals, _, err := parseTable(s, data)
		if err != nil {
			t.Fatal(err)
		}
		var sum uint64
		for i, v := range vals {
			sum = sum*1099511628211 + v + uint64(i)
		}
		fmt.Fprintf(&want, "%s %d %d\n", s.cName, len(vals), sum)
		fmt.Fprintf(&src, "  { unsigned long long sum = 0; for (unsigned i = 0; i < sizeof %s / sizeof %s[0]; i++) {\n", s.cName, s.cName)
		if s.float {
			fmt.Fprintf(&src, "    unsigned int b; std::memcpy(&b, &%s[i], 4); unsigned long long v = b;\n", s.cName)
		} else {
			fmt.Fprintf(&src, "    unsigned long long v = %s[i];\n", s.cName)
		}
		fmt.Fprintf(&src, "    sum = sum*1099511628211ull + v + i; }\n  std::printf(\"%s %%u %%llu\\n\", (unsigned)(sizeof %s / sizeof %s[0]), sum); }\n", s.cName, s.cName, s.cName)
	}
	src.WriteString("  return 0;\n}\n")
	if err := os.WriteFile(filepath.Join(dir, "check.cpp"), []byte(src.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "check")
	out, err := exec.Command(cxx, "-x", "c++", "-std=c++17", "-Wall", "-Werror", "-o", bin, filepath.Join(dir, "check.cpp"), "-lstdc++").CombinedOutput()
	if err != nil {
		t.Fatalf("%s does not compile strata_tables.h: %v\n%s", cxx, err, out)
	}
	got, err := exec.Command(bin).Output()
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want.String() {
		t.Fatalf("C tables differ from the text files:\nC:\n%s\nwant:\n%s", got, want.String())
	}
}
