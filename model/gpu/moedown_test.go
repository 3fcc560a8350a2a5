package gpu

import (
	"strings"
	"testing"

	"github.com/strata-hip/strata/kernels/abi"
)

// TestEngineMoeDown (emulator): a resident decode token's down projections run as
// moe_decode phase 5 (the experts selected from the logits and slot tables, not read from
// phase 3's ids, err and wts) unless OldMoeDown, and the logits are phase 2's bit for bit,
// in graphs and without. The emulator's phase 5 selects from the logits it is given, so a
// token that handed it the wrong logits would show in the bits.
func TestEngineMoeDown(t *testing.T) {
	const steps = 4
	for _, preset := range []string{"tiny", "tiny-next"} {
		t.Run(preset, func(t *testing.T) {
			old := runGraph(t, preset, Options{OldMoeDown: true}, nil, steps, true, false)
			if old.err != nil {
				t.Fatal(old.err)
			}
			for _, c := range []struct {
				name string
				o    Options
				want int32
			}{
				{"phase 5, graphs", Options{}, 5},
				{"phase 5, plain launches", Options{NoGraph: true}, 5},
				{"phase 5 without PDL", Options{NoPDL: true}, 5},
				{"phase 2, plain launches", Options{OldMoeDown: true, NoGraph: true}, 2},
			} {
				phases := map[int32]int{}
				setup := func(f *fakeDriver) {
					f.onArgs = func(sym string, b []byte) {
						if strings.HasPrefix(sym, "strata_moe_decode_") {
							phases[args[abi.MoeDecodeArgs](b).Phase]++
						}
					}
				}
				r := runGraph(t, preset, c.o, setup, steps, true, false)
				if r.err != nil {
					t.Fatal(r.err)
				}
				sameLogits(t, c.name+" against OldMoeDown", r.logs, old.logs)
				other := int32(7 - c.want)
				if phases[c.want] == 0 || phases[other] != 0 {
					t.Fatalf("%s: moe_decode launches by phase %v, want phase %d and no phase %d", c.name, phases, c.want, other)
				}
				t.Logf("%s: launches by phase %v", c.name, phases)
			}
		})
	}
}
