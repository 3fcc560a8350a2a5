package gguf

import (
	"encoding/binary"
	"fmt"
	"math"
	"unicode"
	"unicode/utf8"
)

// Limits applied while parsing. Counts and lengths are also capped by the bytes left in
// the file, so nothing is allocated beyond roughly the file's size.
const (
	MaxKeyLen        = 65535   // spec cap on a key's length
	MaxStringLen     = 1 << 20 // cap on a string value or string-array element (1 MiB)
	MaxTensorNameLen = 63      // GGML_MAX_NAME (64) less the C string's NUL
	MaxDims          = 4       // GGML_MAX_DIMS
	MaxAlignment     = 1 << 20 // upper bound for general.alignment (1 MiB)
	DefaultAlignment = 32      // alignment when general.alignment is absent

	headerSize        = 24 // magic, version, n_tensors, n_kv
	minKVSize         = 14 // key length 8 + 1-byte key + type 4 + 1-byte value
	minTensorInfoSize = 25 // name length 8 + 1-byte name + n_dims 4 + type 4 + offset 8 (one dim adds 8 more)
)

// KeyAlignment is the metadata key that sets the data alignment.
const KeyAlignment = "general.alignment"

// shard is one parsed, validated GGUF file.
type shard struct {
	path      string
	data      []byte // the whole file (a mapping or a heap copy)
	unmap     func() error
	version   uint32
	kvs       []KV
	kvOff     []int64        // file offset of each KV's key length
	keys      map[string]int // key → index in kvs
	tensors   []TensorInfo
	infoOff   []int64 // file offset of each tensor info (its name length)
	alignment uint64
	dataStart uint64 // aligned start of the data section
	dataEnd   uint64 // end of the last tensor's bytes (unpadded), absolute
	warnings  []*Error
}

type decoder struct {
	b    []byte
	off  uint64
	path string
}

func (d *decoder) left() uint64 { return uint64(len(d.b)) - d.off }

func (d *decoder) errAt(off uint64, rule Rule, field, format string, args ...any) *Error {
	return newErr(d.path, int64(off), rule, field, format, args...)
}

// need reports a truncated file when fewer than n bytes are left.
func (d *decoder) need(n uint64, field string) *Error {
	if n > d.left() {
		return d.errAt(d.off, RuleTruncated, field, "needs %d bytes but the %d-byte file ends %d bytes later (incomplete download? fetch the file again)",
			n, len(d.b), d.left())
	}
	return nil
}

func (d *decoder) u8() uint8   { v := d.b[d.off]; d.off++; return v }
func (d *decoder) u16() uint16 { v := binary.LittleEndian.Uint16(d.b[d.off:]); d.off += 2; return v }
func (d *decoder) u32() uint32 { v := binary.LittleEndian.Uint32(d.b[d.off:]); d.off += 4; return v }
func (d *decoder) u64() uint64 { v := binary.LittleEndian.Uint64(d.b[d.off:]); d.off += 8; return v }

// str reads a length-prefixed string whose length must be ≤ limit and ≤ the bytes left;
// a violation is reported under rule at the length's offset.
func (d *decoder) str(field string, rule Rule, limit uint64) (string, *Error) {
	at := d.off
	if e := d.need(8, field+" length"); e != nil {
		return "", e
	}
	n := d.u64()
	if n > limit {
		return "", d.errAt(at, rule, field, "length %d exceeds the limit of %d bytes", n, limit)
	}
	if n > d.left() {
		return "", d.errAt(at, rule, field, "length %d exceeds the %d bytes left in the file", n, d.left())
	}
	s := string(d.b[d.off : d.off+n])
	d.off += n
	return s, nil
}

// sanitize renders untrusted bytes for an error message: quoted, escaped, shortened.
func sanitize(s string) string {
	if len(s) > 80 {
		s = s[:80] + "…"
	}
	return fmt.Sprintf("%+q", s)
}

