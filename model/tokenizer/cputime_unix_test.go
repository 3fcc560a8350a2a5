//go:build unix

package tokenizer

import (
	"syscall"
	"testing"
	"time"
)

// processCPU returns the CPU time (user + system) this process has used. Benchmarks report
// it per operation besides wall time, because the machines they run on are often shared and
// wall time then measures the neighbours as much as this code.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func reportCPU(b *testing.B, start time.Duration) {
	if b.N > 0 {
		b.ReportMetric((processCPU()-start).Seconds()/float64(b.N), "cpu-s/op")
	}
}
