package main

import (
	"bytes"
	"context"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/spamd/spamd/config"
	"github.com/spamd/spamd/filter"
)

// settleTime is how long the configuration file must stay unchanged
// before it is reloaded: editors write a file in several steps.
const settleTime = 250 * time.Millisecond

// reloadLoop reloads the configuration on hup and when its file changes,
// until ctx is done. It watches the file's directory, not the file,
// because editors replace the file rather than write into it.
func (d *daemon) reloadLoop(ctx context.Context, hup <-chan os.Signal) {
	var events <-chan fsnotify.Event
	var errs <-chan error
	if d.path != "" {
		w, err := fsnotify.NewWatcher()
		if err == nil {
			err = w.Add(filepath.Dir(d.path))
		}
		if err != nil {
			d.log.Warn("spamd: not watching the configuration file; reload with SIGHUP", "path", d.path, "err", err)
		} else {
			defer w.Close()
			events, errs = w.Events, w.Errors
		}
	}
	settle := time.NewTimer(settleTime)
	settle.Stop()
	name := filepath.Clean(d.path)
	for {
		select {
		case <-ctx.Done():
			return
		case <-hup:
			d.reload("SIGHUP")
		case ev := <-events:
			if filepath.Clean(ev.Name) == name && !ev.Has(fsnotify.Chmod) {
				settle.Reset(settleTime)
			}
		case err := <-errs:
			d.log.Warn("spamd: watching the configuration file", "err", err)
		case <-settle.C:
			d.reload("file changed")
		}
	}
}

// reload loads the configuration again and applies what can change
// while running: the milter's per-message settings, the actions, the
// filter's settings and the log level. A configuration that does not
// load is logged and the running one kept.
func (d *daemon) reload(why string) {
	if d.path == "" {
		d.log.Info("spamd: no configuration file to reload", "why", why)
		return
	}
	cfg, raw, err := load(d.path, d.opts, d.getenv)
	if err != nil {
		d.log.Error("spamd: configuration not reloaded; keeping the running one", "why", why, "err", err)
		d.met.reloads.WithLabelValues("failed").Inc()
		return
	}
	if why == "file changed" && bytes.Equal(raw, d.raw) {
		return
	}
	notify(d.log, "RELOADING=1\n"+monotonicUsec())
	defer notify(d.log, "READY=1")
	cur := d.ms.Settings()
	f := cur.Filter
	if !maps.Equal(cfg.Filter, d.cfg.Filter) {
		fc, _ := filterConfig(cfg.Filter) // checked by load
		if f, err = filter.New(d.st, fc); err != nil {
			d.log.Error("spamd: configuration not reloaded; keeping the running one", "why", why, "err", err)
			d.met.reloads.WithLabelValues("failed").Inc()
			return
		}
	}
	d.setMu.Lock()
	d.ms.Update(d.settings(cfg, f))
	d.setMu.Unlock()
	d.level.Set(logLevel(cfg.Log.Level))
	applied, later := splitRestart(config.Changed(d.cfg, cfg))
	if len(later) > 0 {
		d.log.Warn("spamd: settings changed that take effect on restart", "keys", later)
	}
	d.cfg, d.raw = cfg, raw
	// In force now: what a reload applies from cfg, the rest as it runs
	// until a restart.
	shown := *d.current.Load()
	listen, shutdown := shown.Milter.Listen, shown.Milter.ShutdownTimeout
	shown.Milter, shown.Actions, shown.Autolearn, shown.Filter, shown.Log.Level = cfg.Milter, cfg.Actions, cfg.Autolearn, cfg.Filter, cfg.Log.Level
	shown.Milter.Listen, shown.Milter.ShutdownTimeout = listen, shutdown
	prefsFile := shown.Prefs.File
	shown.Prefs = cfg.Prefs
	shown.Prefs.File = prefsFile
	d.current.Store(&shown)
	d.met.reloads.WithLabelValues("ok").Inc()
	d.log.Info("spamd: configuration reloaded", "why", why, "path", d.path, "changed", applied)
}

// restartOnly are the keys, and the sections whose every key, only a
// restart applies: listeners, the store and what is built on it at
// start.
var restartOnly = []string{"milter.listen", "milter.shutdown_timeout", "store.", "api.", "metrics.", "reports.", "watch.", "history.", "console.", "log.format", "prefs.file"}

// splitRestart splits changed keys into those a reload applied and those
// that wait for a restart.
func splitRestart(changed []string) (applied, later []string) {
	applied, later = []string{}, []string{}
	for _, k := range changed {
		if slices.ContainsFunc(restartOnly, func(p string) bool { return k == p || strings.HasSuffix(p, ".") && strings.HasPrefix(k, p) }) {
			later = append(later, k)
		} else {
			applied = append(applied, k)
		}
	}
	return applied, later
}
