//go:build race

package procstat

// Race is set when the race detector is on: memory and CPU then cost
// several times more, and tests scale their bounds by RaceFactor.
const Race = true
