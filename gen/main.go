// Command gen renders every kernel variant and the Go ABI files from the Target and Spec
// tables in package kernels, after validating both tables.
package main

func main() {}