// validKey: printable ASCII without spaces (llama.cpp keys are lower_snake.dotted).
func validKey(k string) bool {
	for i := 0; i < len(k); i++ {
		if k[i] <= ' ' || k[i] > '~' {
			return false
		}
	}
	return true
}

// plainText: valid UTF-8 without C0 controls other than tab, newline and carriage return
// and without DEL or C1 controls, so it can be printed and logged as it is.
func plainText(s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if (r < ' ' && r != '\t' && r != '\n' && r != '\r') || (r >= 0x7f && r < 0xa0) {
			return false
		}
	}
	return true
}

// validTensorName: non-empty UTF-8 of printable characters only (unicode.IsPrint: no
// controls, tabs, newlines or invisible format characters such as bidi overrides), so a
// name can reach a terminal or a log as it is.
func validTensorName(name string) bool {
	if name == "" || !utf8.ValidString(name) {
		return false
	}
	for _, r := range name {
		if !unicode.IsPrint(r) {
			return false
		}
	}
	return true
}

// parse validates a whole GGUF file held in b and returns its parsed form. It reads only
// the header, metadata and tensor infos: the data section is checked by arithmetic alone.
func parse(path string, b []byte) (*shard, error) {
	d := &decoder{b: b, path: path}
	size := uint64(len(b))
	if size >= 4 && string(b[:4]) != "GGUF" {
		return nil, d.errAt(0, RuleBadMagic, "magic", "file starts with %s, not \"GGUF\": not a GGUF file", sanitize(string(b[:4])))
	}
	if size < headerSize {
		return nil, d.errAt(0, RuleTruncatedHeader, "header", "file has %d bytes, a GGUF header needs %d (empty or truncated file)", size, headerSize)
	}
	d.off = 4
	s := &shard{path: path, data: b, keys: map[string]int{}, alignment: DefaultAlignment}
	v := d.u32()
	switch {
	case v == 0:
		return nil, d.errAt(4, RuleVersionZero, "version", "version 0 is not a GGUF version")
	case v&0xFFFF == 0:
		return nil, d.errAt(4, RuleEndianness, "version", "endianness mismatch: version reads as %#x, a byte-swapped %d; this is a big-endian GGUF file, convert it to little-endian", v, swap32(v))
	case v == 1:
		return nil, d.errAt(4, RuleVersionOne, "version", "GGUF version 1 (32-bit counts) is not supported; convert the file with a current llama.cpp")
	case v > 3:
		return nil, d.errAt(4, RuleVersionFuture, "version", "GGUF version %d is newer than this reader (2 and 3 are supported)", v)
	}
	s.version = v
	nTensors, nKV := d.u64(), d.u64()
	rest := size - headerSize
	if nTensors > rest/minTensorInfoSize {
		return nil, d.errAt(8, RuleTensorCount, "n_tensors", "%d tensor infos need at least %d bytes each, only %d bytes follow the header", nTensors, minTensorInfoSize, rest)
	}
	if nKV > rest/minKVSize {
		return nil, d.errAt(16, RuleKVCount, "n_kv", "%d metadata entries need at least %d bytes each, only %d bytes follow the header", nKV, minKVSize, rest)
	}
	if nTensors*minTensorInfoSize+nKV*minKVSize > rest { // both products are ≤ rest: no overflow
		return nil, d.errAt(8, RuleTensorCount, "n_tensors", "%d tensor infos and %d metadata entries cannot fit in the %d bytes after the header", nTensors, nKV, rest)
	}
	if err := d.metadata(s, nKV); err != nil {
		return nil, err
	}
	infoOff, err := d.tensorInfos(s, nTensors)
	if err != nil {
		return nil, err
	}
	if e := d.layout(s, infoOff); e != nil {
		return nil, e // (an explicit nil check: a nil *Error is not a nil error)
	}
	return s, nil
}

func swap32(v uint32) uint32 {
	return v>>24 | (v>>8)&0xFF00 | (v<<8)&0xFF0000 | v<<24
}

