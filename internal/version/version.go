// Package version says which build of spamd is running, from the build
// information the Go toolchain embeds in every binary.
package version

import (
	"runtime/debug"
	"strings"
)

// String returns the module version (or "devel" for a build from a
// checkout), the commit and its time when the build recorded them, a
// "+dirty" mark for a build from a modified tree, and the Go version.
func String() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown (no build information)"
	}
	return format(info)
}

func format(info *debug.BuildInfo) string {
	v := info.Main.Version
	if v == "" || v == "(devel)" {
		v = "devel"
	}
	var rev, at string
	dirty := false
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.time":
			at = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	parts := []string{v}
	if rev != "" {
		if len(rev) > 12 {
			rev = rev[:12]
		}
		if dirty {
			rev += "+dirty"
		}
		parts = append(parts, "commit "+rev)
	}
	if at != "" {
		parts = append(parts, at)
	}
	parts = append(parts, info.GoVersion)
	return strings.Join(parts, ", ")
}

// Short returns the module version alone: a release's tag, or "devel"
// for a build from a checkout; for a manual page's header.
func Short() string {
	info, ok := debug.ReadBuildInfo()
	if !ok || info.Main.Version == "" || info.Main.Version == "(devel)" {
		return "devel"
	}
	return info.Main.Version
}
