package quant

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
)

var vectorsDir = flag.String("vectors", filepath.Join("testdata", "vectors"), "directory of ggml test vectors (<type>.json + <type>.bin)")

// vectorFile is one <type>.json/<type>.bin pair (layout: testdata/vectors/README.md).
type vectorFile struct {
	Name         string `json:"type"`
	TypeID       uint32 `json:"type_id"`
	Rows         int    `json:"rows"`
	K            int    `json:"k"`
	BlockElems   int    `json:"block_elems"`
	BlockBytes   int    `json:"block_bytes"`
	RowBytes     int    `json:"row_bytes"`
	VecDotTypeID uint32 `json:"vec_dot_type_id"`
	ActRowBytes  int    `json:"act_row_bytes"`
	BinFile      string `json:"bin_file"`
	BinSHA256    string `json:"bin_sha256"`
	Sections     map[string]struct {
		Offset int `json:"offset"`
		Bytes  int `json:"bytes"`
	} `json:"sections"`
	Dot struct {
		ScalarBits []string  `json:"ggml_cpu_scalar_f32_bits"`
		AVX2Bits   []string  `json:"ggml_cpu_avx2_f32_bits"`
		ExactQ     []float64 `json:"exact_w_x_act_q"`
		ExactF32   []float64 `json:"exact_w_x_act_f32"`
		ExactQ81   []float64 `json:"exact_w_x_act_q8_1"`
	} `json:"dot"`
	L1 []float64 `json:"l1_w_x_act_q"`

	bin []byte
}

func (v *vectorFile) section(name string) []byte {
	s, ok := v.Sections[name]
	if !ok || s.Offset < 0 || s.Offset+s.Bytes > len(v.bin) {
		return nil
	}
	return v.bin[s.Offset : s.Offset+s.Bytes]
}

func f32s(b []byte) []float32 {
	out := make([]float32, len(b)/4)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return out
}

// loadVectors reads every <type>.json in dir with its .bin, checking the digest and
// the header against the JSON.
func loadVectors(t *testing.T, dir string) []*vectorFile {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil || len(names) == 0 {
		t.Fatalf("no test vectors (*.json) in %s (err %v); pass -vectors DIR", dir, err)
	}
	sort.Strings(names)
	var out []*vectorFile
	for _, name := range names {
		data, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		v := &vectorFile{}
		if err := json.Unmarshal(data, v); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		v.bin, err = os.ReadFile(filepath.Join(dir, v.BinFile))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		sum := sha256.Sum256(v.bin)
		if hex.EncodeToString(sum[:]) != v.BinSHA256 {
			t.Fatalf("%s: sha256 mismatch: the .bin does not belong to this .json", v.BinFile)
		}
		if string(v.bin[:8]) != "GGMLTV01" {
			t.Fatalf("%s: bad magic %q", v.BinFile, v.bin[:8])
		}
		hdr := func(o int) int { return int(binary.LittleEndian.Uint32(v.bin[o:])) }
		if hdr(8) != int(v.TypeID) || hdr(12) != v.Rows || hdr(16) != v.K || hdr(20) != v.BlockElems ||
			hdr(24) != v.BlockBytes || hdr(28) != v.RowBytes || hdr(32) != int(v.VecDotTypeID) || hdr(36) != v.ActRowBytes {
			t.Fatalf("%s: header disagrees with %s", v.BinFile, filepath.Base(name))
		}
		out = append(out, v)
	}
	return out
}

// TestVectors checks this package against ggml's outputs in -vectors DIR (default: the
// copy in testdata/vectors): block geometry, decoders (float32 bit for bit, float64
// exact), dot products (exact and ggml's scalar float32) and the quantizers.
func TestVectors(t *testing.T) {
	for _, v := range loadVectors(t, *vectorsDir) {
		t.Run(v.Name, func(t *testing.T) {
			typ := Type(v.TypeID)
			in, ok := Lookup(typ)
			if !ok || !in.Weight {
				t.Fatalf("type id %d (%s) is not a known weight type", v.TypeID, v.Name)
			}
			if in.Name != v.Name || in.BlockElems != v.BlockElems || in.BlockBytes != v.BlockBytes || in.VecDotType != Type(v.VecDotTypeID) {
				t.Fatalf("Info %+v disagrees with the vectors (name %s, block %d elems/%d bytes, vec_dot_type %d)",
					in, v.Name, v.BlockElems, v.BlockBytes, v.VecDotTypeID)
			}
			src := f32s(v.section("src_f32"))
			wq := v.section("weights_q")
			deq := f32s(v.section("weights_deq_f32"))
			if len(src) != v.Rows*v.K || len(wq) != v.Rows*v.RowBytes || len(deq) != v.Rows*v.K {
				t.Fatalf("section sizes do not match rows×k")
			}
			var checked counts
			for r := 0; r < v.Rows; r++ {
				row := wq[r*v.RowBytes : (r+1)*v.RowBytes]
				want := deq[r*v.K : (r+1)*v.K]
				checked.add(checkDecode(t, typ, r, row, want))
			}
			for _, c := range vectorChecks {
				checked.add(c(t, v, typ, src, wq))
			}
			fmt.Printf("vectors %-8s rows %d, k %d: %s\n", v.Name, v.Rows, v.K, checked)
		})
	}
}

// counts tallies what a check compared, by kind, for the one-line report.
type counts map[string]int

func (c *counts) add(o counts) {
	if *c == nil {
		*c = counts{}
	}
	for k, n := range o {
		(*c)[k] += n
	}
}

func (c counts) String() string {
	keys := make([]string, 0, len(c))
	for k := range c {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %d", k, c[k]))
	}
	return strings.Join(parts, ", ")
}

// vectorChecks are the checks beyond decoding, each run on every vector file; they
// return what they compared.
var vectorChecks []func(t *testing.T, v *vectorFile, typ Type, src []float32, wq []byte) counts

func checkDecode(t *testing.T, typ Type, r int, row []byte, want []float32) counts {
	t.Helper()
	got := make([]float32, len(want))
	if err := DecodeRow(typ, row, got); err != nil {
		t.Fatalf("row %d: %v", r, err)
	}
	got64 := make([]float64, len(want))
	if err := DecodeRow64(typ, row, got64); err != nil {
		t.Fatalf("row %d: %v", r, err)
	}
	bad := 0
	for i := range want {
		if got[i] != want[i] || float32(got64[i]) != want[i] {
			if bad < 5 {
				t.Errorf("row %d elem %d: DecodeRow %g, DecodeRow64 %g, ggml %g", r, i, got[i], got64[i], want[i])
			}
			bad++
		}
	}
	if bad > 0 {
		t.Errorf("row %d: %d of %d elements differ", r, bad, len(want))
	}
	return counts{"decoded": len(want)}
}

func parseBits(t *testing.T, s string) float32 {
	t.Helper()
	u, err := strconv.ParseUint(strings.TrimPrefix(s, "0x"), 16, 32)
	if err != nil {
		t.Fatalf("bad f32 bits %q", s)
	}
	return math.Float32frombits(uint32(u))
}
