package control

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os/user"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// peer is who is at the other end of a connection.
type peer struct {
	// unix is set for a unix-socket peer, whose uid the kernel vouched
	// for; err says why its credentials could not be read.
	unix bool
	uid  int
	err  error
}

type peerKey struct{}

// ConnContext records the kernel's credentials of a unix-socket peer
// (SO_PEERCRED) in the context of the connection's requests. Give it to
// http.Server.ConnContext.
func ConnContext(ctx context.Context, c net.Conn) context.Context {
	// A connection of Listener, or any that wraps another, is the one it
	// wraps.
	for {
		w, ok := c.(interface{ NetConn() net.Conn })
		if !ok {
			break
		}
		c = w.NetConn()
	}
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return context.WithValue(ctx, peerKey{}, peer{})
	}
	p := peer{unix: true, uid: -1}
	raw, err := uc.SyscallConn()
	if err != nil {
		p.err = err
		return context.WithValue(ctx, peerKey{}, p)
	}
	cerr := raw.Control(func(fd uintptr) {
		var cred *unix.Ucred
		cred, err = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
		if err == nil {
			p.uid = int(cred.Uid)
		}
	})
	p.err = errors.Join(cerr, err)
	return context.WithValue(ctx, peerKey{}, p)
}

func peerOf(ctx context.Context) peer {
	p, _ := ctx.Value(peerKey{}).(peer)
	return p
}

// Errors of authorization.
var (
	errNoToken   = errors.New("this API needs Authorization: Bearer TOKEN")
	errBadToken  = errors.New("wrong bearer token")
	errForbidden = errors.New("not allowed")
)

// authenticate checks a TCP request's bearer token; unix-socket requests
// pass (the socket's mode restricts who connects).
func (s *Server) authenticate(r *http.Request) error {
	if peerOf(r.Context()).unix {
		return nil
	}
	if s.Token == "" {
		return errBadToken
	}
	got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok {
		return errNoToken
	}
	if subtle.ConstantTimeCompare([]byte(got), []byte(s.Token)) != 1 {
		return errBadToken
	}
	return nil
}

// who tells what the request's peer may touch: every model (all) for a
// TCP client with the token (checked by authenticate), root, the
// daemon's own uid or an admin account; else the model named like its
// account, "" if it has none. err says why a unix peer is unknown.
func (s *Server) who(r *http.Request) (all bool, uid int, account string, err error) {
	p := peerOf(r.Context())
	switch {
	case !p.unix:
		return true, 0, "", nil
	case p.err != nil:
		return false, 0, "", fmt.Errorf("%w: peer credentials unknown: %v", errForbidden, p.err)
	case p.uid == 0 || p.uid == s.uid:
		return true, p.uid, "", nil
	}
	account = lookupUID(p.uid)
	return account != "" && slices.Contains(s.Admins, account), p.uid, account, nil
}

// mayTrain reports whether the request's peer may train user's model:
// one that may touch every model (who), or the account named like user.
func (s *Server) mayTrain(r *http.Request, user string) error {
	all, uid, account, err := s.who(r)
	switch {
	case err != nil:
		return err
	case all || (account != "" && account == user):
		return nil
	case user == "":
		return fmt.Errorf("%w: uid %d (%s) may not train the global model", errForbidden, uid, account)
	}
	return fmt.Errorf("%w: uid %d (%s) may train only the model named like its account, not %q", errForbidden, uid, account, user)
}

// readsAll reports whether the request's peer may read every model.
func (s *Server) readsAll(r *http.Request) bool {
	all, _, _, _ := s.who(r)
	return all
}

// mayRead reports whether the request's peer may read user's model
// (classify with it, see its statistics): the global model is everyone's,
// as every message's X-Spamd-Result shows; another user's model only the
// peers that read all, and the account named like the user.
func (s *Server) mayRead(r *http.Request, user string) error {
	if user == "" {
		return nil
	}
	all, uid, account, err := s.who(r)
	switch {
	case err != nil:
		return err
	case all || (account != "" && account == user):
		return nil
	}
	return fmt.Errorf("%w: uid %d (%s) may read only the global model and the one named like its account, not %q", errForbidden, uid, account, user)
}

// lookupUID names the account of uid, "" if it has none.
func lookupUID(uid int) string {
	u, err := user.LookupId(strconv.Itoa(uid))
	if err != nil {
		return ""
	}
	return u.Username
}

// mayReport reports whether the request's peer may report messages for
// user (never ""): whoever may train user's model, and the accounts
// listed as reporters.
func (s *Server) mayReport(r *http.Request, user string) error {
	err := s.mayTrain(r, user)
	if err == nil {
		return nil
	}
	p := peerOf(r.Context())
	if p.unix && p.err == nil {
		if account := lookupUID(p.uid); account != "" && slices.Contains(s.Reporters, account) {
			return nil
		}
	}
	return err
}
