//go:build !unix

package model_test

import "time"

// cpuTime is not measured on this system; the CPU-time metrics read 0.
func cpuTime() time.Duration { return 0 }
