package gpu

import "fmt"

// VisibleVar is one device-visibility variable that is set, with what the named
// backend's runtime does with it. The runtimes apply these at initialisation, before
// Strata sees any device, so a device they hide is never listed; these lines are what
// list-devices and selection errors print so a user can see why.
type VisibleVar struct {
	Backend string `json:"backend"` // which runtime reads it
	Name    string `json:"name"`
	Value   string `json:"value"`
	Effect  string `json:"effect"`
}

func (v VisibleVar) String() string {
	return fmt.Sprintf("%s: %s=%q is set: %s", v.Backend, v.Name, v.Value, v.Effect)
}

// Visibility returns the visibility variables that apply to backend ("cuda" or "hip"),
// in the order the runtime applies them, from getenv (os.LookupEnv in programs, a map
// in tests). The rules are the runtimes' own (gpu-abi.md §1.2):
//   - CUDA reads CUDA_VISIBLE_DEVICES at cuInit; an empty value hides every device.
//   - ROCr reads ROCR_VISIBLE_DEVICES below HIP; an empty value hides every device.
//   - HIP reads HIP_VISIBLE_DEVICES on top of ROCr's list; an empty value is unset.
//   - HIP reads CUDA_VISIBLE_DEVICES only when HIP_VISIBLE_DEVICES is empty or unset
//     (so a value meant for an NVIDIA card also filters AMD cards); empty is unset.
//
// In every list, an entry the runtime cannot parse ends the list.
func Visibility(backend string, getenv func(string) (string, bool)) []VisibleVar {
	var out []VisibleVar
	add := func(name, effect string) {
		if v, ok := getenv(name); ok {
			if v == "" && effect == "" {
				effect = "empty, so the runtime treats it as unset"
			}
			if effect == "" {
				effect = "lists the devices the runtime shows, in that order; indices count from 0 within them"
			}
			out = append(out, VisibleVar{Backend: backend, Name: name, Value: v, Effect: effect})
		}
	}
	switch backend {
	case "cuda":
		if v, ok := getenv("CUDA_VISIBLE_DEVICES"); ok && v == "" {
			add("CUDA_VISIBLE_DEVICES", "empty, so CUDA shows no device at all")
		} else {
			add("CUDA_VISIBLE_DEVICES", "")
		}
	case "hip":
		if v, ok := getenv("ROCR_VISIBLE_DEVICES"); ok && v == "" {
			add("ROCR_VISIBLE_DEVICES", "empty, so ROCm shows no device at all")
		} else {
			add("ROCR_VISIBLE_DEVICES", "")
		}
		hip, hipSet := getenv("HIP_VISIBLE_DEVICES")
		add("HIP_VISIBLE_DEVICES", "")
		if hipSet && hip != "" {
			if _, ok := getenv("CUDA_VISIBLE_DEVICES"); ok {
				add("CUDA_VISIBLE_DEVICES", "ignored by HIP because HIP_VISIBLE_DEVICES is set")
			}
		} else if v, ok := getenv("CUDA_VISIBLE_DEVICES"); ok && v != "" {
			add("CUDA_VISIBLE_DEVICES", "HIP applies it to AMD devices too, because HIP_VISIBLE_DEVICES is empty or unset")
		} else {
			add("CUDA_VISIBLE_DEVICES", "")
		}
	}
	return out
}
