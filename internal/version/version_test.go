package version

import (
	"runtime/debug"
	"testing"
)

func TestFormat(t *testing.T) {
	tests := []struct {
		name string
		info debug.BuildInfo
		want string
	}{
		{"release", debug.BuildInfo{GoVersion: "go1.23.4", Main: debug.Module{Version: "v1.2.0"}}, "v1.2.0, go1.23.4"},
		{"checkout", debug.BuildInfo{GoVersion: "go1.23.4", Main: debug.Module{Version: "(devel)"}, Settings: []debug.BuildSetting{
			{Key: "vcs.revision", Value: "0123456789abcdef0123"}, {Key: "vcs.time", Value: "2026-11-25T10:00:00Z"}, {Key: "vcs.modified", Value: "true"},
		}}, "devel, commit 0123456789ab+dirty, 2026-11-25T10:00:00Z, go1.23.4"},
		{"no version", debug.BuildInfo{GoVersion: "go1.23.4"}, "devel, go1.23.4"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := format(&tt.info); got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}
