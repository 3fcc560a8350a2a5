package gguf

import (
	"fmt"
	"math"
)

// Metadata comes from the first shard; later shards of a split model carry only split keys.

// KVs lists the metadata in file order. Do not modify it.
func (f *File) KVs() []KV { return f.shards[0].kvs }

// Value returns the value under key.
func (f *File) Value(key string) (Value, bool) {
	s := f.shards[0]
	i, ok := s.keys[key]
	if !ok {
		return Value{}, false
	}
	return s.kvs[i].Value, true
}

// Has reports whether key is present.
func (f *File) Has(key string) bool { _, ok := f.shards[0].keys[key]; return ok }

// KeyOffset is the file offset of key's entry in the first shard, or -1.
func (f *File) KeyOffset(key string) int64 { return f.shards[0].kvOffset(key) }

// lookup returns key's value or a missing-key error naming file and key.
func (f *File) lookup(key string) (Value, int64, error) {
	s := f.shards[0]
	i, ok := s.keys[key]
	if !ok {
		return Value{}, -1, &Error{Path: s.path, Offset: -1, Rule: RuleMissingKey, Field: fmt.Sprintf("key %q", key),
			Detail: "required metadata key is absent (wrong architecture or an incomplete conversion?)", Err: ErrMissingKey}
	}
	return s.kvs[i].Value, s.kvOff[i], nil
}

func (f *File) typeErr(key string, off int64, rule Rule, v Value, want string) error {
	return newErr(f.shards[0].path, off, rule, fmt.Sprintf("key %q", key), "has type %s, expected %s", v.TypeName(), want)
}

// scalar fetches key and requires exactly GGUF type vt (no silent coercion, K14).
func scalar[T any](f *File, key string, vt ValueType) (T, error) {
	var zero T
	v, off, err := f.lookup(key)
	if err != nil {
		return zero, err
	}
	if v.typ != vt {
		return zero, f.typeErr(key, off, RuleScalarType, v, vt.String())
	}
	return v.x.(T), nil
}

// String returns a STRING value.
func (f *File) String(key string) (string, error) { return scalar[string](f, key, TypeString) }

// Uint32 returns a UINT32 value (exactly that type, as llama.cpp requires).
func (f *File) Uint32(key string) (uint32, error) { return scalar[uint32](f, key, TypeUint32) }

// Uint64 returns a UINT64 value.
func (f *File) Uint64(key string) (uint64, error) { return scalar[uint64](f, key, TypeUint64) }

// Int32 returns an INT32 value.
func (f *File) Int32(key string) (int32, error) { return scalar[int32](f, key, TypeInt32) }

// Float32 returns a FLOAT32 value.
func (f *File) Float32(key string) (float32, error) { return scalar[float32](f, key, TypeFloat32) }

// Bool returns a BOOL value.
func (f *File) Bool(key string) (bool, error) { return scalar[bool](f, key, TypeBool) }

// Int returns a value of any integer type (UINT8..INT64) as an int, failing if it does
// not fit. Floats, bools and strings are rejected (K14), never converted.
func (f *File) Int(key string) (int, error) {
	v, off, err := f.lookup(key)
	if err != nil {
		return 0, err
	}
	n, ok := intOf(v.x)
	if !ok {
		return 0, f.typeErr(key, off, RuleScalarType, v, "an integer type")
	}
	if n.neg && n.v > -math.MinInt || !n.neg && n.v > math.MaxInt {
		return 0, newErr(f.shards[0].path, off, RuleHparamRange, fmt.Sprintf("key %q", key), "value does not fit in an int")
	}
	if n.neg {
		return -int(n.v), nil
	}
	return int(n.v), nil
}

// Float64 returns a FLOAT32 or FLOAT64 value as float64 (widening is exact).
func (f *File) Float64(key string) (float64, error) {
	v, off, err := f.lookup(key)
	if err != nil {
		return 0, err
	}
	switch x := v.x.(type) {
	case float32:
		return float64(x), nil
	case float64:
		return x, nil
	}
	return 0, f.typeErr(key, off, RuleScalarType, v, "FLOAT32 or FLOAT64")
}

