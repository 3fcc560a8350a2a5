package kernels

import "testing"

// The prefill tiles each target gets: r64t64 everywhere (mma only with a matrix unit); on
// NVIDIA also r128t64 (64 accumulators per lane fit only there) and the NVIDIA-only shapes
// (mmq r64t128, moe_prefill r128t32, r64t32 and r64t48, and moe_prefill's Q6_K-only mma tiles
// r64t32x, r64t48x); every kept variant's LDS model within the target's LDS.
func TestPrefillTiles(t *testing.T) {
	for _, fam := range []string{"mmq", "moe_prefill"} {
		s, ok := LookupSpec(fam)
		if !ok {
			t.Fatalf("no %s spec", fam)
		}
		for _, tg := range Targets {
			kept, pruned := s.Variants(tg)
			got := map[string]bool{}
			for _, v := range kept {
				got[v.Values["op"]+"/"+v.Values["tile"]] = true
				bm, bn := mmqTiles[v.Values["tile"]][0], mmqTiles[v.Values["tile"]][1]
				if lds := mmqLDS(v.Values["type"], bm, bn); lds > tg.LDSBytes {
					t.Errorf("%s %s/%s: LDS %d > %d kept", fam, tg.Name, v.Name, lds, tg.LDSBytes)
				}
			}
			want := map[string]bool{"dp4a/r64t64": true}
			if tg.HasInt8Matrix() {
				want["mma/r64t64"] = true
			}
			if tg.IsNVIDIA() {
				extra := map[string][]string{"mmq": {"r64t128"}, "moe_prefill": {"r128t32", "r64t32", "r64t48"}}[fam]
				for _, tile := range append([]string{"r128t64"}, extra...) {
					want["dp4a/"+tile], want["mma/"+tile] = true, true
				}
				if fam == "moe_prefill" { // Q6_K's pair form: mma only
					for _, tile := range []string{"r64t32x", "r64t48x"} {
						want["mma/"+tile] = true
					}
				}
			}
			for k := range want {
				if !got[k] {
					t.Errorf("%s %s: no %s variant", fam, tg.Name, k)
				}
			}
			for k := range got {
				if !want[k] {
					t.Errorf("%s %s: unexpected %s variant", fam, tg.Name, k)
				}
			}
			for _, p := range pruned {
				if p.Why == "" {
					t.Errorf("%s %s/%s pruned without a reason", fam, tg.Name, p.Variant.Name)
				}
			}
		}
	}
}

// Every mmqWideStaging entry names a kernel that an NVIDIA target builds (a misspelt entry
// would silently leave its kernel in the 4-byte form), and no AMD or dp4a variant reports the
// wide form.
func TestMMQWideStaging(t *testing.T) {
	seen := map[string]bool{}
	for _, fam := range []string{"mmq", "mmq8", "mmq8x4", "mmq8x4n", "mmq8x4g", "mmq8c", "mmq8cz", "moe_prefill"} {
		s, ok := LookupSpec(fam)
		if !ok {
			t.Fatalf("no %s spec", fam)
		}
		for _, tg := range Targets {
			kept, _ := s.Variants(tg)
			for _, v := range kept {
				if !v.WideStaging(fam, tg) {
					continue
				}
				if !tg.IsNVIDIA() || v.Values["op"] != "mma" {
					t.Errorf("%s %s/%s: wide staging outside the NVIDIA mma core", fam, tg.Name, v.Name)
				}
				seen[fam+"/"+v.Values["type"]+"/"+v.Values["tile"]] = true
			}
		}
	}
	for k := range mmqWideStaging {
		if !seen[k] {
			t.Errorf("mmqWideStaging %q: no NVIDIA mma kernel of that family/type/tile", k)
		}
	}
	if len(seen) == 0 {
		t.Error("no kernel in the wide form")
	}
}

// mmq8 (the 8-warp tile): every type on every NVIDIA target, mma only, nothing on AMD; the
// NVIDIA LDS model within the target's LDS; two blocks an SM asked where they fit. mmq8x4,
// mmq8x4n: the same for their types (mmqX4Types, mmqX4NTypes), with a segment of 4 groups
// (mmq8 has none) and, mmq8x4n, the prefetch. mmq8c (Q2_0),
// mmq8cz (Q8_0): compact scale tiles (wide staging) and, mmq8cz, no edge zeroing.
func TestMmq8Tiles(t *testing.T) {
	for _, fc := range []struct {
		family string
		types  int
		xseg   int
		pf     bool // prefetches the next K step (mmqPrefetch)
	}{{"mmq8", len(axisPrefillType.Values), 0, false}, {"mmq8x4", len(mmqX4Types), 4, false},
		{"mmq8x4n", len(mmqX4NTypes), 4, true},
		{"mmq8x4g", len(mmqX4NTypes), 4, true},
		{"mmq8c", len(mmqCTypes), 0, false},
		{"mmq8cz", len(mmqCZTypes), 0, false}} {
		s, ok := LookupSpec(fc.family)
		if !ok {
			t.Fatalf("no %s spec", fc.family)
		}
		for _, tg := range Targets {
			kept, _ := s.Variants(tg)
			if !tg.IsNVIDIA() {
				if len(kept) != 0 {
					t.Errorf("%s: %d %s variants on an AMD target", tg.Name, len(kept), fc.family)
				}
				continue
			}
			if len(kept) != fc.types {
				t.Errorf("%s: %d %s variants, want %d", tg.Name, len(kept), fc.family, fc.types)
			}
			for _, v := range kept {
				sh, ok := mmqShapeOf(v.Values["type"], v.Values["tile"])
				if !ok || v.Values["op"] != "mma" || v.Shape(tg) == "" {
					t.Errorf("%s/%s/%s: no 8-warp shape", tg.Name, fc.family, v.Name)
					continue
				}
				bmn := mmqTiles[v.Values["tile"]]
				if lds := mmqNVLDS(v.Values["type"], bmn[0], bmn[1], sh, v.WideStaging(fc.family, tg)); lds > tg.LDSBytes {
					t.Errorf("%s/%s/%s: LDS %d > %d", tg.Name, fc.family, v.Name, lds, tg.LDSBytes)
				}
				if v.MinBlocks(fc.family, tg) != 2 {
					t.Errorf("%s/%s/%s: min blocks %d, want 2", tg.Name, fc.family, v.Name, v.MinBlocks(fc.family, tg))
				}
				if got := v.XSeg(fc.family, tg); got != fc.xseg {
					t.Errorf("%s/%s/%s: segment %d groups, want %d", tg.Name, fc.family, v.Name, got, fc.xseg)
				}
				if got := v.Prefetch(fc.family, tg); got != fc.pf {
					t.Errorf("%s/%s/%s: prefetch %t, want %t", tg.Name, fc.family, v.Name, got, fc.pf)
				}
				if got, want := v.Compact(fc.family, tg), mmqCompact[fc.family]; got != want || (got && !v.WideStaging(fc.family, tg)) {
					t.Errorf("%s/%s/%s: compact scales %t, want %t (and wide staging)", tg.Name, fc.family, v.Name, got, want)
				}
				if got, want := v.NoZero(fc.family, tg), mmqNoZero[fc.family]; got != want {
					t.Errorf("%s/%s/%s: no edge zeroing %t, want %t", tg.Name, fc.family, v.Name, got, want)
				}
			}
		}
	}
}
