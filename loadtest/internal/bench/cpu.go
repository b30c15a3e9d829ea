package bench

import "time"

// cpuSample is this process's CPU time so far, user and system, as the
// kernel accounts it (getrusage RUSAGE_SELF: every thread, the Go runtime's
// included). ok is false where the platform has no such counter.
type cpuSample struct {
	user, sys time.Duration
	at        time.Time
	ok        bool
}

func sampleCPU() cpuSample {
	u, s, ok := processCPU()
	return cpuSample{user: u, sys: s, at: time.Now(), ok: ok}
}

// CPU is what the load generator itself spent over the measured run
// (set-up and warm-up not counted), so that its share of a machine it
// shares with the cluster is visible beside the cluster's.
type CPU struct {
	UserSec float64 `json:"user_s"`
	SysSec  float64 `json:"sys_s"`
	// Sec is user + sys.
	Sec float64 `json:"total_s"`
	// Cores is Sec over the wall time of the measured run: 1.0 is one core
	// kept busy throughout.
	Cores float64 `json:"cores"`
	// PerRecordUS is Sec per record counted, in microseconds.
	PerRecordUS float64 `json:"us_per_record"`
}

// cpuSince is the CPU spent from start to now, per record of records.
func cpuSince(start cpuSample, records int64) *CPU {
	end := sampleCPU()
	if !start.ok || !end.ok {
		return nil
	}
	c := &CPU{UserSec: (end.user - start.user).Seconds(), SysSec: (end.sys - start.sys).Seconds()}
	c.Sec = c.UserSec + c.SysSec
	if wall := end.at.Sub(start.at).Seconds(); wall > 0 {
		c.Cores = c.Sec / wall
	}
	if records > 0 {
		c.PerRecordUS = c.Sec / float64(records) * 1e6
	}
	return c
}
