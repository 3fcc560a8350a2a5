package model

// Matmul exposes matmul to the external benchmarks (BenchmarkMatVec).
var Matmul = matmul
