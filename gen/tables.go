package main

// tableFiles renders the format lookup tables in kernels/tables (one value a line) into
// a Go file for package quant and a C include for the kernel templates, so both are
// made from the same data. root is the repository root.
//
// Placeholder until the quant work lands its renderer.
func tableFiles(root string) ([]File, error) { return nil, nil }
