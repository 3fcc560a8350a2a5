package gguf

import (
	"errors"
	"fmt"
	"io/fs"
	"math"
	"math/bits"
	"strconv"
)

// Rule names the check a file failed. The values are the case ids of the loader checklist
// in docs/reliability.md §1.4 (H = header, K = metadata, T = tensor infos, D = data,
// S = model semantics), plus a few accessor rules that are not file defects.
// Callers and tests branch on the Rule, never on message text.
type Rule string

// Checklist rules, in the order of reliability.md §1.4.
const (
	RuleTruncatedHeader  Rule = "H1"  // shorter than the 24-byte fixed header
	RuleBadMagic         Rule = "H2"  // magic is not "GGUF"
	RuleVersionZero      Rule = "H3"  // version 0
	RuleVersionOne       Rule = "H4"  // version 1 (32-bit counts) is not supported
	RuleVersionFuture    Rule = "H5"  // version newer than 3
	RuleEndianness       Rule = "H6"  // byte-swapped version: a big-endian file
	RuleTensorCount      Rule = "H7"  // n_tensors larger than the bytes left can hold
	RuleKVCount          Rule = "H8"  // n_kv larger than the bytes left can hold
	RuleStringLength     Rule = "K1"  // key or string length beyond the cap or the bytes left
	RuleEmptyKey         Rule = "K2"  // zero-length key
	RuleDuplicateKey     Rule = "K3"  // key seen twice
	RuleValueType        Rule = "K4"  // value type (or array element type, or bool byte) out of range
	RuleNestedArray      Rule = "K5"  // array of arrays
	RuleArrayLength      Rule = "K6"  // array length × element size overflows or exceeds the bytes left
	RuleStringArray      Rule = "K7"  // string array count or element beyond the bytes left or the cap
	RuleAlignmentType    Rule = "K8"  // general.alignment is not a UINT32
	RuleAlignmentValue   Rule = "K9"  // general.alignment zero, not a power of two, or not a multiple of 8
	RuleAlignmentHuge    Rule = "K10" // general.alignment above MaxAlignment
	RuleEncoding         Rule = "K11" // non-ASCII key, invalid UTF-8 string, or control characters
	RuleArrayElemType    Rule = "K12" // array accessor used on an array of another element type
	RuleArrayMismatch    Rule = "K13" // related arrays (tokens/scores/token_type, vocab/embedding) differ in length
	RuleScalarType       Rule = "K14" // scalar accessor used on a value of another type
	RuleTensorName       Rule = "T1"  // tensor name empty, too long, beyond the bytes left, or not UTF-8
	RuleDuplicateTensor  Rule = "T2"  // tensor name seen twice
	RuleNDims            Rule = "T3"  // n_dims outside 1..MaxDims
	RuleDimNegative      Rule = "T4"  // a dimension ≥ 2^63
	RuleZeroDim          Rule = "T5"  // a zero dimension where the weight must be non-empty
	RuleElementOverflow  Rule = "T6"  // product of the dims exceeds 2^63-1
	RuleByteOverflow     Rule = "T7"  // byte size (elements / block × block bytes) overflows
	RuleTensorType       Rule = "T8"  // unknown, retired or size-less ggml type
	RuleBlockMultiple    Rule = "T9"  // ne[0] not a multiple of the type's block size
	RuleUnsupportedType  Rule = "T10" // valid type that the caller has no kernel for
	RuleTensorAlign      Rule = "T11" // tensor offset not a multiple of the alignment
	RuleTensorOffset     Rule = "T12" // data_start + offset + size wraps
	RulePaddingOverflow  Rule = "T13" // padding the size to the alignment overflows
	RuleDataSizeOverflow Rule = "T14" // running total of the data section overflows
	RuleTensorOverlap    Rule = "T15" // offsets not sorted, disjoint and gap-free (offset ≠ running total)
	RuleTotalOverflow    Rule = "T16" // data_start + data size or the total element count not addressable
	RuleDataStart        Rule = "D1"  // aligned start of the data section beyond EOF
	RuleTruncated        Rule = "D2"  // file ends before a structure or a tensor does
	RuleTrailingBytes    Rule = "D3"  // bytes after the last tensor (a warning, never an error)
	RuleNonFinite        Rule = "D4"  // NaN or Inf in float data or quant-block scales (CheckFinite)
	RuleFault            Rule = "D5"  // the mapping faulted (file truncated or replaced while mapped)
	RuleTensorSet        Rule = "S1"  // required tensor missing or unexpected tensor present
	RuleTensorShape      Rule = "S2"  // tensor shape or type disagrees with the hyperparameters
	RuleHparamRange      Rule = "S3"  // hyperparameter out of range
	RuleNameIndex        Rule = "S4"  // index parsed out of a tensor name out of range
	RuleTokenizer        Rule = "S5"  // tokenizer content inconsistent (special ids ≥ vocab size, …)
	RuleChatTemplate     Rule = "S6"  // chat template not plain text or too long to hand to a renderer
	RuleSplit            Rule = "S7"  // split files inconsistent, missing or mixed
)

// Accessor rules: not defects of the file by themselves.
const (
	RuleMissingKey Rule = "missing-key" // a metadata key the caller asked for is absent (errors.Is ErrMissingKey)
	RuleIO         Rule = "io"          // the operating system refused to open, stat or map the file
)