func (d *decoder) metadata(s *shard, n uint64) *Error {
	s.kvs = make([]KV, 0, min(n, 1024)) // grow with what is actually parsed
	s.kvOff = make([]int64, 0, min(n, 1024))
	for i := uint64(0); i < n; i++ {
		at := d.off
		key, e := d.str(fmt.Sprintf("metadata key #%d", i), RuleStringLength, MaxKeyLen)
		if e != nil {
			return e
		}
		if key == "" {
			return d.errAt(at, RuleEmptyKey, fmt.Sprintf("metadata key #%d", i), "key is empty")
		}
		if !validKey(key) {
			return d.errAt(at, RuleEncoding, fmt.Sprintf("metadata key #%d", i), "key %s is not printable ASCII", sanitize(key))
		}
		field := fmt.Sprintf("key %q", key)
		if _, dup := s.keys[key]; dup {
			return d.errAt(at, RuleDuplicateKey, field, "key appears twice (first as entry #%d)", s.keys[key])
		}
		typeAt := d.off
		if e := d.need(4, field+" type"); e != nil {
			return e
		}
		vt := ValueType(d.u32())
		if vt >= numValueTypes {
			return d.errAt(typeAt, RuleValueType, field, "value type %d is not a GGUF type (0..12)", uint32(vt))
		}
		val, e := d.value(vt, field)
		if e != nil {
			return e
		}
		if key == KeyAlignment {
			if e := checkAlignment(d, typeAt, val); e != nil {
				return e
			}
			s.alignment = uint64(val.x.(uint32))
		}
		s.keys[key] = len(s.kvs)
		s.kvs = append(s.kvs, KV{Key: key, Value: val})
		s.kvOff = append(s.kvOff, int64(at))
	}
	return nil
}

func checkAlignment(d *decoder, at uint64, v Value) *Error {
	if v.typ != TypeUint32 {
		return d.errAt(at, RuleAlignmentType, "key \""+KeyAlignment+"\"", "has type %s, must be UINT32", v.TypeName())
	}
	a := v.x.(uint32)
	if a == 0 || a&(a-1) != 0 || a%8 != 0 {
		return d.errAt(at, RuleAlignmentValue, "key \""+KeyAlignment+"\"", "alignment %d must be a power of two and a multiple of 8", a)
	}
	if a > MaxAlignment {
		return d.errAt(at, RuleAlignmentHuge, "key \""+KeyAlignment+"\"", "alignment %d exceeds the limit of %d", a, MaxAlignment)
	}
	return nil
}

// value decodes one value of type vt; arrays never nest.
func (d *decoder) value(vt ValueType, field string) (Value, *Error) {
	switch vt {
	case TypeString:
		at := d.off
		str, e := d.str(field+" value", RuleStringLength, MaxStringLen)
		if e != nil {
			return Value{}, e
		}
		if !utf8.ValidString(str) {
			return Value{}, d.errAt(at, RuleEncoding, field, "string value %s is not valid UTF-8", sanitize(str))
		}
		return Value{TypeString, 0, str}, nil
	case TypeArray:
		return d.array(field)
	}
	at := d.off
	if e := d.need(valueSizes[vt], field+" value"); e != nil {
		return Value{}, e
	}
	switch vt {
	case TypeUint8:
		return Value{vt, 0, d.u8()}, nil
	case TypeInt8:
		return Value{vt, 0, int8(d.u8())}, nil
	case TypeUint16:
		return Value{vt, 0, d.u16()}, nil
	case TypeInt16:
		return Value{vt, 0, int16(d.u16())}, nil
	case TypeUint32:
		return Value{vt, 0, d.u32()}, nil
	case TypeInt32:
		return Value{vt, 0, int32(d.u32())}, nil
	case TypeFloat32:
		return Value{vt, 0, math.Float32frombits(d.u32())}, nil
	case TypeBool:
		b := d.u8()
		if b > 1 {
			return Value{}, d.errAt(at, RuleValueType, field, "bool byte is %d, must be 0 or 1", b)
		}
		return Value{vt, 0, b == 1}, nil
	case TypeUint64:
		return Value{vt, 0, d.u64()}, nil
	case TypeInt64:
		return Value{vt, 0, int64(d.u64())}, nil
	default: // TypeFloat64
		return Value{vt, 0, math.Float64frombits(d.u64())}, nil
	}
}

