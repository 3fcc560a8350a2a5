package gpu

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/strata-hip/strata/kernels/abi"
	"github.com/strata-hip/strata/quant"
	rt "github.com/strata-hip/strata/runtime/gpu"
)

// ErrMissingKernel marks an engine that cannot start because a kernel it needs is not
// in this build (no code object for the device's target, or no variant for a weight
// type); strata-run --backend auto then falls back to the CPU.
var ErrMissingKernel = errors.New("model/gpu: missing kernel")

// families the decode engine launches (qwen3next adds gated_delta_net); sample is the
// greedy token of ForwardArgmax.
var families = []string{"rmsnorm", "rmsnorm_row", "mmvq", "rope", "attention_decode", "quantize_q8_1", "moe_decode", "sample"}

// probeFamily is the mapping-probe kernel (kernels/templates/fill.tmpl): where the
// runtime has no probe of its own (rt.Device.BuiltinProbe: HIP), the engine registers its
// strata_fill_u32 with the device (registerProbe) so that mapped expert memory can be
// proven, and Options.Misses MissAuto can map; its arguments are runtime/gpu's probe
// struct (runtime/gpu TestProbeArgsMatchABI).
const probeFamily = "fill"

// kernelSet is the loaded code objects of one device.
type kernelSet struct {
	target string
	mods   map[string]*rt.Module
	// probeErr: why no mapping probe could be registered on a device without a built-in
	// one (registerProbe); nil when one is, or none is needed.
	probeErr error
}

// loadKernels loads every family the engine needs from dir (the `just co` output).
func loadKernels(dev *rt.Device, dir string, families []string) (*kernelSet, error) {
	arch := dev.Info().Arch
	target, ok := abi.TargetFor(arch)
	if !ok {
		return nil, fmt.Errorf("%w: no kernels for %s (%s) in this build (have %s)", ErrMissingKernel, dev.Info().Name, arch, strings.Join(abi.TargetNames(), ", "))
	}
	ks := &kernelSet{target: target, mods: map[string]*rt.Module{}}
	for _, f := range families {
		if err := ks.load(dev, dir, f); err != nil {
			ks.close()
			return nil, err
		}
	}
	return ks, nil
}

// load loads family's code object from dir.
func (ks *kernelSet) load(dev *rt.Device, dir, family string) error {
	co, ok := abi.Find(ks.target, family)
	if !ok {
		return fmt.Errorf("%w: the GPU engine needs kernel family %s, which this build has no code object of for %s (kernels/abi); use --backend cpu",
			ErrMissingKernel, family, ks.target)
	}
	img, err := os.ReadFile(filepath.Join(dir, co.Path))
	if err != nil {
		return fmt.Errorf("%w: kernel family %s: %v (build the code objects with `just co`, or set STRATA_CO_DIR)", ErrMissingKernel, family, err)
	}
	m, err := dev.LoadModule(rt.CodeObject{Name: co.Path, Target: co.Target, Image: img})
	if err != nil {
		return err
	}
	ks.mods[family] = m
	return nil
}

// registerProbe makes the device able to prove mapped host memory before anything is
// pinned mapped: where its runtime has no probe of its own (rt.Device.BuiltinProbe), it
// loads the fill family from dir and registers strata_fill_u32 with the device; the
// registration ends when the set is closed (unloading the module unregisters it). It
// returns, and keeps as probeErr, why it could not (a missing fill code object): the
// engine then copies misses under MissAuto, saying so, and refuses MissMap.
func (ks *kernelSet) registerProbe(dev *rt.Device, dir string) error {
	if dev.BuiltinProbe() {
		return nil
	}
	ks.probeErr = func() error {
		if ks.mods[probeFamily] == nil {
			if err := ks.load(dev, dir, probeFamily); err != nil {
				return err
			}
		}
		fn, err := ks.fn(probeFamily, "u32")
		if err != nil {
			return err
		}
		dev.SetProbe(fn)
		return nil
	}()
	if ks.probeErr != nil {
		info := dev.Info()
		ks.probeErr = fmt.Errorf("%s (%s) has no built-in mapping probe and the engine could not register its own: %w", info.ID(), info.Name, ks.probeErr)
	}
	return ks.probeErr
}

// fn returns the kernel of family's variant.
func (ks *kernelSet) fn(family, variant string) (*rt.Func, error) {
	co, _ := abi.Find(ks.target, family)
	sym, ok := co.Symbol(variant)
	if !ok {
		return nil, fmt.Errorf("%w: kernel family %s has no variant %s for %s", ErrMissingKernel, family, variant, ks.target)
	}
	return ks.mods[family].Func(sym)
}

// rowsPerBlock is the weight rows one block of family's variant covers (kernels/abi's
// Variant.RowsPerBlock: the row-blocked families' launch grid is ceil(rows/it)).
func (ks *kernelSet) rowsPerBlock(family, variant string) (int, error) {
	co, _ := abi.Find(ks.target, family)
	for _, v := range co.Variants {
		if v.Name == variant && v.RowsPerBlock > 0 {
			return v.RowsPerBlock, nil
		}
	}
	return 0, fmt.Errorf("%w: kernel family %s variant %s for %s declares no rows per block (kernels/abi)", ErrMissingKernel, family, variant, ks.target)
}

func (ks *kernelSet) close() error {
	var errs []error
	for _, m := range ks.mods {
		errs = append(errs, m.Unload())
	}
	return errors.Join(errs...)
}

// typeVariant is the mmvq / moe_decode variant name of a weight type.
var typeVariant = map[quant.Type]string{
	quant.F16: "f16", quant.BF16: "bf16", quant.Q8_0: "q80", quant.Q2_0: "q20", quant.Q4_K: "q4k",
	quant.Q6_K: "q6k", quant.IQ2_XS: "iq2xs", quant.IQ3_XXS: "iq3xxs", quant.IQ3_S: "iq3s", quant.IQ1_M: "iq1m",
}