var ruleTitles = map[Rule]string{
	RuleTruncatedHeader: "truncated header", RuleBadMagic: "bad magic",
	RuleVersionZero: "version 0", RuleVersionOne: "version 1 unsupported",
	RuleVersionFuture: "future version", RuleEndianness: "endianness mismatch",
	RuleTensorCount: "tensor count", RuleKVCount: "metadata count",
	RuleStringLength: "string length", RuleEmptyKey: "empty key", RuleDuplicateKey: "duplicate key",
	RuleValueType: "value type", RuleNestedArray: "nested array", RuleArrayLength: "array length",
	RuleStringArray: "string array", RuleAlignmentType: "alignment type",
	RuleAlignmentValue: "alignment value", RuleAlignmentHuge: "alignment too large",
	RuleEncoding: "encoding", RuleArrayElemType: "array element type",
	RuleArrayMismatch: "array length mismatch", RuleScalarType: "value type mismatch",
	RuleTensorName: "tensor name", RuleDuplicateTensor: "duplicate tensor",
	RuleNDims: "n_dims", RuleDimNegative: "dimension too large", RuleZeroDim: "zero dimension",
	RuleElementOverflow: "element count overflow", RuleByteOverflow: "byte size overflow",
	RuleTensorType: "tensor type", RuleBlockMultiple: "block multiple",
	RuleUnsupportedType: "unsupported tensor type", RuleTensorAlign: "tensor alignment",
	RuleTensorOffset: "tensor offset", RulePaddingOverflow: "padding overflow",
	RuleDataSizeOverflow: "data size overflow", RuleTensorOverlap: "tensor layout",
	RuleTotalOverflow: "total size overflow", RuleDataStart: "data start beyond EOF",
	RuleTruncated: "file truncated", RuleTrailingBytes: "trailing bytes",
	RuleNonFinite: "non-finite value", RuleFault: "mapping fault",
	RuleTensorSet: "tensor set", RuleTensorShape: "tensor shape", RuleHparamRange: "hyperparameter range",
	RuleNameIndex: "name index", RuleTokenizer: "tokenizer", RuleChatTemplate: "chat template",
	RuleSplit: "split files", RuleMissingKey: "missing key", RuleIO: "i/o",
}

// Title is the rule's short human name ("tensor count" for H7).
func (r Rule) Title() string {
	if t, ok := ruleTitles[r]; ok {
		return t
	}
	return "unknown rule"
}

// ErrMissingKey is what errors.Is finds in the error of a getter asked for an absent key,
// for callers that fall back to a default.
var ErrMissingKey = errors.New("gguf: metadata key not found")

// Error is every error this package returns about a file: which file, where, which rule,
// which field, and what to do. Offset is the byte offset in the file of the field that
// broke the rule, or -1 where no single position applies (a missing key, a split set).
type Error struct {
	Path   string // file (shard) the error is about
	Offset int64  // byte offset of the offending field, -1 if none
	Rule   Rule   // the check that failed
	Field  string // the field: "n_tensors", "key \"general.alignment\"", "tensor \"blk.0.ffn_up.weight\" dims[1]"
	Detail string // what is wrong and, where it helps, what to do
	Err    error  // wrapped cause (an OS error, ErrMissingKey), may be nil
}

func (e *Error) Error() string {
	if e.Rule == RuleIO { // "gguf: m.gguf: open: no such file or directory"
		s := "gguf: " + e.Path + ": " + e.Field
		if e.Detail != "" {
			s += ": " + e.Detail
		}
		var pe *fs.PathError
		if errors.As(e.Err, &pe) {
			return s + ": " + pe.Err.Error()
		}
		if e.Err != nil {
			s += ": " + e.Err.Error()
		}
		return s
	}
	s := "gguf: " + e.Path
	if e.Offset >= 0 {
		s += ": offset " + strconv.FormatInt(e.Offset, 10)
	}
	s += ": " + string(e.Rule) + " " + e.Rule.Title()
	if e.Field != "" {
		s += ": " + e.Field
	}
	if e.Detail != "" {
		s += ": " + e.Detail
	}
	return s
}

// Unwrap returns the wrapped cause.
func (e *Error) Unwrap() error { return e.Err }

// RuleOf returns the Rule of the first *Error in err's chain, or "" if there is none.
func RuleOf(err error) Rule {
	var e *Error
	if errors.As(err, &e) {
		return e.Rule
	}
	return ""
}

func newErr(path string, off int64, rule Rule, field, format string, args ...any) *Error {
	return &Error{Path: path, Offset: off, Rule: rule, Field: field, Detail: fmt.Sprintf(format, args...)}
}

// Checked arithmetic: every size derived from a file goes through these (reliability.md §1.5).

// mulU64 returns a·b and whether it fit in 64 bits.
func mulU64(a, b uint64) (uint64, bool) {
	hi, lo := bits.Mul64(a, b)
	return lo, hi == 0
}

// addU64 returns a+b and whether it fit in 64 bits.
func addU64(a, b uint64) (uint64, bool) {
	s, c := bits.Add64(a, b, 0)
	return s, c == 0
}

// padU64 rounds n up to a multiple of align (a power of two), reporting overflow.
func padU64(n, align uint64) (uint64, bool) {
	if n > math.MaxUint64-(align-1) {
		return 0, false
	}
	return (n + align - 1) &^ (align - 1), true
}
