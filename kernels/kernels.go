// Package kernels holds the data every generated kernel is made from: the Target table
// (one row per ISA, with methods for every policy question) and the Spec table (one row per
// kernel family: template, packed launch arguments, variant axes). It imports only the
// standard library; gen reads it, validates it and renders kernels/out and kernels/abi.
package kernels

//go:generate go run ../gen
