package gpu

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/strata-hip/strata/kernels/abi"
	"github.com/strata-hip/strata/quant"
)

// TestMmvqGeomShapes pins Engine.mmvqGeom's choice at the synthetic models' decode shapes
// on 132 SMs (H200), the counting of bench/results/2026-11-30-mmvqs-s7: every shape in one
// wave of 2 blocks an SM where the grid allows it (264 blocks), one pass a lane where K
// allows it, and MmvqOld or an unknown unit count keep geom 0 with the variant's grid.
func TestMmvqGeomShapes(t *testing.T) {
	kq, kf := &kernel{rows: 16}, &kernel{rows: 8}
	for _, c := range []struct {
		name          string
		typ           quant.Type
		rows, k, z    int
		geom, rpb, bx int
	}{
		{"30B q|k|v", quant.Q8_0, 5120, 2048, 1, 3, 24, 214},
		{"30B/80B wo, 80B delta-net out", quant.Q8_0, 2048, 4096, 1, 2, 8, 256},
		{"30B router", quant.F16, 128, 2048, 1, 4, 8, 16},
		{"80B router + shared gate", quant.F16, 513, 2048, 1, 4, 8, 65},
		{"LM head", quant.Q8_0, 151936, 2048, 1, 1, 16, 9496},
		{"80B delta-net q|k|v|z|b|a", quant.Q8_0, 12352, 2048, 1, 3, 24, 515},
		{"80B attention k|v", quant.Q8_0, 1024, 2048, 1, 4, 8, 128},
		{"80B q and gate (16 heads)", quant.Q8_0, 256, 2048, 16, 1, 16, 16},
		{"K = 14336", quant.Q4_K, 4096, 14336, 1, 1, 16, 256},
		{"F16 wide", quant.F16, 4096, 2048, 1, 0, 8, 512},
	} {
		e := &Engine{units: 132}
		k := kq
		if c.typ == quant.F16 {
			k = kf
		}
		w := dmat{typ: c.typ, rows: c.rows, k: c.k}
		g, rpb := e.mmvqGeom(w, c.z, k)
		if int(g) != c.geom || rpb != c.rpb || int(blocks(c.rows, rpb)) != c.bx {
			t.Errorf("%s (%d×%d, %d matrices): geom %d, %d rows a block, %d blocks; want %d, %d, %d",
				c.name, c.rows, c.k, c.z, g, rpb, blocks(c.rows, rpb), c.geom, c.rpb, c.bx)
		}
		for _, off := range []*Engine{{units: 132, mmvqOld: true}, {}} {
			if g, rpb := off.mmvqGeom(w, c.z, k); g != 0 || rpb != k.rows {
				t.Errorf("%s: old %v / units %d: geom %d, %d rows a block; want 0, %d", c.name, off.mmvqOld, off.units, g, rpb, k.rows)
			}
		}
	}
}

