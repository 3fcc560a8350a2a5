package kernels

// Variant axes shared by families that come in a matrix-op and a dp4a flavour. The "mma"
// value needs an int8 matrix instruction, so targets without one (gfx1030) get only "dp4a".
var axisOp = Axis{Name: "op", Values: []Value{
	{Name: "mma", Needs: NeedInt8Matrix, Promise: ISAInt8Matrix},
	{Name: "dp4a", Promise: ISADot4},
}}

// axisWeightType lists every weight type the decode families handle. Quantized types promise
// the target's dot4 instruction in mmvq (their block dots are int8 dot4 chains); F16 and
// BF16 have no integer path.
func axisWeightType(dot4 ISA) Axis {
	return Axis{Name: "type", Values: []Value{
		{Name: "f16"},
		{Name: "bf16"},
		{Name: "q80", Promise: dot4},
		{Name: "q20", Promise: dot4},
		{Name: "q4k", Promise: dot4},
		{Name: "q6k", Promise: dot4},
		{Name: "iq2xs", Promise: dot4},
		{Name: "iq3xxs", Promise: dot4},
		{Name: "iq3s", Promise: dot4},
		{Name: "iq1m", Promise: dot4},
	}}
}

// Specs is the table of kernel families, sorted by Family. A new family is one row here,
// one template kernels/templates/<Template>.tmpl, and `go generate ./...`.
var Specs = []Spec{
	{
		Family:   "dequant",
		Template: "dequant",
		Doc: "weight rows → f32 or f16 rows (y[r][k] = W[r][k], ggml's to_float values); one thread per 32-element group, " +
			"grid-stride; launch grid (max(1, min(ceil(rows·k/32/256), 65535)), 1, 1), block (256, 1, 1).",
		Threads: 256,
		Args: []Arg{
			{Name: "w", Type: ArgPtr, CType: "const u8", Doc: "weights: rows × k/QK blocks, rows contiguous; 16-byte aligned"},
			{Name: "y", Type: ArgPtr, CType: "u8", Doc: "output rows of f32 or f16 (per variant), y_stride elements apart; 16-byte aligned"},
			{Name: "rows", Type: ArgI32, Doc: "number of rows (> 0)"},
			{Name: "k", Type: ArgI32, Doc: "elements per row, a positive multiple of the type's block size"},
			{Name: "y_stride", Type: ArgI32, Doc: "elements between output rows, a multiple of 8, ≥ k"},
		},
		Axes: []Axis{axisWeightType(ISANone), {Name: "out", Values: []Value{{Name: "f32"}, {Name: "f16"}}}},
	},
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
		Family:   "mmvq",
		Template: "mmvq",
		Doc: "y[z][c][r] = Σ_k W_z[r][k]·x_z[c][k] for 1..8 columns: Q8_1 activations and exact dot4 block dots with an f32 " +
			"scale fold (F16/BF16: f32 activations, f32 fma); matrices z are dense (w + z·w_mat_bytes) or experts through a slot " +
			"table; launch grid (ceil(rows/8), 1, matrices), block (256, 1, 1).",
		Threads: 256,
		Args: []Arg{
			{Name: "w", Type: ArgPtr, CType: "const u8", Doc: "weights of matrix 0 when slots is null: rows × k/QK blocks, rows contiguous, 16-byte aligned; matrix z at w + z·w_mat_bytes"},
			{Name: "slots", Type: ArgPtr, CType: "const u64", Doc: "expert slot table: slots[id] = device address of expert id's weights (16-byte aligned), 0 = not resident; null = dense matrices through w"},
			{Name: "ids", Type: ArgPtr, CType: "const i32", Doc: "with slots: ids[z] = expert id of matrix z"},
			{Name: "xq", Type: ArgPtr, CType: "const u8", Doc: "quantized types: Q8_1 activations (36-byte blocks), column c of matrix z at element z·x_mat_stride + c·x_col_stride"},
			{Name: "xf", Type: ArgPtr, CType: "const f32", Doc: "F16/BF16: f32 activations, same indexing as xq; 16-byte aligned"},
			{Name: "y", Type: ArgPtr, CType: "f32", Doc: "output: y[z·y_mat_stride + c·y_col_stride + r]"},
			{Name: "err", Type: ArgPtr, CType: "u32", Doc: "err[z] = 1 when matrix z's expert has no slot (its outputs are then zeros), else 0; may be null only when slots is null"},
			{Name: "w_mat_bytes", Type: ArgI64, Doc: "bytes between dense matrices (slots null)"},
			{Name: "rows", Type: ArgI32, Doc: "rows per matrix (> 0)"},
			{Name: "k", Type: ArgI32, Doc: "elements per row, a positive multiple of the type's block size"},
			{Name: "ncols", Type: ArgI32, Doc: "activation columns, 1..8"},
			{Name: "nslots", Type: ArgI32, Doc: "entries in slots; ids outside [0, nslots) are missing experts"},
			{Name: "x_col_stride", Type: ArgI32, Doc: "activation elements between columns, a multiple of 32, ≥ k"},
			{Name: "x_mat_stride", Type: ArgI32, Doc: "activation elements between matrices, a multiple of 32; 0 = all matrices share x"},
			{Name: "y_col_stride", Type: ArgI32, Doc: "output elements between columns, ≥ rows"},
			{Name: "y_mat_stride", Type: ArgI32, Doc: "output elements between matrices"},
		},
		Axes: []Axis{axisWeightType(ISADot4)},
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
