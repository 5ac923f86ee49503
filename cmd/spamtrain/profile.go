package main

import (
	"fmt"
	"os"
	"runtime/pprof"
	"sync"
)

// profileEnv names a file to write a CPU profile of the run to: how a
// slow run is looked into, and how spamtrain.pgo, the profile make builds
// this command with, is made (the Makefile's pgo target).
const profileEnv = "SPAMTRAIN_CPUPROFILE"

// startProfile starts the CPU profile that $SPAMTRAIN_CPUPROFILE asks
// for, and returns the function that writes it out, which does so once
// however often it is called: at the end of the run, or when an
// interrupted run is made to exit.
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
	return sync.OnceValue(func() error {
		pprof.StopCPUProfile()
		if err := f.Close(); err != nil {
			return fmt.Errorf("$%s: %w", profileEnv, err)
		}
		return nil
	}), nil
}
