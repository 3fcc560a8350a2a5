package gpu

import (
	"errors"
	"strings"
	"testing"
)

// Constructed device lists, as the runtimes would report them.
func dev(backend string, ord int, name, arch, pci string, integrated bool) DeviceInfo {
	return DeviceInfo{Backend: backend, Ordinal: ord, Name: name, Arch: arch, PCIBusID: pci, Integrated: integrated}
}

func indexed(ds ...DeviceInfo) []DeviceInfo {
	for i := range ds {
		ds[i].Index = i
	}
	return ds
}

var (
	// A desktop with a Ryzen iGPU enumerated first by HIP, then the discrete card.
	iGPUFirst = indexed(
		dev("hip", 0, "AMD Radeon Graphics", "gfx1036:xnack-", "0000:7c:00.0", true),
		dev("hip", 1, "AMD Radeon RX 9070 XT", "gfx1201:sramecc-:xnack-", "0000:03:00.0", false),
	)
	// Two discrete cards of different generations plus an unsupported one.
	threeCards = indexed(
		dev("hip", 0, "AMD Radeon RX 6900 XT", "gfx1030", "0000:0a:00.0", false),
		dev("hip", 1, "AMD Radeon RX 7900 XTX", "gfx1100", "0000:0b:00.0", false),
		dev("hip", 2, "AMD Radeon RX 9070 XT", "gfx1201", "0000:0c:00.0", false),
	)
	// What HIP lists under HIP_VISIBLE_DEVICES=1 on the iGPU-first box: the runtime has
	// already renumbered, so the discrete card is ordinal 0.
	hiddenIGPU = indexed(
		dev("hip", 0, "AMD Radeon RX 9070 XT", "gfx1201:sramecc-:xnack-", "0000:03:00.0", false),
	)
	// A mixed box: CUDA and HIP both present.
	mixed = indexed(
		dev("cuda", 0, "NVIDIA H200", "sm_90", "0000:00:06.0", false),
		dev("hip", 0, "AMD Radeon RX 7900 XTX", "gfx1100", "0000:0b:00.0", false),
	)
	iGPUOnly = indexed(dev("hip", 0, "AMD Radeon 780M", "gfx1103", "0000:c4:00.0", true))
	unread   = indexed(DeviceInfo{Backend: "hip", Ordinal: 0, Name: "?", Err: "hipGetDevicePropertiesR0600: hipErrorInvalidDevice (101)"},
		dev("hip", 1, "AMD Radeon RX 7900 XTX", "gfx1100", "0000:0b:00.0", false))
)

