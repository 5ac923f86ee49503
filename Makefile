# Builds and installs spamd: the daemon, the trainer, their manual pages
# and shell completions, the systemd unit and an example configuration.
#
#   make                      build everything into build/
#   make install              install under PREFIX (default /usr/local)
#   make install DESTDIR=/tmp/root PREFIX=/usr   stage a package's tree
#   make uninstall            remove what install put in place, but the
#                             configuration and the store
#   make pgo                  profile spamtrain anew for the build (below)
#
# The manual pages and completions are written by the programs
# themselves from their flag sets (spamd gendoc, spamtrain gendoc) and
# from the configuration's struct documentation (internal/gendoc/confpage),
# so they cannot drift from what they describe. spamtrain is built without
# the plotting libraries of eval and simulate (-tags noeval), which it
# runs in spamtrain-eval, the full build installed beside it.

PREFIX     ?= /usr/local
BINDIR     ?= $(PREFIX)/bin
MANDIR     ?= $(PREFIX)/share/man
SYSCONFDIR ?= /etc
UNITDIR    ?= $(PREFIX)/lib/systemd/system
BASHCOMPDIR ?= $(PREFIX)/share/bash-completion/completions
ZSHCOMPDIR ?= $(PREFIX)/share/zsh/site-functions

GO      ?= go
GOBUILDFLAGS ?= -trimpath
# The profile spamtrain is built with (make pgo, below). It is not named
# default.pgo, which go build and go test would apply on their own: every
# build it guides compiles each package anew, and go test -race ./...
# would compile the whole tree again, race-instrumented, for spamtrain's
# tests alone.
SPAMTRAIN_PGO ?= -pgo=$(CURDIR)/cmd/spamtrain/spamtrain.pgo
# The pages' date: the last commit's, so that a build is reproducible.
DATE    ?= $(shell git log -1 --format=%cs 2>/dev/null)

BUILDDIR ?= build
B := $(BUILDDIR)

BINARIES := $(B)/spamd $(B)/spamtrain $(B)/spamtrain-eval
PAGES    := $(B)/man/spamd.8 $(B)/man/spamtrain.1 $(B)/man/spamd.conf.5
COMPLETIONS := $(B)/completion/spamd.bash $(B)/completion/spamtrain.bash \
	$(B)/completion/_spamd $(B)/completion/_spamtrain

.PHONY: all install uninstall test pgo clean $(BINARIES)

all: $(BINARIES) $(PAGES) $(COMPLETIONS) $(B)/spamd.service

# Go's build cache decides what to rebuild.
$(B)/spamd:
	$(GO) build $(GOBUILDFLAGS) -o $@ ./cmd/spamd
$(B)/spamtrain:
	$(GO) build $(GOBUILDFLAGS) $(SPAMTRAIN_PGO) -tags noeval -o $@ ./cmd/spamtrain
$(B)/spamtrain-eval:
	$(GO) build $(GOBUILDFLAGS) $(SPAMTRAIN_PGO) -o $@ ./cmd/spamtrain

$(B)/man/spamd.8: $(B)/spamd
	@mkdir -p $(@D)
	$(B)/spamd gendoc man "$(DATE)" > $@
$(B)/man/spamtrain.1: $(B)/spamtrain-eval
	@mkdir -p $(@D)
	$(B)/spamtrain-eval gendoc man "$(DATE)" > $@
$(B)/man/spamd.conf.5: config/config.go
	@mkdir -p $(@D)
	$(GO) run $(GOBUILDFLAGS) ./internal/gendoc/confpage -src config/config.go -date "$(DATE)" > $@

$(B)/completion/spamd.bash: $(B)/spamd
	@mkdir -p $(@D)
	$(B)/spamd gendoc bash > $@
$(B)/completion/_spamd: $(B)/spamd
	@mkdir -p $(@D)
	$(B)/spamd gendoc zsh > $@
$(B)/completion/spamtrain.bash: $(B)/spamtrain-eval
	@mkdir -p $(@D)
	$(B)/spamtrain-eval gendoc bash > $@
$(B)/completion/_spamtrain: $(B)/spamtrain-eval
	@mkdir -p $(@D)
	$(B)/spamtrain-eval gendoc zsh > $@

# The unit runs the spamd this installs.
$(B)/spamd.service: systemd/spamd.service
	@mkdir -p $(@D)
	sed 's|/usr/local/bin/spamd|$(BINDIR)/spamd|g' systemd/spamd.service > $@

