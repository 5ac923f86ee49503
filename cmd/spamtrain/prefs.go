package main

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/spamd/spamd/config"
	"github.com/spamd/spamd/control"
)

// The prefs command reads and sets a user's or a domain's preferences in
// the running spamd, through its API (/v1/prefs): they live in the
// daemon, which applies them to the next message. Without KEY=VALUE it
// says what applies and where each setting comes from; with them it
// changes what the API sets for the user or domain, key by key (an empty
// value removes a key); --clear removes all the API set.

// prefKeys are the keys KEY=VALUE may set.
var prefKeys = []string{"required", "subject_tag", "reject_score", "action", "allow", "deny"}

func runPrefs(ctx context.Context, e *env, args []string) error {
	fs := e.flagSet("prefs")
	user := fs.String("user", "", "the user whose preferences (as [milter] users names them)")
	domain := fs.String("domain", "", "the domain whose preferences, or the user's when its name is no address")
	clear := fs.Bool("clear", false, "remove every preference the API set for the user or domain")
	api := fs.String("api", os.Getenv("SPAMD_API"), "the daemon's API: unix:/PATH or tcp://HOST:PORT (default $SPAMD_API, else its configuration's socket)")
	if err := fs.Parse(args); err != nil {
		return usageError(err)
	}
	if *user == "" && *domain == "" {
		return fmt.Errorf("%w: name the --user or the --domain whose preferences", errUsage)
	}
	c, err := daemonAt(*api)
	if err != nil {
		return err
	}
	cur, err := c.Prefs(ctx, *user, *domain)
	if err != nil {
		return err
	}
	if fs.NArg() == 0 && !*clear {
		return printPrefs(e, cur)
	}
	set := cur.Set
	if *clear {
		set = config.Pref{}
	}
	for _, kv := range fs.Args() {
		if err := setPref(&set, kv); err != nil {
			return fmt.Errorf("%w: %v", errUsage, err)
		}
	}
	next, err := c.SetPrefs(ctx, *user, *domain, set)
	if err != nil {
		return err
	}
	return printPrefs(e, next)
}

// daemonAt returns a client of the daemon at addr, else of the one named
// by spamd's configuration.
func daemonAt(addr string) (*control.Client, error) {
	if addr == "" {
		cfg, _, err := loadConfig("")
		if err != nil {
			return nil, err
		}
		addr = "unix:" + cfg.API.Socket
	}
	c, err := control.NewClient(addr, os.Getenv("SPAMD_API_TOKEN"))
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errUsage, err)
	}
	return c, nil
}

// setPref sets one KEY=VALUE of p; an empty value removes the key.
func setPref(p *config.Pref, kv string) error {
	k, v, ok := strings.Cut(kv, "=")
	if !ok || !slices.Contains(prefKeys, k) {
		return fmt.Errorf("%q: want KEY=VALUE, KEY one of %s", kv, strings.Join(prefKeys, ", "))
	}
	number := func() (*float64, error) {
		if v == "" {
			return nil, nil
		}
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return nil, fmt.Errorf("%s: %q is not a number", k, v)
		}
		return &f, nil
	}
	list := func() []string {
		if v == "" {
			return nil
		}
		return strings.Split(v, ",")
	}
	var err error
	switch k {
	case "required":
		p.Required, err = number()
	case "reject_score":
		p.RejectScore, err = number()
	case "subject_tag":
		p.SubjectTag = &v
	case "action":
		p.Action = v
	case "allow":
		p.Allow = list()
	case "deny":
		p.Deny = list()
	}
	return err
}

// printPrefs says what applies and from where, then what the API sets.
func printPrefs(e *env, p control.Prefs) error {
	who := p.User
	if who == "" {
		who = "domain " + p.Domain
	} else if p.Domain != "" {
		who += " (domain " + p.Domain + ")"
	}
	fmt.Fprintf(e.stdout, "%s:\n", who)
	tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "  required\t%g\t%s\n", p.Required, p.Source["required"])
	fmt.Fprintf(tw, "  subject_tag\t%q\t%s\n", p.SubjectTag, p.Source["subject_tag"])
	fmt.Fprintf(tw, "  action\t%s\t%s\n", p.Action, p.Source["action"])
	fmt.Fprintf(tw, "  reject_score\t%g\t%s\n", p.RejectScore, p.Source["reject_score"])
	if err := tw.Flush(); err != nil {
		return err
	}
	s := p.Set
	var set []string
	if s.Required != nil {
		set = append(set, fmt.Sprintf("required=%g", *s.Required))
	}
	if s.SubjectTag != nil {
		set = append(set, fmt.Sprintf("subject_tag=%q", *s.SubjectTag))
	}
	if s.Action != "" {
		set = append(set, "action="+s.Action)
	}
	if s.RejectScore != nil {
		set = append(set, fmt.Sprintf("reject_score=%g", *s.RejectScore))
	}
	if s.Allow != nil {
		set = append(set, "allow="+strings.Join(s.Allow, ","))
	}
	if s.Deny != nil {
		set = append(set, "deny="+strings.Join(s.Deny, ","))
	}
	if len(set) == 0 {
		set = []string{"nothing"}
	}
	_, err := fmt.Fprintf(e.stdout, "  set through the API: %s\n", strings.Join(set, " "))
	return err
}
