package redisstore

import (
	_ "embed"

	"github.com/redis/rueidis"
)

// The scripts, in lua/. Each starts with its flags: without no-writes a
// script is refused whole, before it runs, when Redis is over maxmemory,
// so that an op is never cut off halfway by an OOM error; with it, a
// script runs on replicas and while Redis is out of memory. The prune
// scripts, which free memory and grow none but a field or two of the
// totals, carry allow-oom: a Redis at maxmemory, refusing to learn, can
// still be pruned.
var (
	//go:embed lua/common.lua
	luaCommon string
	//go:embed lua/lookup.lua
	luaLookup string
	//go:embed lua/dump.lua
	luaDump string
	//go:embed lua/apply.lua
	luaApply string
	//go:embed lua/register.lua
	luaRegister string
	//go:embed lua/commit.lua
	luaCommit string
	//go:embed lua/drop.lua
	luaDrop string
	//go:embed lua/upgrade.lua
	luaUpgrade string
	//go:embed lua/census.lua
	luaCensus string
	//go:embed lua/prune.lua
	luaPrune string
	//go:embed lua/prune_seen.lua
	luaPruneSeen string
)

// scripts are the scripts a store runs, each sent once per server with
// SCRIPT LOAD's hash (EVALSHA) and again whole when a server does not
// know it yet (after a restart or a failover).
type scripts struct {
	lookup, dump, apply, register, commit, drop, upgrade *rueidis.Lua
	census, prune, pruneSeen                             *rueidis.Lua
}

func newScripts() scripts {
	return scripts{
		lookup:    rueidis.NewLuaScriptReadOnly("#!lua flags=no-writes\n" + luaCommon + luaLookup),
		dump:      rueidis.NewLuaScriptReadOnly("#!lua flags=no-writes\n" + luaCommon + luaDump),
		apply:     rueidis.NewLuaScript("#!lua\n" + luaCommon + luaApply),
		register:  rueidis.NewLuaScript("#!lua\n" + luaRegister),
		commit:    rueidis.NewLuaScript("#!lua\n" + luaCommon + luaCommit),
		drop:      rueidis.NewLuaScript("#!lua\n" + luaCommon + luaDrop),
		upgrade:   rueidis.NewLuaScript("#!lua\n" + luaUpgrade),
		census:    rueidis.NewLuaScriptReadOnly("#!lua flags=no-writes\n" + luaCommon + luaCensus),
		prune:     rueidis.NewLuaScript("#!lua flags=allow-oom\n" + luaCommon + luaPrune),
		pruneSeen: rueidis.NewLuaScript("#!lua flags=allow-oom\n" + luaCommon + luaPruneSeen),
	}
}
