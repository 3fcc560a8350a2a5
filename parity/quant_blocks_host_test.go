package parity

import (
	"bytes"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/strata-hip/strata/quant"
)

// TestQuantBlocksHost compiles the generated sm_90 dequant source — which carries all of
// kernels/templates/quant_blocks.tmpl, the per-type decode that dequant, mmvq and moe_decode
// share — as plain C++ for this machine, against a host stand-in of the prelude
// (testdata/quant_blocks_host), and checks it against package quant on random blocks of
// every type: the dequant kernel's f32 output equals quant.DecodeRow bit for bit (by value),
// and for every 32-element group the integer dot parts (Σ mult·q·q_a and the Q4_K min sum)
// and the f32 scales equal those of quant.IntView exactly. No GPU is needed; without a host
// clang++ the test skips, saying so.
func TestQuantBlocksHost(t *testing.T) {
	cxx := ""
	for _, c := range []string{"clang++-19", "clang++"} {
		if p, err := exec.LookPath(c); err == nil {
			cxx = p
			break
		}
	}
	if cxx == "" {
		t.Skip("no clang++-19 or clang++ on PATH: the host check of quant_blocks needs a C++ compiler")
	}
	root := moduleRoot()
	dir := t.TempDir()
	for _, f := range []string{"strata_prelude.h", "main.cpp"} {
		b, err := os.ReadFile(filepath.Join("testdata", "quant_blocks_host", f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	src, err := os.ReadFile(filepath.Join(root, "kernels", "out", "sm_90", "dequant.cu"))
	if err != nil {
		t.Fatalf("%v: run go generate ./...", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "dequant.cu"), src, 0o644); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "host")
	out, err := exec.Command(cxx, "-x", "c++", "-std=c++17", "-O1", "-w", "-I", filepath.Join(root, "kernels", "out", "include"),
		"-I", dir, "-o", bin, filepath.Join(dir, "main.cpp")).CombinedOutput()
	if err != nil {
		t.Fatalf("host compile of quant_blocks: %v\n%s", err, out)
	}
	seed := runSeed(t)
	types := []quant.Type{quant.F16, quant.BF16, quant.Q8_0, quant.Q2_0, quant.Q4_K, quant.Q6_K, quant.IQ2_XS, quant.IQ3_XXS, quant.IQ3_S, quant.IQ1_M}
	for ti, qt := range types {
		t.Run(qt.String(), func(t *testing.T) {
			rng := caseRNG(seed, t.Name())
			const rows, k = 6, 2048
			var w []byte
			for r := 0; r < rows; r++ {
				row, err := quant.RandomRow(qt, k, rng)
				if err != nil {
					t.Fatal(err)
				}
				w = append(w, row...)
			}
			act := make([]byte, k/32*36)
			if err := quant.QuantizeQ8_1GPU(activations(rng, 1, k), act); err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command(bin, strconv.Itoa(ti), strconv.Itoa(k), strconv.Itoa(rows))
			cmd.Stdin = bytes.NewReader(append(append([]byte{}, w...), act...))
			res, err := cmd.Output()
			if err != nil {
				t.Fatalf("host run: %v", err)
			}
			lines := strings.Split(strings.TrimSpace(string(res)), "\n")
			rb := len(w) / rows
			y := make([]float32, k)
			for r := 0; r < rows; r++ {
				if err := quant.DecodeRow(qt, w[r*rb:(r+1)*rb], y); err != nil {
					t.Fatal(err)
				}
				for i, want := range y {
					got, err := strconv.ParseFloat(lines[r*k+i], 64)
					if err != nil || float32(got) != want {
						t.Fatalf("seed %d: row %d element %d: quant_blocks decodes %s, quant.DecodeRow %v", seed, r, i, lines[r*k+i], want)
					}
				}
			}
			if qt == quant.F16 || qt == quant.BF16 {
				return
			}
			info, _ := quant.Lookup(qt)
			var ib quant.IntBlock
			n := rows * k
			for r := 0; r < rows; r++ {
				for g := 0; g < k/32; g++ {
					b := g * 32 / info.BlockElems
					if err := quant.IntView(qt, w[r*rb+b*info.BlockBytes:r*rb+(b+1)*info.BlockBytes], &ib); err != nil {
						t.Fatal(err)
					}
					var main, off int64
					for i := 0; i < 32; i++ {
						e := (g*32)%info.BlockElems + i
						qa := int64(int8(act[g*36+4+i]))
						main += int64(ib.Mult[e/ib.Group]) * int64(ib.Q[e]) * qa
						off += int64(ib.OffMult[e/ib.Group]) * qa
					}
					want := fmt.Sprintf("%d %d", main, off)
					f := strings.Fields(lines[n])
					n++
					if len(f) != 4 || f[0]+" "+f[1] != want {
						t.Fatalf("seed %d: row %d group %d: quant_blocks integer dot %q, quant.IntView %q", seed, r, g, strings.Join(f[:min(2, len(f))], " "), want)
					}
					base, err1 := strconv.ParseFloat(f[2], 64)
					offb, err2 := strconv.ParseFloat(f[3], 64)
					if err1 != nil || err2 != nil || base != ib.Base || (offb != ib.OffBase && !(offb == 0 && ib.OffBase == 0)) || math.IsNaN(base) {
						t.Fatalf("seed %d: row %d group %d: scales %s %s, quant.IntView %v %v", seed, r, g, f[2], f[3], ib.Base, ib.OffBase)
					}
				}
			}
		})
	}
}