install: all
	install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(MANDIR)/man1 $(DESTDIR)$(MANDIR)/man5 $(DESTDIR)$(MANDIR)/man8 \
		$(DESTDIR)$(UNITDIR) $(DESTDIR)$(BASHCOMPDIR) $(DESTDIR)$(ZSHCOMPDIR) $(DESTDIR)$(SYSCONFDIR)/spamd
	install -m 0755 $(BINARIES) $(DESTDIR)$(BINDIR)/
	install -m 0644 $(B)/man/spamtrain.1 $(DESTDIR)$(MANDIR)/man1/
	install -m 0644 $(B)/man/spamd.conf.5 $(DESTDIR)$(MANDIR)/man5/
	install -m 0644 $(B)/man/spamd.8 $(DESTDIR)$(MANDIR)/man8/
	install -m 0644 $(B)/spamd.service $(DESTDIR)$(UNITDIR)/spamd.service
	install -m 0644 $(B)/completion/spamd.bash $(DESTDIR)$(BASHCOMPDIR)/spamd
	install -m 0644 $(B)/completion/spamtrain.bash $(DESTDIR)$(BASHCOMPDIR)/spamtrain
	install -m 0644 $(B)/completion/_spamd $(B)/completion/_spamtrain $(DESTDIR)$(ZSHCOMPDIR)/
	install -m 0644 config.toml $(DESTDIR)$(SYSCONFDIR)/spamd/config.toml.example
	# The configuration in force is never overwritten.
	test -e $(DESTDIR)$(SYSCONFDIR)/spamd/config.toml || \
		install -m 0644 config.toml $(DESTDIR)$(SYSCONFDIR)/spamd/config.toml

uninstall:
	rm -f $(DESTDIR)$(BINDIR)/spamd $(DESTDIR)$(BINDIR)/spamtrain $(DESTDIR)$(BINDIR)/spamtrain-eval \
		$(DESTDIR)$(MANDIR)/man1/spamtrain.1 $(DESTDIR)$(MANDIR)/man5/spamd.conf.5 $(DESTDIR)$(MANDIR)/man8/spamd.8 \
		$(DESTDIR)$(UNITDIR)/spamd.service $(DESTDIR)$(BASHCOMPDIR)/spamd $(DESTDIR)$(BASHCOMPDIR)/spamtrain \
		$(DESTDIR)$(ZSHCOMPDIR)/_spamd $(DESTDIR)$(ZSHCOMPDIR)/_spamtrain \
		$(DESTDIR)$(SYSCONFDIR)/spamd/config.toml.example

test:
	$(GO) vet ./...
	$(GO) test -race ./...

# cmd/spamtrain/spamtrain.pgo is the CPU profile spamtrain is built with
# (profile-guided optimization, SPAMTRAIN_PGO above): a first training on
# the SpamAssassin corpus's first 4,837 messages and a classify of the
# other 1,209, as peerbench times them, three times each. Made anew when
# the code it profiles has changed much; a stale profile only optimizes
# less. SPAMD_CORPUS is the corpus's directory.
PGO_RUNS := 1 2 3
# An index's paths are read relative to the index file, so the copies
# made under $(B)/pgo name the corpus's files by absolute paths.
PGO_CORPUS = $(abspath $(SPAMD_CORPUS))
pgo: $(B)/spamtrain
	@test -n "$(SPAMD_CORPUS)" || { echo "make pgo: set SPAMD_CORPUS to the SpamAssassin corpus's directory" >&2; exit 2; }
	rm -rf $(B)/pgo && mkdir -p $(B)/pgo
	head -n 4837 "$(PGO_CORPUS)/index" | sed 's|^\([^ 	]*[ 	]*\)|\1$(PGO_CORPUS)/|' > $(B)/pgo/train.index
	tail -n +4838 "$(PGO_CORPUS)/index" | sed 's|^[^ 	]*[ 	]*|$(PGO_CORPUS)/|' > $(B)/pgo/test.list
	for i in $(PGO_RUNS); do \
		rm -rf $(B)/pgo/db && \
		SPAMTRAIN_CPUPROFILE=$(B)/pgo/train$$i.prof $(B)/spamtrain train --db $(B)/pgo/db --index $(B)/pgo/train.index >/dev/null && \
		SPAMTRAIN_CPUPROFILE=$(B)/pgo/classify$$i.prof $(B)/spamtrain classify --db $(B)/pgo/db --files-from $(B)/pgo/test.list >/dev/null \
		|| exit 1; \
	done
	$(GO) tool pprof -proto $(B)/pgo/*.prof > $(B)/pgo/spamtrain.pgo
	mv $(B)/pgo/spamtrain.pgo cmd/spamtrain/spamtrain.pgo

clean:
	rm -rf $(B)
