package main

import (
	"fmt"
	"os"
	"runtime/pprof"
)

// profileEnv names a file to write a CPU profile of the run to: how a
// slow run is looked into, and how default.pgo, the profile the build
// optimizes this command with, is made (docs/maintenance.md).
const profileEnv = "SPAMTRAIN_CPUPROFILE"

// startProfile starts the CPU profile that $SPAMTRAIN_CPUPROFILE asks
// for, and returns the function that writes it out.
func startProfile() (stop func() error, err error) {
	path := os.Getenv(profileEnv)
	if path == "" {
		return func() error { return nil }, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("$%s: %w", profileEnv, err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("$%s: %w", profileEnv, err)
	}
	return func() error {
		pprof.StopCPUProfile()
		if err := f.Close(); err != nil {
			return fmt.Errorf("$%s: %w", profileEnv, err)
		}
		return nil
	}, nil
}
