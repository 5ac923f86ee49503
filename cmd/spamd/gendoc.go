package main

import (
	"fmt"
	"io"

	"github.com/spamd/spamd/internal/gendoc"
	"github.com/spamd/spamd/internal/version"
)

// gendocMain writes spamd(8) or spamd's bash or zsh completion from its
// flag set; make runs it as "spamd gendoc man|bash|zsh [DATE]", so that
// they cannot drift from the flags.
func gendocMain(w io.Writer, args []string) error {
	if len(args) < 1 || len(args) > 2 {
		return fmt.Errorf("gendoc man|bash|zsh [DATE]")
	}
	var o options
	fl := gendoc.FlagsOf(flags(&o, io.Discard))
	switch args[0] {
	case "man":
		p := manual(fl)
		if len(args) == 2 {
			p.Date = args[1]
		}
		return p.Man(w)
	case "bash":
		return gendoc.Bash(w, "spamd", fl, nil)
	case "zsh":
		return gendoc.Zsh(w, "spamd", fl, nil)
	}
	return fmt.Errorf("gendoc man|bash|zsh, not %q", args[0])
}

// manual is spamd(8).
func manual(options []gendoc.Flag) gendoc.Page {
	return gendoc.Page{
		Name: "spamd", Section: 8, Title: "spam filter daemon: a milter for Postfix and Sendmail",
		Source:   "spamd " + version.Short(),
		Synopsis: []string{"spamd [--config FILE] [--db DIR] [--milter ADDR] [--api ADDR]", "spamd --version"},
		Description: `spamd sits in Postfix's or Sendmail's path over the milter protocol (tcp://127.0.0.1:11332 by default), classifies each message with the recipient's model (per-user models, with the global model as their prior), adds SpamAssassin-compatible headers (X-Spam-Flag, X-Spam-Status, X-Spam-Score, X-Spam-Level) and X-Spamd-Result (the probability, the verdict, the weightiest tokens and a signature for retraining), and tags, quarantines or rejects as configured, per user and per domain if asked. A message more likely spam than ham but short of the required score is unsure: tagged, never rejected.

It serves a control API on a unix socket (classify, learn, forget, report, stats, preferences, maintenance), which spamtrain(1) uses while spamd owns the store, Prometheus metrics and /healthz on a loopback port, and reloads its configuration on SIGHUP or when the file changes. With no configuration file at all it runs on the defaults.

The configuration is FILE, else $SPAMD_CONFIG, else /etc/spamd/config.toml if it exists (spamd.conf(5)). The flags override it.`,
		Options: options,
		Sections: []gendoc.Section{
			{Title: "Signals", Text: `SIGHUP reloads the configuration, as saving the file does; what changed is logged. SIGTERM and SIGINT stop spamd, letting the messages in flight finish for up to [milter] shutdown_timeout.`},
			{Title: "Environment", Text: `SPAMD_CONFIG: the configuration file, when --config is not given.

STATE_DIRECTORY, RUNTIME_DIRECTORY: set by systemd (StateDirectory=, RuntimeDirectory=), the default store directory and the directory of the API socket.

NOTIFY_SOCKET, WATCHDOG_USEC: set by systemd for Type=notify and WatchdogSec=: spamd reports readiness, reloads and stopping, and pings the watchdog while its store answers.`},
			{Title: "Files", Text: `/etc/spamd/config.toml: the configuration (spamd.conf(5)).

/var/lib/spamd: the store, the report queue (reports/) and the preferences set through the API (prefs.json).

/run/spamd/api.sock: the control API, mode 0660.`},
			{Title: "Exit status", Text: `0 after a clean stop, 1 when it could not start or a server failed, 2 for a wrong command line.`},
			{Title: "Examples", Text: `Under systemd, with the unit make install puts in place:

  systemctl enable --now spamd
  systemctl reload spamd
  journalctl -u spamd

In Postfix's main.cf:

  smtpd_milters = inet:127.0.0.1:11332
  non_smtpd_milters = $smtpd_milters
  milter_default_action = accept`},
			{Title: "See also", Text: "spamtrain(1), spamd.conf(5), postconf(5)"},
		},
	}
}