func (d *decoder) array(field string) (Value, *Error) {
	at := d.off
	if e := d.need(12, field+" array header"); e != nil {
		return Value{}, e
	}
	et := ValueType(d.u32())
	if et == TypeArray {
		return Value{}, d.errAt(at, RuleNestedArray, field, "array of arrays is not allowed")
	}
	if et >= numValueTypes {
		return Value{}, d.errAt(at, RuleValueType, field, "array element type %d is not a GGUF type (0..12)", uint32(et))
	}
	n := d.u64()
	if et == TypeString {
		if n > d.left()/8 {
			return Value{}, d.errAt(at+4, RuleStringArray, field, "%d strings need at least %d bytes each, only %d bytes left", n, 8, d.left())
		}
		return d.stringArray(field, n)
	}
	total, ok := mulU64(n, valueSizes[et])
	if !ok || total > d.left() {
		return Value{}, d.errAt(at+4, RuleArrayLength, field, "%d elements of %s need %s bytes, only %d bytes left", n, et, bytesNeeded(n, valueSizes[et], ok, total), d.left())
	}
	p := d.b[d.off : d.off+total]
	if et == TypeBool {
		for i, c := range p {
			if c > 1 {
				return Value{}, d.errAt(d.off+uint64(i), RuleValueType, field, "bool element %d is byte %d, must be 0 or 1", i, c)
			}
		}
	}
	d.off += total
	return Value{TypeArray, et, decodeArray(et, p, int(n))}, nil
}

// stringArray reads n length-prefixed strings. A first pass checks every length (K7) and
// sums them; the second copies all bytes into one allocation that the elements slice, so a
// 150k-token vocabulary costs two allocations, not 150k.
func (d *decoder) stringArray(field string, n uint64) (Value, *Error) {
	start := d.off
	var total uint64
	for i := uint64(0); i < n; i++ {
		at := d.off
		if d.left() < 8 { // (messages are formatted only on failure: this loop is hot)
			return Value{}, d.need(8, fmt.Sprintf("%s element %d length", field, i))
		}
		l := d.u64()
		if l > MaxStringLen {
			return Value{}, d.errAt(at, RuleStringArray, fmt.Sprintf("%s element %d", field, i), "length %d exceeds the limit of %d bytes", l, MaxStringLen)
		}
		if l > d.left() {
			return Value{}, d.errAt(at, RuleStringArray, fmt.Sprintf("%s element %d", field, i), "length %d exceeds the %d bytes left in the file", l, d.left())
		}
		d.off += l
		total += l // ≤ file size: no overflow
	}
	buf := make([]byte, 0, total)
	ends := make([]uint64, n)
	d.off = start
	for i := range ends {
		l := d.u64()
		buf = append(buf, d.b[d.off:d.off+l]...)
		d.off += l
		ends[i] = uint64(len(buf))
	}
	all := string(buf)
	out := make([]string, n)
	var prev uint64
	for i, e := range ends {
		out[i] = all[prev:e]
		prev = e
	}
	return Value{TypeArray, TypeString, out}, nil
}

func bytesNeeded(n, size uint64, ok bool, total uint64) string {
	if !ok {
		return fmt.Sprintf("%d×%d (over 2^64)", n, size)
	}
	return fmt.Sprint(total)
}

