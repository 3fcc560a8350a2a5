package parity

import (
	"fmt"
	"math/rand/v2"
	"sort"
)

// Family is one kernel family's parity definition, registered from parity/<family>.go.
type Family struct {
	Name string // as in kernels/abi: "quantize_q8_1"
	// Bounds holds, per variant, every check the variant's output must pass. A variant
	// the code object has but Bounds lacks fails: bounds come before measurements.
	Bounds map[string][]Bound
	// Cases are the shapes, each run on every variant (Applies allowing).
	Cases []Case
	// Applies, when set, says whether case c runs on variant (a variant whose kernel has a
	// narrower contract than the family's); nil = every case on every variant.
	Applies func(variant string, c Case) bool
	// Run draws inputs from rng for case c, runs symbol through h, and compares the
	// result with the reference under bounds. It returns what the log should show.
	Run func(h *Harness, symbol string, c Case, bounds []Bound, rng *rand.Rand) (Outcome, error)
	// SelfCheck runs the reference on case c's inputs against its own float64 bounds
	// where that is meaningful (always-run, no GPU); nil when there is nothing to check.
	SelfCheck func(c Case, rng *rand.Rand) error
}

// Case is one shape. Dims are family-specific (rows, cols, K, ...), named in Name.
type Case struct {
	Name string // subtest name: "rows=7,cols=4000"
	Dims []int
}

// Outcome is what one parity run measured, for the log.
type Outcome struct {
	Reports map[string]Report
	Kernel  float64 // device time of one launch, microseconds
	Bytes   int64   // bytes the launch must move (read + written), for GB/s
}

var families = map[string]*Family{}

// register adds a family; a duplicate is a programmer error.
func register(f *Family) {
	if _, dup := families[f.Name]; dup {
		panic("parity: family registered twice: " + f.Name)
	}
	families[f.Name] = f
}

// Families returns the registered families sorted by name.
func Families() []*Family {
	out := make([]*Family, 0, len(families))
	for _, f := range families {
		out = append(out, f)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// checkAll applies every bound to its report.
func checkAll(bounds []Bound, reports map[string]Report) error {
	for _, b := range bounds {
		r, ok := reports[b.Name]
		if !ok {
			return fmt.Errorf("check %q declared but not measured", b.Name)
		}
		if err := b.Verify(r); err != nil {
			return err
		}
	}
	return nil
}
