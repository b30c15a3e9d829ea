//go:build !unix

package bench

import "time"

func processCPU() (user, sys time.Duration, ok bool) { return 0, 0, false }
