//go:build noeval

package main

// Built with -tags noeval (make does), spamtrain leaves out eval and
// simulate. They draw plots with gonum/plot, which brings fonts, LaTeX
// and PDF libraries with it: some 70 of spamtrain's 440 packages and 8 MB of
// its 28. For these two commands this build runs spamtrain-eval, the
// full build, which make installs beside it.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
)

// withEval says that this build has eval and simulate: it has not.
const withEval = false

// fullBuild is the name of the build with every command.
const fullBuild = "spamtrain-eval"

func runEval(ctx context.Context, e *env, args []string) error {
	return runFull(e, "eval", args)
}

func runSimulate(ctx context.Context, e *env, args []string) error {
	return runFull(e, "simulate", args)
}

// runFull replaces this process with the full build running cmd with
// args: it returns only when that cannot be done.
func runFull(e *env, cmd string, args []string) error {
	path, err := findFull()
	if err != nil {
		return err
	}
	argv := append([]string{fullBuild, cmd}, args...)
	if err := syscall.Exec(path, argv, os.Environ()); err != nil {
		return fmt.Errorf("run %s: %w", path, err)
	}
	return nil
}

// findFull finds the full build: beside this executable, else on $PATH.
func findFull() (string, error) {
	if exe, err := os.Executable(); err == nil {
		if exe, err = filepath.EvalSymlinks(exe); err == nil {
			p := filepath.Join(filepath.Dir(exe), fullBuild)
			if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
				return p, nil
			}
		}
	}
	if p, err := exec.LookPath(fullBuild); err == nil {
		return p, nil
	}
	return "", errors.New("eval and simulate are in " + fullBuild + ", which is neither beside spamtrain nor on $PATH: " +
		"install it with make install, or run go run ./cmd/spamtrain " + "eval|simulate from the source")
}
