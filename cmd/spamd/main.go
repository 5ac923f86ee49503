// Command spamd is the spam filter daemon: a milter for Postfix and
// Sendmail, and the control API spamtrain and scripts train through.
//
// Usage:
//
//	spamd [--config FILE] [--db DIR] [--milter ADDR] [--api ADDR]
//	spamd --version
//
// The configuration is FILE, else $SPAMD_CONFIG, else
// /etc/spamd/config.toml if it exists, else the built-in defaults: the
// store in $STATE_DIRECTORY or /var/lib/spamd, the milter on
// tcp://127.0.0.1:11332, the API on $RUNTIME_DIRECTORY/api.sock or
// /run/spamd/api.sock. Flags override the file: --db sets store.dir,
// --milter milter.listen (tcp://HOST:PORT or unix:/PATH), --api the API's
// socket (unix:/PATH) or its TCP address (tcp://HOST:PORT).
//
// Signals: SIGHUP reloads the configuration, as does saving the file;
// SIGTERM and SIGINT stop, letting messages in flight finish. Under
// systemd (Type=notify) it reports readiness, reloads, stopping and, if
// WatchdogSec is set, liveness.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/spamd/spamd/internal/version"
)

// options are the command line.
type options struct {
	config      string
	db          string
	milter, api string
	version     bool
}

// flags returns spamd's flag set, setting o.
func flags(o *options, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("spamd", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.config, "config", "", "configuration `file` (default $SPAMD_CONFIG, else /etc/spamd/config.toml if it exists)")
	fs.StringVar(&o.db, "db", "", "store `directory` (overrides [store] dir)")
	fs.StringVar(&o.milter, "milter", "", "milter `address`, tcp://HOST:PORT or unix:/PATH (overrides [milter] listen)")
	fs.StringVar(&o.api, "api", "", "control API `address`, unix:/PATH or tcp://HOST:PORT (overrides [api] socket or tcp)")
	fs.BoolVar(&o.version, "version", false, "print the build and exit")
	return fs
}

func parseFlags(args []string, stderr io.Writer) (options, error) {
	var o options
	fs := flags(&o, stderr)
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	return o, nil
}

func main() {
	if len(os.Args) > 1 && os.Args[1] == "gendoc" {
		// Hidden: make's, not a user's.
		if err := gendocMain(os.Stdout, os.Args[2:]); err != nil {
			fmt.Fprintf(os.Stderr, "spamd gendoc: %v\n", err)
			os.Exit(2)
		}
		return
	}
	o, err := parseFlags(os.Args[1:], os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(0)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "spamd: %v\n", err)
		os.Exit(2)
	}
	if o.version {
		fmt.Println("spamd", version.String())
		return
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	if err := run(ctx, o, os.Getenv, os.Stderr, hup); err != nil {
		fmt.Fprintf(os.Stderr, "spamd: %v\n", err)
		os.Exit(1)
	}
}
