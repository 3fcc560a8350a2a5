//go:build !unix

package tokenizer

import (
	"testing"
	"time"
)

func processCPU() time.Duration { return 0 }

func reportCPU(b *testing.B, start time.Duration) {}