func TestSelect(t *testing.T) {
	rdna := []string{"gfx1030", "gfx1100", "gfx1201"}
	tests := []struct {
		name      string
		devs      []DeviceInfo
		req       Request
		want      int    // index chosen, -1 for an error
		target    string // matched code-object target
		reasonsOf map[int]string
	}{
		{"iGPU first: default skips it", iGPUFirst, Request{Have: rdna}, 1, "gfx1201",
			map[int]string{0: "no code objects for gfx1036:xnack-"}},
		{"iGPU with code objects still skipped by default", iGPUFirst, Request{Have: append([]string{"gfx1036"}, rdna...)}, 1, "gfx1201",
			map[int]string{0: "integrated GPU"}},
		{"iGPU named by index", iGPUFirst, Request{Device: "0", Have: append([]string{"gfx1036"}, rdna...)}, 0, "gfx1036", nil},
		{"iGPU allowed", iGPUOnly, Request{Have: []string{"gfx1103"}, AllowIntegrated: true}, 0, "gfx1103", nil},
		{"only an iGPU: error says integrated", iGPUOnly, Request{Have: []string{"gfx1103"}}, -1, "",
			map[int]string{0: "integrated GPU"}},
		{"visibility already applied by the runtime", hiddenIGPU, Request{Have: rdna}, 0, "gfx1201", nil},
		{"index 0 under visibility is the runtime's 0", hiddenIGPU, Request{Device: "0", Have: rdna}, 0, "gfx1201", nil},
		{"unsupported arch passed over", threeCards, Request{Have: []string{"gfx1100", "gfx1201"}}, 1, "gfx1100",
			map[int]string{0: "no code objects for gfx1030", 2: "usable; hip:1 came first"}},
		{"several discrete: first wins", threeCards, Request{Have: rdna}, 0, "gfx1030", nil},
		{"by PCI bus id", threeCards, Request{Device: "0000:0c:00.0", Have: rdna}, 2, "gfx1201", nil},
		{"by PCI bus id without domain, upper case", threeCards, Request{Device: "0C:00.0", Have: rdna}, 2, "gfx1201", nil},
		{"by name substring", threeCards, Request{Device: "7900", Have: rdna}, 1, "gfx1100", nil},
		{"by name substring, several match: first usable", threeCards, Request{Device: "radeon rx", Have: []string{"gfx1201"}}, 2, "gfx1201", nil},
		{"by backend ordinal", mixed, Request{Device: "hip:0", Have: []string{"sm_90", "gfx1100"}}, 1, "gfx1100", nil},
		{"mixed: CUDA listed first", mixed, Request{Have: []string{"sm_90", "gfx1100"}}, 0, "sm_90", nil},
		{"named device without code objects", threeCards, Request{Device: "6900", Have: []string{"gfx1100"}}, -1, "",
			map[int]string{0: "no code objects for gfx1030 (have: gfx1100)", 1: "not named by --device 6900"}},
		{"index out of range", threeCards, Request{Device: "3", Have: rdna}, -1, "", nil},
		{"nothing matches the name", threeCards, Request{Device: "geforce", Have: rdna}, -1, "", nil},
		{"no code objects at all", threeCards, Request{}, -1, "",
			map[int]string{2: "no code objects for gfx1201 (this build has none)"}},
		{"unreadable device listed and skipped", unread, Request{Have: rdna}, 1, "gfx1100",
			map[int]string{0: "unreadable: hipGetDevicePropertiesR0600"}},
		{"feature-agnostic code object matches a device with features", iGPUFirst, Request{Device: "9070", Have: []string{"gfx1201"}}, 1, "gfx1201", nil},
		{"code object with the wrong feature does not", iGPUFirst, Request{Device: "9070", Have: []string{"gfx1201:xnack+"}}, -1, "", nil},
		{"empty list", nil, Request{Have: rdna}, -1, "", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ch, err := Select(tc.devs, tc.req)
			if tc.want < 0 {
				require.Error(t, err)
				require.True(t, errors.Is(err, ErrNoDevice), "error %v must match ErrNoDevice", err)
				for _, d := range tc.devs {
					require.Contains(t, err.Error(), d.ID(), "the error lists every device")
				}
			} else {
				require.NoError(t, err)
				require.Equal(t, tc.want, ch.Index)
				require.Equal(t, tc.target, ch.Target)
				require.True(t, strings.HasPrefix(ch.Reasons[tc.want], "selected"), ch.Reasons[tc.want])
			}
			require.Len(t, ch.Reasons, len(tc.devs))
			for i, want := range tc.reasonsOf {
				require.Contains(t, ch.Reasons[i], want, "reason for device %d", i)
			}
		})
	}
}

func TestSelectErrorNamesTheProblem(t *testing.T) {
	_, err := Select(threeCards, Request{Device: "3", Have: []string{"gfx1100"}})
	require.ErrorContains(t, err, "--device 3 is out of range: 3 devices listed (indices 0..2)")
	_, err = Select(threeCards, Request{Device: "cuda:0", Have: []string{"gfx1100"}})
	require.ErrorContains(t, err, "no cuda device with ordinal 0")
	_, err = Select(threeCards, Request{Device: "hip:x"})
	require.ErrorContains(t, err, `"x" is not an ordinal`)
}