// TestEngineMmvqGeom: on a fake NVIDIA device with 132 units the decode geometries run
// (the emulator checks each mmvq's grid against its geometry, and that prefetch 2 comes
// only with one) and compute the same logits as MmvqOld, launch by launch and through
// graphs; every captured dense one-column mmvq with a geometry asks for prefetch 2 with
// PDL and 0 without; one engine switched every step (SetMmvqOld) captures a graph per
// setting, each computing the same bits.
func TestEngineMmvqGeom(t *testing.T) {
	const steps = 5
	fakeUnits = 132
	t.Cleanup(func() { fakeUnits = 0 })
	var units func(*fakeDriver)
	for _, preset := range []string{"tiny", "tiny-next"} {
		t.Run(preset, func(t *testing.T) {
			old := runGraph(t, preset, Options{MmvqOld: true}, units, steps, true, false)
			if old.err != nil {
				t.Fatal(old.err)
			}
			for _, o := range []Options{{}, {NoPDL: true}} {
				r := runGraph(t, preset, o, units, steps, true, false)
				if r.err != nil {
					t.Fatal(r.err)
				}
				sameLogits(t, "decode geometries against MmvqOld", r.logs, old.logs)
				geoms := 0
				for _, g := range r.fake.graphs {
					for _, op := range g.ops {
						if !op.launch || !strings.HasPrefix(op.sym, "strata_mmvq_") {
							continue
						}
						a := args[abi.MmvqArgs](op.args)
						if a.Geom == 0 {
							continue
						}
						geoms++
						want := int32(2)
						if o.NoPDL {
							want = 0
						}
						if a.Prefetch != want {
							t.Fatalf("NoPDL %v: %s geom %d: prefetch %d, want %d", o.NoPDL, op.sym, a.Geom, a.Prefetch, want)
						}
					}
				}
				if geoms == 0 {
					t.Fatalf("NoPDL %v: no captured mmvq with a decode geometry", o.NoPDL)
				}
			}
			for _, g := range old.fake.graphs {
				for _, op := range g.ops {
					if op.launch && strings.HasPrefix(op.sym, "strata_mmvq_") {
						if a := args[abi.MmvqArgs](op.args); a.Geom != 0 || a.Prefetch > 1 {
							t.Fatalf("MmvqOld: %s with geom %d, prefetch %d", op.sym, a.Geom, a.Prefetch)
						}
					}
				}
			}
			sw := runGraph(t, preset, Options{}, units, 0, false, false)
			if sw.err != nil {
				t.Fatal(sw.err)
			}
			ref := runGraph(t, preset, Options{MmvqOld: true}, units, steps, false, false)
			if ref.err != nil {
				t.Fatal(ref.err)
			}
			l := ref.logs[0]
			for i := 1; i < steps; i++ {
				sw.eng.SetMmvqOld(i%2 == 0)
				got, err := sw.eng.Forward([]int32{argmaxF(l)})
				if err != nil {
					t.Fatal(err)
				}
				sameLogits(t, "switched engine", [][]float32{got}, [][]float32{ref.logs[i]})
				l = got
			}
			if sw.fake.emu.err != nil {
				t.Fatal(sw.fake.emu.err)
			}
			if s := sw.eng.Stats(); sw.eng.GraphErr() != nil || s.Captures < 2 {
				t.Errorf("switched engine: %d captures, error %v", s.Captures, sw.eng.GraphErr())
			}
		})
	}
}

// TestMmvqGeomsMirror: mmvqGeoms (the engine's grids) agrees with the generated sm_90
// mmvq's one-column dispatch: geometry g's quantized path runs strata_mmvq_rows_x<QT, 1, R,
// U>, a block of 8 waves covering 8·R rows, and F16/BF16's rows_f<QT, 1, R> where it has one.
func TestMmvqGeomsMirror(t *testing.T) {
	src, err := os.ReadFile(filepath.Join("..", "..", "kernels", "out", "sm_90", "mmvq.cu"))
	if err != nil {
		t.Fatal(err)
	}
	// Every variant's kernel holds the same dispatch: the first one's is read.
	body := string(src)
	if i := strings.Index(body, "STRATA_KERNEL "); i >= 0 {
		body = body[i:]
		if j := strings.Index(body[1:], "STRATA_KERNEL "); j >= 0 {
			body = body[:j+1]
		}
	}
	q := regexp.MustCompile(`case (\d): strata_mmvq_rows_x<QT, 1, (\d), (\d)>`).FindAllStringSubmatch(body, -1)
	f := regexp.MustCompile(`if \(p\.geom == (\d)\) strata_mmvq_rows_f<QT, 1, (\d)>`).FindAllStringSubmatch(body, -1)
	if len(q) != len(mmvqGeoms)-1 || len(f) != 1 {
		t.Fatalf("sm_90 mmvq.cu: %d quantized and %d F16 geometry cases, want %d and 1", len(q), len(f), len(mmvqGeoms)-1)
	}
	for _, m := range q {
		g, _ := strconv.Atoi(m[1])
		r, _ := strconv.Atoi(m[2])
		if mmvqGeoms[g].qRows != 8*r {
			t.Errorf("geom %d: the kernel takes %d rows a wave, mmvqGeoms %d rows a block", g, r, mmvqGeoms[g].qRows)
		}
	}
	g, _ := strconv.Atoi(f[0][1])
	r, _ := strconv.Atoi(f[0][2])
	for i, gm := range mmvqGeoms {
		if want := map[bool]int{true: 8 * r, false: 0}[i == g]; gm.fRows != want {
			t.Errorf("geom %d: F16 rows a block %d in mmvqGeoms, the kernel's %d", i, gm.fRows, want)
		}
	}
	if mmvqGeoms[0].qRows != 16 {
		t.Errorf("geom 0: %d quantized rows a block, want the default path's 16", mmvqGeoms[0].qRows)
	}
}
