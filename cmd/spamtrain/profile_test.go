package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestStartProfile(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name    string
		path    string // $SPAMTRAIN_CPUPROFILE
		wantErr bool
		written bool
	}{
		{"unset", "", false, false},
		{"a file", filepath.Join(dir, "cpu.prof"), false, true},
		{"a missing directory", filepath.Join(dir, "no", "cpu.prof"), true, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv(profileEnv, tt.path)
			stop, err := startProfile()
			if (err != nil) != tt.wantErr {
				t.Fatalf("startProfile: %v, want an error: %v", err, tt.wantErr)
			}
			if err != nil {
				if !strings.Contains(err.Error(), profileEnv) {
					t.Errorf("error %q does not name $%s", err, profileEnv)
				}
				return
			}
			// The run's end and an interrupt's exit may both stop it.
			for range 2 {
				if err := stop(); err != nil {
					t.Fatalf("stop: %v", err)
				}
			}
			b, err := os.ReadFile(tt.path)
			switch {
			case !tt.written:
				return
			case err != nil:
				t.Fatal(err)
			case !bytes.HasPrefix(b, []byte{0x1f, 0x8b}):
				// A profile is a gzipped protocol buffer.
				t.Errorf("%s holds %d bytes that are no profile", tt.path, len(b))
			}
		})
	}
}
