package gguf

import (
	"fmt"
	"strconv"
	"strings"
)

// ValueType is the type tag of a metadata value (enum gguf_type).
type ValueType uint32

// Metadata value types, with their GGUF ids.
const (
	TypeUint8     ValueType = 0
	TypeInt8      ValueType = 1
	TypeUint16    ValueType = 2
	TypeInt16     ValueType = 3
	TypeUint32    ValueType = 4
	TypeInt32     ValueType = 5
	TypeFloat32   ValueType = 6
	TypeBool      ValueType = 7
	TypeString    ValueType = 8
	TypeArray     ValueType = 9
	TypeUint64    ValueType = 10
	TypeInt64     ValueType = 11
	TypeFloat64   ValueType = 12
	numValueTypes           = 13
)

var valueTypeNames = [numValueTypes]string{"UINT8", "INT8", "UINT16", "INT16", "UINT32", "INT32",
	"FLOAT32", "BOOL", "STRING", "ARRAY", "UINT64", "INT64", "FLOAT64"}

// valueSizes is the encoded size of each fixed-size type; 0 for STRING and ARRAY.
var valueSizes = [numValueTypes]uint64{1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8}

func (t ValueType) String() string {
	if t < numValueTypes {
		return valueTypeNames[t]
	}
	return "type(" + strconv.FormatUint(uint64(t), 10) + ")"
}

func (t ValueType) integer() bool {
	switch t {
	case TypeUint8, TypeInt8, TypeUint16, TypeInt16, TypeUint32, TypeInt32, TypeUint64, TypeInt64:
		return true
	}
	return false
}

// Value is one metadata value. It holds a Go value of the matching type: uint8, int8,
// uint16, int16, uint32, int32, float32, bool, string, uint64, int64, float64, or for an
// array a slice of one of those ([]string for string arrays).
type Value struct {
	typ  ValueType
	elem ValueType // element type of an array
	x    any
}

// KV is one metadata entry; File.KVs lists them in file order.
type KV struct {
	Key   string
	Value Value
}

// Type is the value's GGUF type (TypeArray for arrays).
func (v Value) Type() ValueType { return v.typ }

// ElemType is an array's element type; meaningless for scalars.
func (v Value) ElemType() ValueType { return v.elem }

// Any returns the Go value (see Value). Slices are shared: do not modify them.
func (v Value) Any() any { return v.x }

// Len is an array's element count, or 1 for a scalar.
func (v Value) Len() int {
	if v.typ != TypeArray {
		return 1
	}
	switch a := v.x.(type) {
	case []uint8:
		return len(a)
	case []int8:
		return len(a)
	case []uint16:
		return len(a)
	case []int16:
		return len(a)
	case []uint32:
		return len(a)
	case []int32:
		return len(a)
	case []float32:
		return len(a)
	case []bool:
		return len(a)
	case []string:
		return len(a)
	case []uint64:
		return len(a)
	case []int64:
		return len(a)
	case []float64:
		return len(a)
	}
	return 0
}

// TypeName is "UINT32" for a scalar and "[]STRING" for an array.
func (v Value) TypeName() string {
	if v.typ == TypeArray {
		return "[]" + v.elem.String()
	}
	return v.typ.String()
}

// ValueOf wraps a Go value as a metadata Value (the types listed under Value, or a Value).
func ValueOf(x any) (Value, error) {
	switch x := x.(type) {
	case Value:
		return x, nil
	case uint8:
		return Value{TypeUint8, 0, x}, nil
	case int8:
		return Value{TypeInt8, 0, x}, nil
	case uint16:
		return Value{TypeUint16, 0, x}, nil
	case int16:
		return Value{TypeInt16, 0, x}, nil
	case uint32:
		return Value{TypeUint32, 0, x}, nil
	case int32:
		return Value{TypeInt32, 0, x}, nil
	case float32:
		return Value{TypeFloat32, 0, x}, nil
	case bool:
		return Value{TypeBool, 0, x}, nil
	case string:
		return Value{TypeString, 0, x}, nil
	case uint64:
		return Value{TypeUint64, 0, x}, nil
	case int64:
		return Value{TypeInt64, 0, x}, nil
	case float64:
		return Value{TypeFloat64, 0, x}, nil
	case []uint8:
		return Value{TypeArray, TypeUint8, x}, nil
	case []int8:
		return Value{TypeArray, TypeInt8, x}, nil
	case []uint16:
		return Value{TypeArray, TypeUint16, x}, nil
	case []int16:
		return Value{TypeArray, TypeInt16, x}, nil
	case []uint32:
		return Value{TypeArray, TypeUint32, x}, nil
	case []int32:
		return Value{TypeArray, TypeInt32, x}, nil
	case []float32:
		return Value{TypeArray, TypeFloat32, x}, nil
	case []bool:
		return Value{TypeArray, TypeBool, x}, nil
	case []string:
		return Value{TypeArray, TypeString, x}, nil
	case []uint64:
		return Value{TypeArray, TypeUint64, x}, nil
	case []int64:
		return Value{TypeArray, TypeInt64, x}, nil
	case []float64:
		return Value{TypeArray, TypeFloat64, x}, nil
	}
	return Value{}, fmt.Errorf("gguf: no GGUF metadata type for Go type %T (use uint8..uint64, int8..int64, float32, float64, bool, string or a slice of one)", x)
}

// Summary formats the value for people: strings quoted with escapes (never raw bytes to
// a terminal), arrays with at most max elements and the count of the rest.
func (v Value) Summary(max int) string {
	if v.typ != TypeArray {
		return formatScalar(v.x)
	}
	n := v.Len()
	var b strings.Builder
	b.WriteString("[")
	for i := 0; i < n && i < max; i++ {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(formatScalar(index(v.x, i)))
	}
	if n > max {
		fmt.Fprintf(&b, ", … %d more", n-max)
	}
	b.WriteString("]")
	return b.String()
}

func formatScalar(x any) string {
	switch x := x.(type) {
	case string:
		return strconv.Quote(x)
	case float32:
		return strconv.FormatFloat(float64(x), 'g', -1, 32)
	case float64:
		return strconv.FormatFloat(x, 'g', -1, 64)
	}
	return fmt.Sprint(x)
}

func index(x any, i int) any {
	switch a := x.(type) {
	case []uint8:
		return a[i]
	case []int8:
		return a[i]
	case []uint16:
		return a[i]
	case []int16:
		return a[i]
	case []uint32:
		return a[i]
	case []int32:
		return a[i]
	case []float32:
		return a[i]
	case []bool:
		return a[i]
	case []string:
		return a[i]
	case []uint64:
		return a[i]
	case []int64:
		return a[i]
	case []float64:
		return a[i]
	}
	return nil
}