func decodeArray(et ValueType, p []byte, n int) any {
	le := binary.LittleEndian
	switch et {
	case TypeUint8:
		return append([]uint8(nil), p...)
	case TypeInt8:
		a := make([]int8, n)
		for i := range a {
			a[i] = int8(p[i])
		}
		return a
	case TypeUint16:
		a := make([]uint16, n)
		for i := range a {
			a[i] = le.Uint16(p[2*i:])
		}
		return a
	case TypeInt16:
		a := make([]int16, n)
		for i := range a {
			a[i] = int16(le.Uint16(p[2*i:]))
		}
		return a
	case TypeUint32:
		a := make([]uint32, n)
		for i := range a {
			a[i] = le.Uint32(p[4*i:])
		}
		return a
	case TypeInt32:
		a := make([]int32, n)
		for i := range a {
			a[i] = int32(le.Uint32(p[4*i:]))
		}
		return a
	case TypeFloat32:
		a := make([]float32, n)
		for i := range a {
			a[i] = math.Float32frombits(le.Uint32(p[4*i:]))
		}
		return a
	case TypeBool: // bytes checked to be 0 or 1 by array
		a := make([]bool, n)
		for i := range a {
			a[i] = p[i] == 1
		}
		return a
	case TypeUint64:
		a := make([]uint64, n)
		for i := range a {
			a[i] = le.Uint64(p[8*i:])
		}
		return a
	case TypeInt64:
		a := make([]int64, n)
		for i := range a {
			a[i] = int64(le.Uint64(p[8*i:]))
		}
		return a
	default: // TypeFloat64
		a := make([]float64, n)
		for i := range a {
			a[i] = math.Float64frombits(le.Uint64(p[8*i:]))
		}
		return a
	}
}

// tensorInfos reads and checks each tensor info on its own (name, dims, type, size);
// it returns the file offset of each info's offset field for the layout pass.
func (d *decoder) tensorInfos(s *shard, n uint64) ([]uint64, *Error) {
	c := min(n, 4096) // grow with what is actually parsed, not with what the header claims
	s.tensors = make([]TensorInfo, 0, c)
	offAt := make([]uint64, 0, c)
	names := make(map[string]int, c)
	for i := uint64(0); i < n; i++ {
		at := d.off
		field := fmt.Sprintf("tensor #%d name", i)
		name, e := d.str(field, RuleTensorName, MaxTensorNameLen)
		if e != nil {
			return nil, e
		}
		if !validTensorName(name) {
			return nil, d.errAt(at, RuleTensorName, field, "name %s is empty or not printable UTF-8", sanitize(name))
		}
		field = fmt.Sprintf("tensor %q", name)
		if j, dup := names[name]; dup {
			return nil, d.errAt(at, RuleDuplicateTensor, field, "name appears twice (first as tensor #%d)", j)
		}
		names[name] = int(i)
		ndAt := d.off
		if e := d.need(4, field+" n_dims"); e != nil {
			return nil, e
		}
		nd := d.u32()
		if nd == 0 || nd > MaxDims {
			return nil, d.errAt(ndAt, RuleNDims, field, "n_dims = %d, must be 1..%d", nd, MaxDims)
		}
		if e := d.need(8*uint64(nd)+12, field+" dims, type and offset"); e != nil {
			return nil, e
		}
		dims := make([]uint64, nd)
		for j := range dims {
			dimAt := d.off
			dims[j] = d.u64()
			if dims[j] > math.MaxInt64 {
				return nil, d.errAt(dimAt, RuleDimNegative, fmt.Sprintf("%s ne[%d]", field, j), "dimension %d is negative as int64 (≥ 2^63)", dims[j])
			}
		}
		typeAt := d.off
		t := Type(d.u32())
		size, rule := ByteSize(t, dims)
		switch rule {
		case RuleTensorType:
			return nil, d.errAt(typeAt, rule, field, "ggml type %d is unknown or retired", uint32(t))
		case RuleBlockMultiple:
			ti, _ := t.Info()
			return nil, d.errAt(ndAt+4, rule, field, "ne[0] = %d is not a multiple of %s's block size %d", dims[0], t, ti.BlockSize)
		case RuleElementOverflow:
			return nil, d.errAt(ndAt+4, rule, field, "element count of dims %v exceeds 2^63-1", dims)
		case RuleByteOverflow:
			return nil, d.errAt(ndAt+4, rule, field, "byte size of %v %s exceeds 2^64", dims, t)
		}
		offAt = append(offAt, d.off)
		s.infoOff = append(s.infoOff, int64(at))
		off := d.u64()
		s.tensors = append(s.tensors, TensorInfo{Name: name, Type: t, Dims: dims, Offset: off, Size: size})
	}
	return offAt, nil
}

