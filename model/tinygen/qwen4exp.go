package tinygen

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"sort"
)

// ListEntry is one tensor of the list an oracle.json records under "tensors" (the
// qwen4exp oracles): name, dtype (BF16 or I64), PyTorch shape, value kind, and for I64
// tensors the values themselves.
type ListEntry struct {
	Name   string  `json:"name"`
	DType  string  `json:"dtype"`
	Shape  []int   `json:"shape"`
	Kind   string  `json:"kind"`
	Values []int64 `json:"values"`
}

// SafetensorsFromOracle rebuilds model.safetensors from an oracle.json that records its
// own tensor list, seed and generator key ("model_type_key"), as the qwen4exp oracles do
// (their generator, make_weights_qwen4exp.py, is the sibling generator with that key
// prefix and I64 constant tensors). The caller checks the result against the sha256 the
// oracle records (weights_sha256).
func SafetensorsFromOracle(oracleJSON []byte) ([]byte, error) {
	var o struct {
		Seed    int         `json:"seed"`
		Key     string      `json:"model_type_key"`
		Tensors []ListEntry `json:"tensors"`
	}
	if err := json.Unmarshal(oracleJSON, &o); err != nil {
		return nil, fmt.Errorf("tinygen: oracle.json: %w", err)
	}
	if o.Key == "" || len(o.Tensors) == 0 {
		return nil, fmt.Errorf("tinygen: oracle.json has no model_type_key or tensor list; it is not a self-describing oracle")
	}
	ts := append([]ListEntry(nil), o.Tensors...)
	sort.Slice(ts, func(a, b int) bool { return ts[a].Name < ts[b].Name })
	var sts []stTensor
	luts := map[string]*[65536]uint16{}
	for _, t := range ts {
		n := 1
		for _, d := range t.Shape {
			n *= d
		}
		var b []byte
		switch t.DType {
		case "BF16":
			lut := luts[t.Kind]
			if lut == nil {
				var err error
				if lut, err = makeLUT(t.Kind); err != nil {
					return nil, err
				}
				luts[t.Kind] = lut
			}
			b = genTensor(o.Key, o.Seed, t.Name, n, lut)
		case "I64":
			if len(t.Values) != n {
				return nil, fmt.Errorf("tinygen: tensor %s: %d values for shape %v", t.Name, len(t.Values), t.Shape)
			}
			b = make([]byte, 8*n)
			for i, v := range t.Values {
				binary.LittleEndian.PutUint64(b[8*i:], uint64(v))
			}
		default:
			return nil, fmt.Errorf("tinygen: tensor %s: dtype %s is not generated (BF16, I64)", t.Name, t.DType)
		}
		sts = append(sts, stTensor{t.Name, t.DType, t.Shape, b})
	}
	return encodeSafetensors(sts), nil
}
