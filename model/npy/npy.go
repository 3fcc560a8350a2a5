// Package npy reads little-endian float32 NumPy .npy files (format 1.0/2.0, C order),
// optionally gzip-compressed (.npy.gz): the layout of the project's oracle files.
package npy

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"os"
	"regexp"
	"strconv"
	"strings"
)

// Array is a float32 array with its shape (outermost first).
type Array struct {
	Shape []int
	Data  []float32
}

var (
	descrRe   = regexp.MustCompile(`'descr'\s*:\s*'([^']*)'`)
	fortranRe = regexp.MustCompile(`'fortran_order'\s*:\s*(True|False)`)
	shapeRe   = regexp.MustCompile(`'shape'\s*:\s*\(([^)]*)\)`)
)

// ReadFile reads path; a name ending in .gz is decompressed first.
func ReadFile(path string) (*Array, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("npy: %w", err)
	}
	if strings.HasSuffix(path, ".gz") {
		zr, err := gzip.NewReader(bytes.NewReader(raw))
		if err != nil {
			return nil, fmt.Errorf("npy: %s: %w", path, err)
		}
		if raw, err = io.ReadAll(io.LimitReader(zr, 1<<31)); err != nil {
			return nil, fmt.Errorf("npy: %s: %w", path, err)
		}
	}
	a, err := Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("npy: %s: %w", path, err)
	}
	return a, nil
}

// Parse decodes an in-memory .npy file.
func Parse(raw []byte) (*Array, error) {
	if len(raw) < 10 || string(raw[:6]) != "\x93NUMPY" {
		return nil, fmt.Errorf("not a .npy file (bad magic)")
	}
	var hl, start int
	switch raw[6] {
	case 1:
		hl, start = int(binary.LittleEndian.Uint16(raw[8:])), 10
	case 2, 3:
		if len(raw) < 12 {
			return nil, fmt.Errorf("truncated header")
		}
		hl, start = int(binary.LittleEndian.Uint32(raw[8:])), 12
	default:
		return nil, fmt.Errorf("unsupported .npy version %d", raw[6])
	}
	if start+hl > len(raw) {
		return nil, fmt.Errorf("header length %d exceeds the file", hl)
	}
	h := string(raw[start : start+hl])
	d := descrRe.FindStringSubmatch(h)
	if d == nil || d[1] != "<f4" {
		return nil, fmt.Errorf("dtype %v: only little-endian float32 ('<f4') is supported", d)
	}
	if f := fortranRe.FindStringSubmatch(h); f == nil || f[1] != "False" {
		return nil, fmt.Errorf("only C-order arrays are supported")
	}
	s := shapeRe.FindStringSubmatch(h)
	if s == nil {
		return nil, fmt.Errorf("no shape in header %q", h)
	}
	var shape []int
	n := 1
	for _, p := range strings.Split(s[1], ",") {
		p = strings.TrimSpace(p)
		if p == "" {
			continue
		}
		v, err := strconv.Atoi(p)
		if err != nil || v < 0 || (v > 0 && n > math.MaxInt32/v) {
			return nil, fmt.Errorf("bad shape %q", s[1])
		}
		shape = append(shape, v)
		n *= v
	}
	body := raw[start+hl:]
	if len(body) != 4*n {
		return nil, fmt.Errorf("shape %v needs %d data bytes, file has %d", shape, 4*n, len(body))
	}
	a := &Array{Shape: shape, Data: make([]float32, n)}
	for i := range a.Data {
		a.Data[i] = math.Float32frombits(binary.LittleEndian.Uint32(body[4*i:]))
	}
	return a, nil
}
