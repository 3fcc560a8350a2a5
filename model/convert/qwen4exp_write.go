package convert

import (
	"fmt"
	"io"
	"strings"
	"sync"

	"github.com/strata-hip/strata/gguf"
	"github.com/strata-hip/strata/quant"
)

// rowChunk is how many rows writeRows converts at a time (64 Ki rows of the 160-wide
// qwen4exp table: 40 MB of float32).
const rowChunk = 1 << 16

// writeRows streams a tensor that has LoadRows, quantizing rowChunk rows at a time, so a
// table larger than memory is converted with bounded memory.
func writeRows(out io.Writer, tt *Tensor, st quant.Type, progress io.Writer) error {
	cols := tt.Dims[0]
	rows := 1
	for _, d := range tt.Dims[1:] {
		rows *= d
	}
	rb, err := st.RowBytes(cols)
	if err != nil {
		return fmt.Errorf("convert: %s: %w", tt.Name, err)
	}
	buf := make([]byte, min(rows, rowChunk)*rb)
	for r0 := 0; r0 < rows; r0 += rowChunk {
		n := min(rowChunk, rows-r0)
		v, err := tt.LoadRows(r0, n)
		if err != nil {
			return err
		}
		if len(v) != n*cols {
			return fmt.Errorf("convert: %s: rows [%d, %d) gave %d values, want %d", tt.Name, r0, r0+n, len(v), n*cols)
		}
		var mu sync.Mutex
		var qerr error
		parallelRows(n, func(lo, hi int) {
			for r := lo; r < hi; r++ {
				if err := quant.Quantize(st, v[r*cols:(r+1)*cols], buf[r*rb:(r+1)*rb]); err != nil {
					mu.Lock()
					qerr = fmt.Errorf("convert: %s: %w", tt.Name, err)
					mu.Unlock()
					return
				}
			}
		})
		if qerr != nil {
			return qerr
		}
		if _, err := out.Write(buf[:n*rb]); err != nil {
			return err
		}
	}
	if progress != nil {
		fmt.Fprintf(progress, "%-36s %-5s %v (streamed)\n", tt.Name, st, tt.Dims)
	}
	return nil
}

// writeFile writes one GGUF file, or shards when SplitMaxBytes is set: PATH's name without
// .gguf becomes the prefix of PREFIX-0000k-of-0000N.gguf. A tensor larger than the limit
// gets a shard of its own, which is what keeps the qwen4exp n-gram table (planned last)
// in separately mappable files.
func (p *Plan) writeFile(w *gguf.Writer, path string) error {
	if p.SplitMaxBytes == 0 {
		return w.WriteFile(path)
	}
	paths, err := w.WriteShards(strings.TrimSuffix(path, ".gguf"), gguf.SplitOptions{MaxBytes: p.SplitMaxBytes})
	if err != nil {
		return err
	}
	p.Notes = append(p.Notes, fmt.Sprintf("wrote %d shards: %s ... %s", len(paths), paths[0], paths[len(paths)-1]))
	return nil
}
