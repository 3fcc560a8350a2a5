package gpu

import (
	"regexp"
	"strings"
	"testing"

	"github.com/strata-hip/strata/kernels/abi"
	"github.com/strata-hip/strata/quant"
)

// TestMmvqGeomShapes pins Engine.mmvqGeom's choice at the synthetic models' decode shapes
// on 132 SMs (H200), the counting of bench/results/2026-11-30-mmvqs-s7 and the default kernel
// where it was faster (bench/results/2026-11-30-final-s7/call1): a geometry only where it
// puts the grid in one wave of 2 blocks an SM (264 blocks) other than the default's, and
// MmvqOld, an unknown unit count or a kernel without geometry kernels (AMD) keep the default
// kernel with its grid.
func TestMmvqGeomShapes(t *testing.T) {
	mk := func(rows int, f bool) *kernel {
		k := &kernel{rows: rows}
		for g := 1; g < len(mmvqGeoms); g++ {
			if !f {
				k.geoms[g] = &kernel{rows: mmvqGeoms[g].qRows}
			} else if mmvqGeoms[g].fRows > 0 {
				k.geoms[g] = &kernel{rows: mmvqGeoms[g].fRows}
			}
		}
		return k
	}
	kq, kf := mk(16, false), mk(8, true)
	for _, c := range []struct {
		name          string
		typ           quant.Type
		rows, k, z    int
		geom, rpb, bx int
	}{
		{"30B q|k|v", quant.Q8_0, 5120, 2048, 1, 3, 24, 214},
		{"30B/80B wo, 80B delta-net out", quant.Q8_0, 2048, 4096, 1, 0, 16, 128},
		{"30B router", quant.F16, 128, 2048, 1, 4, 8, 16},
		{"80B router + shared gate", quant.F16, 513, 2048, 1, 4, 8, 65},
		{"LM head", quant.Q8_0, 151936, 2048, 1, 0, 16, 9496},
		{"80B delta-net q|k|v|z|b|a", quant.Q8_0, 12352, 2048, 1, 0, 16, 772},
		{"80B attention k|v", quant.Q8_0, 1024, 2048, 1, 4, 8, 128},
		{"80B q and gate (16 heads)", quant.Q8_0, 256, 2048, 16, 0, 16, 16},
		{"K = 14336", quant.Q4_K, 4096, 14336, 1, 0, 16, 256},
		{"Q6_K K = 14336 (issue 5)", quant.Q6_K, 4096, 14336, 1, 10, 16, 256},
		{"Q6_K K = 14336, 1024 rows", quant.Q6_K, 1024, 14336, 1, 0, 16, 64},
		{"Q6_K K = 2048", quant.Q6_K, 4096, 2048, 1, 0, 16, 256},
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
		if g != 0 && k.geoms[g] == nil {
			t.Errorf("%s: geometry %d without its kernel", c.name, g)
		}
		for _, off := range []*Engine{{units: 132, launchSettings: launchSettings{mmvqOld: true}}, {}} {
			if g, rpb := off.mmvqGeom(w, c.z, k); g != 0 || rpb != k.rows {
				t.Errorf("%s: old %v / units %d: geom %d, %d rows a block; want 0, %d", c.name, off.mmvqOld, off.units, g, rpb, k.rows)
			}
		}
		if g, rpb := e.mmvqGeom(w, c.z, &kernel{rows: k.rows}); g != 0 || rpb != k.rows {
			t.Errorf("%s: a kernel without geometry kernels: geom %d, %d rows a block; want 0, %d", c.name, g, rpb, k.rows)
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
						if !mmvqGeomSym.MatchString(op.sym) {
							continue
						}
						geoms++
						want := int32(2)
						if o.NoPDL {
							want = 0
						}
						if a.Prefetch != want {
							t.Fatalf("NoPDL %v: %s: prefetch %d, want %d", o.NoPDL, op.sym, a.Prefetch, want)
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
						if a := args[abi.MmvqArgs](op.args); mmvqGeomSym.MatchString(op.sym) || a.Prefetch > 1 {
							t.Fatalf("MmvqOld: %s with prefetch %d", op.sym, a.Prefetch)
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

// mmvqGeomSym matches a decode-geometry kernel's symbol (mmvq variant <type>_g<N>).
var mmvqGeomSym = regexp.MustCompile(`^strata_mmvq_[a-z0-9]+_g[1-9][0-9]?$`)

// TestMmvqGeomsMirror: mmvqGeoms (the engine's counting) agrees with kernels/abi: on every
// NVIDIA target each quantized variant has geometry g's kernel <type>_g<g> covering
// qRows rows a block, F16/BF16 exactly where fRows > 0 (covering fRows), and the default
// kernels cover 16 and 8; AMD targets have no geometry kernel.
func TestMmvqGeomsMirror(t *testing.T) {
	if mmvqGeoms[0].qRows != 16 || mmvqGeoms[0].fRows != 0 {
		t.Errorf("geom 0: %+v, want the default kernel's 16 quantized rows a block", mmvqGeoms[0])
	}
	for _, co := range abi.CodeObjects {
		if co.Family != "mmvq" {
			continue
		}
		rows := map[string]int{}
		for _, v := range co.Variants {
			rows[v.Name] = v.RowsPerBlock
		}
		for _, v := range co.Variants {
			if strings.Contains(v.Name, "_g") {
				if co.Vendor != "nvidia" {
					t.Errorf("%s: geometry kernel %s on a %s target", co.Target, v.Name, co.Vendor)
				}
				continue
			}
			f := v.Name == "f16" || v.Name == "bf16"
			if want := map[bool]int{false: 16, true: 8}[f]; v.RowsPerBlock != want {
				t.Errorf("%s: %s covers %d rows a block, want %d", co.Target, v.Name, v.RowsPerBlock, want)
			}
			for g := 1; g < len(mmvqGeoms) && co.Vendor == "nvidia"; g++ {
				want := mmvqGeoms[g].qRows
				if f {
					want = mmvqGeoms[g].fRows
				}
				if got := rows[mmvqGeomVariant(v.Name, g)]; got != want {
					t.Errorf("%s: %s covers %d rows a block (0: absent), mmvqGeoms %d", co.Target, mmvqGeomVariant(v.Name, g), got, want)
				}
			}
		}
	}
}
