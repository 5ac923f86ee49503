package store

// Compaction says what compacting a store did: its size on disk before
// and after, and the steps that changed it. A backend that compacts
// (Badger) returns one; Redis frees what it no longer holds by itself.
type Compaction struct {
	// LSMBefore and LSMAfter are the bytes of the tables, LogsBefore and
	// LogsAfter those of the logs (value log and write-ahead logs).
	LSMBefore  int64 `json:"lsm_before_bytes"`
	LSMAfter   int64 `json:"lsm_after_bytes"`
	LogsBefore int64 `json:"logs_before_bytes"`
	LogsAfter  int64 `json:"logs_after_bytes"`
	// TablesBefore and TablesAfter count the tables, LevelsBefore and
	// LevelsAfter the levels of the tree that hold any.
	TablesBefore int `json:"tables_before"`
	TablesAfter  int `json:"tables_after"`
	LevelsBefore int `json:"levels_before"`
	LevelsAfter  int `json:"levels_after"`
	// Flushed says that the memtables were written into tables and their
	// write-ahead logs deleted; FlushSkipped says why not, if not.
	Flushed      bool   `json:"flushed"`
	FlushSkipped string `json:"flush_skipped,omitempty"`
	// Rewritten counts the value-log files garbage-collected.
	Rewritten int `json:"vlog_files_rewritten"`
}

// Before returns the store's whole size before compacting, in bytes.
func (c Compaction) Before() int64 { return c.LSMBefore + c.LogsBefore }

// After returns the store's whole size after compacting, in bytes.
func (c Compaction) After() int64 { return c.LSMAfter + c.LogsAfter }
