package main

import (
	"context"
	"log/slog"
	"time"

	sd "github.com/coreos/go-systemd/v22/daemon"
)

// notify tells systemd the daemon's state (Type=notify); outside systemd
// it does nothing.
func notify(log *slog.Logger, state string) {
	if _, err := sd.SdNotify(false, state); err != nil {
		log.Warn("spamd: systemd notification failed", "state", state, "err", err)
	}
}

// monotonicUsec is the MONOTONIC_USEC= line systemd wants with
// RELOADING=1.
func monotonicUsec() string { return sd.SdNotifyMonotonicUsec() }

// watchdog pings systemd's watchdog at half its interval (WatchdogSec)
// while healthy says the daemon works, until ctx is done. A daemon whose
// store stops answering misses its pings and is restarted by systemd.
func watchdog(ctx context.Context, log *slog.Logger, healthy func(context.Context) error) {
	interval, err := sd.SdWatchdogEnabled(false)
	if err != nil {
		log.Warn("spamd: systemd watchdog", "err", err)
	}
	if interval <= 0 {
		return
	}
	t := time.NewTicker(interval / 2)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := healthy(ctx); err != nil {
				log.Error("spamd: unhealthy; not pinging the watchdog", "err", err)
				continue
			}
			notify(log, sd.SdNotifyWatchdog)
		}
	}
}
