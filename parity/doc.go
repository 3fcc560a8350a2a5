// Package parity proves every generated kernel variant against a float64 (or exact
// integer) Go reference, under bounds declared with their derivations before the
// kernel was measured.
//
// One file per kernel family (parity/<family>.go) holds the reference, the bounds and
// the cases, and registers a Family. The generic driver is parity_test.go:
//
//	TestParity/<target>/<family>/<variant>/<shape>
//
// runs every registered family on the selected device for every variant its code
// object has. Each run draws fresh random inputs (the seed is printed; STRATA_SEED
// replays one), with outliers and zero blocks; output buffers are poisoned before each
// launch and launched twice under two poisons, so an element the kernel never writes
// is caught even if its right value equals a poison; guard bytes around every buffer
// must come back unchanged.
//
// Environment: STRATA_CO_DIR (default build/co under the module root) holds the code
// objects; STRATA_DEVICE selects a device like strata-run --device; without a GPU or
// code objects the driver skips, naming what is missing, and STRATA_REQUIRE_GPU=1
// turns that into a failure.
//
// Adding a family is one file, parity/<family>.go, whose init calls register with a
// Family: Bounds per variant (each with its derivation, declared before the kernel is
// measured), Cases (shapes, including ragged ones), Run (draw inputs, build the
// kernels/abi argument struct, run it through the Harness — Input, InOut, Output, Run —
// and compare with the reference using CompareExact / CompareRows), and optionally
// SelfCheck (the reference against its own float64 bounds, run on the CPU). Then
// regenerate the ledger. Nothing in parity_test.go changes.
//
// Bounds are rendered into testdata/bounds.txt; TestBoundsLedger fails when the
// declared bounds and the ledger differ (`go test ./parity -run TestBoundsLedger
// -write` rewrites it), so loosening a bound is a visible diff.
package parity
