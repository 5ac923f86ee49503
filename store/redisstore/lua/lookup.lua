-- lookup: the totals of a user and the rows of tokens, read in one
-- atomic step, so that a node never sees rows of a layout other than the
-- one it reads.
--
-- KEYS[1]  the user's totals hash
-- ARGV[1]  the user's key base, P{user:}
-- ARGV[2]  the tokens: 8 bytes of hash each
--
-- Returns {totals, rows}: totals the values of the totals fields (nil for
-- missing), rows a row or nil per token.
local tv = redis.call('HMGET', KEYS[1], 'ver', 'lvl', 'spl', 'rows', 'voc', 'msg', 'tok', 'day', 'fgt')
local L = tonumber(tv[2]) or 0
local split = tonumber(tv[3]) or 0
local base, hs = ARGV[1], ARGV[2]
local keys = {}
local out = {}
for i = 1, #hs / 8 do
  local f = ssub(hs, 8 * i - 7, 8 * i)
  local id = bucket_of(f, L, split)
  local k = keys[id]
  if not k then
    k = bucket_key(base, id)
    keys[id] = k
  end
  out[i] = rcall('HGET', k, f)
end
return {tv, out}
