package kernels

// Variant axes shared by families that come in a matrix-op and a dp4a flavour. The "mma"
// value needs an int8 matrix instruction, so targets without one (gfx1030) get only "dp4a".
var axisOp = Axis{Name: "op", Values: []Value{
	{Name: "mma", Needs: NeedInt8Matrix, Promise: ISAInt8Matrix},
	{Name: "dp4a", Promise: ISADot4},
}}

// Specs is the table of kernel families, sorted by Family. A new family is one row here,
// one template kernels/templates/<Template>.tmpl, and `go generate ./...`.
var Specs = []Spec{
	{
		Family:   "imma_tile",
		Template: "imma_tile",
		Doc: "C[M×N] int32 += A[M×K] int8 · B[K×N] int8, one 16×16 tile of C per 32-thread block; " +
			"launch grid (N/16, M/16, 1), block (32, 1, 1).",
		Threads: 32,
		Args: []Arg{
			{Name: "a", Type: ArgPtr, CType: "const signed char", Doc: "A, M×K int8 row-major, 16-byte aligned"},
			{Name: "bt", Type: ArgPtr, CType: "const signed char", Doc: "B transposed: N×K int8 row-major (row n holds column n of B, like a weight matrix), 16-byte aligned"},
			{Name: "c", Type: ArgPtr, CType: "int", Doc: "C, M×N int32 row-major; read, accumulated into and written back"},
			{Name: "k", Type: ArgI32, Doc: "K, a positive multiple of 16"},
			{Name: "lda", Type: ArgI32, Doc: "bytes between rows of A, a multiple of 16, ≥ K"},
			{Name: "ldbt", Type: ArgI32, Doc: "bytes between rows of Bᵀ, a multiple of 16, ≥ K"},
			{Name: "ldc", Type: ArgI32, Doc: "int32 elements between rows of C, ≥ N"},
		},
		Axes: []Axis{axisOp},
	},
	{
		Family:   "quantize_q8_1",
		Template: "quantize_q8_1",
		Doc: "f32 rows → Q8_1 blocks as ggml's MMVQ activation quantizer (d = amax/127, q = roundf(x/d), " +
			"s = fp16 of the sum of the unquantized x); launch grid (ceil(ncols_padded/256), min(nrows, 65535), 1), block (256, 1, 1).",
		Threads: 256,
		Args: []Arg{
			{Name: "x", Type: ArgPtr, CType: "const float", Doc: "input rows, float32, x_stride elements apart"},
			{Name: "y", Type: ArgPtr, CType: "unsigned char", Doc: "output: nrows × ncols_padded/32 Q8_1 blocks of 36 bytes, rows contiguous"},
			{Name: "ncols", Type: ArgI32, Doc: "valid elements per input row (> 0)"},
			{Name: "ncols_padded", Type: ArgI32, Doc: "elements per output row: a multiple of 32, ≥ ncols; the tail quantizes zeros"},
			{Name: "nrows", Type: ArgI32, Doc: "number of rows (> 0); rows beyond gridDim.y are looped over"},
			{Name: "x_stride", Type: ArgI32, Doc: "float32 elements between input rows, ≥ ncols"},
		},
		Axes: []Axis{{Name: "src", Values: []Value{{Name: "f32"}}}},
	},
}