// layout checks the data section in two passes. First the sizes alone: each padded size
// (T13) and their running total (T14) must fit in 64 bits, and data start + total must be
// addressable (T16). Then each tensor's offset: data start + offset + size must not wrap
// (T12), the offset must be aligned (T11) and equal the running total, i.e. tensors follow
// each other in info order, back to back, each padded to the alignment (T15, llama.cpp's
// rule), and the file must hold them (D1, D2).
func (d *decoder) layout(s *shard, offAt []uint64) *Error {
	align := s.alignment
	start, ok := padU64(d.off, align)
	if !ok {
		return d.errAt(d.off, RuleTotalOverflow, "data section", "aligned start overflows")
	}
	s.dataStart = start
	var total, elems uint64
	for i, t := range s.tensors {
		field := fmt.Sprintf("tensor %q", t.Name)
		padded, ok := padU64(t.Size, align)
		if !ok {
			return d.errAt(offAt[i], RulePaddingOverflow, field, "size %d padded to %d overflows 2^64", t.Size, align)
		}
		if total, ok = addU64(total, padded); !ok {
			return d.errAt(offAt[i], RuleDataSizeOverflow, field, "data section size overflows 2^64 at this tensor")
		}
		if elems, ok = addU64(elems, t.Elements()); !ok || elems > math.MaxInt64 {
			return d.errAt(offAt[i], RuleTotalOverflow, field, "total element count exceeds 2^63-1")
		}
	}
	if sum, ok := addU64(start, total); !ok || sum > math.MaxInt64 {
		return d.errAt(d.off, RuleTotalOverflow, "data section", "data start %d + data size %d exceeds 2^63-1 bytes", start, total)
	}
	var running, end uint64 // end stays 0 without tensors: a header-only file is valid
	for i := range s.tensors {
		t := &s.tensors[i]
		field := fmt.Sprintf("tensor %q offset", t.Name)
		abs, ok1 := addU64(start, t.Offset)
		tEnd, ok2 := addU64(abs, t.Size)
		if !ok1 || !ok2 {
			return d.errAt(offAt[i], RuleTensorOffset, field, "data start %d + offset %d + size %d wraps past 2^64", start, t.Offset, t.Size)
		}
		if t.Offset%align != 0 {
			return d.errAt(offAt[i], RuleTensorAlign, field, "offset %d is not a multiple of the alignment %d", t.Offset, align)
		}
		if t.Offset != running {
			return d.errAt(offAt[i], RuleTensorOverlap, field, "offset %d, expected %d: tensors must follow each other in info order, each padded to %d bytes (overlapping, out of order or gapped)", t.Offset, running, align)
		}
		running += padU64Unchecked(t.Size, align) // pass 1 proved these sums fit
		t.FileOffset = abs
		end = tEnd
	}
	size := uint64(len(d.b))
	if len(s.tensors) > 0 && start > size { // even zero-size tensors: Data slices at start
		return d.errAt(d.off, RuleDataStart, "data section", "aligned data start %d is beyond the end of the %d-byte file (truncated file)", start, size)
	}
	if end > size {
		return d.errAt(size, RuleTruncated, "data section", "file truncated: expected ≥ %d bytes, have %d (incomplete download? fetch the file again)", end, size)
	}
	s.dataEnd = end
	if padEnd := start + total; total > 0 && size > padEnd {
		s.warnings = append(s.warnings, d.errAt(padEnd, RuleTrailingBytes, "data section", "%d bytes after the last tensor are ignored", size-padEnd))
	}
	return nil
}

func padU64Unchecked(n, align uint64) uint64 { return (n + align - 1) &^ (align - 1) }