func TestTargetMatches(t *testing.T) {
	tests := []struct {
		target, arch string
		want         bool
	}{
		{"gfx1201", "gfx1201", true},
		{"gfx1201", "gfx1201:sramecc-:xnack-", true},
		{"gfx942:sramecc+:xnack-", "gfx942:sramecc+:xnack-", true},
		{"gfx942:sramecc-", "gfx942:sramecc+:xnack-", false},
		{"gfx942:xnack+", "gfx942", false},
		{"gfx120", "gfx1201", false},
		{"gfx1200", "gfx1201", false},
		{"sm_90", "sm_90", true},
		{"sm_80", "sm_90", true},  // PTX JIT-compiles forward
		{"sm_90", "sm_120", true}, // likewise
		{"sm_90", "sm_86", false}, // never backward
		{"sm_90", "sm_x", false},
		{"", "", false},
	}
	for _, tc := range tests {
		require.Equal(t, tc.want, TargetMatches(tc.target, tc.arch), "TargetMatches(%q, %q)", tc.target, tc.arch)
	}
	got, ok := MatchTarget([]string{"gfx1201", "gfx1201:xnack-"}, "gfx1201:sramecc-:xnack-")
	require.True(t, ok)
	require.Equal(t, "gfx1201", got, "no exact spelling present: the first compatible one")
	got, ok = MatchTarget([]string{"gfx1201:xnack-", "gfx1201:sramecc-:xnack-"}, "gfx1201:sramecc-:xnack-")
	require.True(t, ok)
	require.Equal(t, "gfx1201:sramecc-:xnack-", got, "the exact spelling wins")
	nv := []string{"sm_80", "sm_86", "sm_89", "sm_90"}
	for arch, want := range map[string]string{"sm_86": "sm_86", "sm_87": "sm_86", "sm_120": "sm_90", "sm_75": ""} {
		got, ok := MatchTarget(nv, arch)
		require.Equal(t, want, got, "MatchTarget(%q, %q): the highest compute capability not above the device's", nv, arch)
		require.Equal(t, want != "", ok)
	}
	_, ok = MatchTarget([]string{"gfx1100", "sm_90"}, "gfx1151")
	require.True(t, !ok, "AMD code objects run only on their own ISA")
}

func TestVisibility(t *testing.T) {
	env := func(kv ...string) func(string) (string, bool) {
		m := map[string]string{}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
	}
	type line struct{ name, effect string }
	tests := []struct {
		name    string
		backend string
		env     func(string) (string, bool)
		want    []line
	}{
		{"nothing set", "cuda", env(), nil},
		{"cuda empty hides all", "cuda", env("CUDA_VISIBLE_DEVICES", ""), []line{{"CUDA_VISIBLE_DEVICES", "no device at all"}}},
		{"cuda list", "cuda", env("CUDA_VISIBLE_DEVICES", "1,0"), []line{{"CUDA_VISIBLE_DEVICES", "lists the devices"}}},
		{"hip ignores HIP-only vars on cuda", "cuda", env("HIP_VISIBLE_DEVICES", "1"), nil},
		{"rocr empty hides all", "hip", env("ROCR_VISIBLE_DEVICES", ""), []line{{"ROCR_VISIBLE_DEVICES", "no device at all"}}},
		{"hip empty is unset", "hip", env("HIP_VISIBLE_DEVICES", ""), []line{{"HIP_VISIBLE_DEVICES", "treats it as unset"}}},
		{"cuda var reaches hip when HIP_ unset", "hip", env("CUDA_VISIBLE_DEVICES", "0"),
			[]line{{"CUDA_VISIBLE_DEVICES", "applies it to AMD devices too"}}},
		{"cuda var ignored by hip when HIP_ set", "hip", env("CUDA_VISIBLE_DEVICES", "0", "HIP_VISIBLE_DEVICES", "1"),
			[]line{{"HIP_VISIBLE_DEVICES", "lists the devices"}, {"CUDA_VISIBLE_DEVICES", "ignored by HIP"}}},
		{"rocr then hip, in the runtime's order", "hip", env("HIP_VISIBLE_DEVICES", "0", "ROCR_VISIBLE_DEVICES", "1"),
			[]line{{"ROCR_VISIBLE_DEVICES", "lists"}, {"HIP_VISIBLE_DEVICES", "lists"}}},
		{"empty cuda var is unset for hip", "hip", env("CUDA_VISIBLE_DEVICES", ""), []line{{"CUDA_VISIBLE_DEVICES", "treats it as unset"}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := Visibility(tc.backend, tc.env)
			require.Len(t, got, len(tc.want), "%v", got)
			for i, w := range tc.want {
				require.Equal(t, w.name, got[i].Name)
				require.Contains(t, got[i].Effect, w.effect)
			}
		})
	}
}
