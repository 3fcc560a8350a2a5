package parity

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/strata-hip/strata/kernels/abi"
)

// TestMmvqHostSim runs mmvq's NVIDIA kernels (the default ones and the one-column decode-
// geometry kernels <type>_g<N>: strata_mmvq_rows_x, strata_mmvq_rows_f) on the CPU through runMmvq, its harness and bounds: the
// host simulation of TestPrefillHostSim on the generated sm_90 source rewritten by
// mmvqHostSimSource (mmvq's __NVPTX__ sections on, its prefetches dropped; quant_blocks keeps
// its portable decode forms, which give the same bytes: TestQuantBlocksHost). It proves the
// geometries' indexing (rows a wave, groups a lane, ragged rows and passes, several
// matrices, the segmented staging) and that their sums are within the declared bounds; the
// first-pass L1 prefetch and the late wait are hints and a no-op here. CPU threads make it
// slow: by default Q8_0 and F16 (the engine's dense types) on the geometry cases and a few
// default-path ones; STRATA_HOSTSIM_ALL=1 every type.
func TestMmvqHostSim(t *testing.T) {
	cxx, target, root := hostSimTools(t)
	prelude := hostSimPrelude(t, root)
	src, err := os.ReadFile(filepath.Join(root, "kernels", "out", target, "mmvq.cu"))
	if err != nil {
		t.Fatal(err)
	}
	sim, err := mmvqHostSimSource(src)
	if err != nil {
		t.Fatal(err)
	}
	// The expert cases keep device addresses in their slot tables.
	bin := buildHostSimSource(t, cxx, root, "mmvq", sim, prelude, "-O1", "-DHOSTSIM_TRANSLATE_MEMORY")
	co, ok := abi.Find(target, "mmvq")
	if !ok {
		t.Fatalf("no mmvq code object for %s", target)
	}
	fam := families["mmvq"]
	all := os.Getenv("STRATA_HOSTSIM_ALL") == "1"
	types := map[string]bool{"q80": true, "f16": true}
	for _, v := range co.Variants {
		if !all && !types[mmvqTypeVariant(v.Name)] {
			continue
		}
		for _, c := range fam.Cases {
			if !fam.Applies(v.Name, c) {
				continue
			}
			// By default the geometry kernels on the decode cases, and every kernel on two
			// one-column default-path cases.
			decode := len(c.Dims) >= 6 && mmvqGeomVariant(v.Name)
			if !decode && !all && c.Name != "rows=5,k=3072,cols=1" && c.Name != "experts=8,rows=40,k=768,cols=1,own-x" {
				continue
			}
			if c.Dims[1] > 16384 && !all { // the segmented staging's K: minutes on the CPU
				continue
			}
			t.Run(v.Name+"/"+c.Name, func(t *testing.T) {
				simRun(t, bin, "mmvq", v.Symbol, runMmvq, c, fam.Bounds[v.Name])
			})
		}
	}
}

// mmvqHostSimSource rewrites a generated NVIDIA mmvq source for the host simulation: from
// mmvq's own text on (after quant_blocks), __NVPTX__ sections are taken, prefetch and
// empty asm statements dropped, block-scope __shared__ arrays made static (one block runs
// at a time; its threads share them), and PTX's prmt is given a host definition.
func mmvqHostSimSource(src []byte) ([]byte, error) {
	s := string(src)
	i := strings.Index(s, "// mmvq: y[z][c][r]")
	if i < 0 {
		return nil, errors.New("mmvq source: no mmvq header")
	}
	head, body := s[:i], s[i:]
	var out []string
	for _, line := range strings.Split(body, "\n") {
		tl := strings.TrimSpace(line)
		switch {
		case tl == "#ifdef __NVPTX__":
			line = "#if 1"
		case strings.Contains(line, "asm volatile(\"prefetch"):
			line = line[:strings.Index(line, "asm volatile(")] + "(void)0;"
		case strings.HasPrefix(tl, "asm volatile(\"\" :") || strings.HasPrefix(tl, "if constexpr (NC >= 3) asm volatile(\"\" ::: \"memory\");"):
			line = ""
		case strings.HasPrefix(tl, "__shared__ "):
			line = strings.Replace(line, "__shared__ ", "static __shared__ ", 1)
		case strings.Contains(line, "asm"):
			return nil, fmt.Errorf("mmvq source: an asm the host simulation does not know: %q", tl)
		}
		out = append(out, strings.ReplaceAll(line, "defined(__NVPTX__)", "1"))
	}
	prmt := `
// PTX prmt.b32 (default mode): byte i of the result is byte (s >> 4i) & 7 of {b, a}
// (a = bytes 0..3), replicated from its sign bit where (s >> 4i) & 8.
static inline u32 __nvvm_prmt(u32 a, u32 b, u32 s) {
  const u64 v = ((u64)b << 32) | a;
  u32 r = 0;
  for (int i = 0; i < 4; ++i) {
    const u32 sel = (s >> (4 * i)) & 15u;
    u32 byte = (u32)(v >> (8 * (sel & 7u))) & 0xffu;
    if (sel & 8u) byte = (byte & 0x80u) ? 0xffu : 0u;
    r |= byte << (8 * i);
  }
  return r;
}
`
	return []byte(head + prmt + strings.Join(out, "\n")), nil
}