type signed struct {
	v   uint64 // magnitude
	neg bool
}

func intOf(x any) (signed, bool) {
	mag := func(v int64) signed {
		if v < 0 {
			return signed{uint64(-(v + 1)) + 1, true}
		}
		return signed{uint64(v), false}
	}
	switch x := x.(type) {
	case uint8:
		return signed{uint64(x), false}, true
	case uint16:
		return signed{uint64(x), false}, true
	case uint32:
		return signed{uint64(x), false}, true
	case uint64:
		return signed{x, false}, true
	case int8:
		return mag(int64(x)), true
	case int16:
		return mag(int64(x)), true
	case int32:
		return mag(int64(x)), true
	case int64:
		return mag(x), true
	}
	return signed{}, false
}

// array fetches key and requires an array of exactly element type et (K12).
func array[T any](f *File, key string, et ValueType) ([]T, error) {
	v, off, err := f.lookup(key)
	if err != nil {
		return nil, err
	}
	if v.typ != TypeArray {
		return nil, f.typeErr(key, off, RuleScalarType, v, "[]"+et.String())
	}
	if v.elem != et {
		return nil, f.typeErr(key, off, RuleArrayElemType, v, "[]"+et.String())
	}
	return v.x.([]T), nil
}

// Strings returns a []STRING value. Elements are the file's bytes and are NOT checked to
// be UTF-8 (tokenizer vocabularies may hold byte fragments): quote them before printing.
func (f *File) Strings(key string) ([]string, error) { return array[string](f, key, TypeString) }

// Int32s returns an []INT32 value.
func (f *File) Int32s(key string) ([]int32, error) { return array[int32](f, key, TypeInt32) }

// Uint32s returns a []UINT32 value.
func (f *File) Uint32s(key string) ([]uint32, error) { return array[uint32](f, key, TypeUint32) }

// Uint8s returns a []UINT8 value.
func (f *File) Uint8s(key string) ([]uint8, error) { return array[uint8](f, key, TypeUint8) }

// Float32s returns a []FLOAT32 value.
func (f *File) Float32s(key string) ([]float32, error) { return array[float32](f, key, TypeFloat32) }

// Bools returns a []BOOL value.
func (f *File) Bools(key string) ([]bool, error) { return array[bool](f, key, TypeBool) }

// Ints returns an array of any integer element type as []int (each checked to fit).
// A float, bool or string array is rejected (K12).
func (f *File) Ints(key string) ([]int, error) {
	v, off, err := f.lookup(key)
	if err != nil {
		return nil, err
	}
	if v.typ != TypeArray {
		return nil, f.typeErr(key, off, RuleScalarType, v, "an integer array")
	}
	if !v.elem.integer() {
		return nil, f.typeErr(key, off, RuleArrayElemType, v, "an integer array")
	}
	out := make([]int, v.Len())
	for i := range out {
		n, _ := intOf(index(v.x, i))
		if n.neg && n.v > -math.MinInt || !n.neg && n.v > math.MaxInt {
			return nil, newErr(f.shards[0].path, off, RuleHparamRange, fmt.Sprintf("key %q element %d", key, i), "value does not fit in an int")
		}
		out[i] = int(n.v)
		if n.neg {
			out[i] = -int(n.v)
		}
	}
	return out, nil
}

// ArrayLen returns the element type and length of the array under key.
func (f *File) ArrayLen(key string) (ValueType, int, error) {
	v, off, err := f.lookup(key)
	if err != nil {
		return 0, 0, err
	}
	if v.typ != TypeArray {
		return 0, 0, f.typeErr(key, off, RuleScalarType, v, "an array")
	}
	return v.elem, v.Len(), nil
}

// Architecture returns general.architecture.
func (f *File) Architecture() (string, error) { return f.String("general.architecture") }
