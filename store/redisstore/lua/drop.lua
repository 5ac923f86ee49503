-- drop: deletes a user's model whole, and what a restore left staged,
-- in one atomic step.
--
-- KEYS[1]  the user's totals hash
-- KEYS[2]  the user's seen hash
-- KEYS[3]  the staged totals hash
-- KEYS[4]  the staged seen hash
-- KEYS[5]  the user's samples hash
-- KEYS[6]  the staged samples hash
-- ARGV[1]  the user's key base, P{user:}
--
-- Returns the number of keys deleted.

local base = ARGV[1]
local n = 0
local function drop(tk, prefix)
  local lv = rcall('HMGET', tk, 'lvl', 'spl')
  local L, split = tonumber(lv[1]) or 0, tonumber(lv[2]) or 0
  -- Buckets of the layout, and any left past it by a split cut short.
  for id = 1, P2[L + 1] + 2 * split do
    n = n + rcall('DEL', base .. prefix .. sformat('%x', id))
  end
end
drop(KEYS[1], 'b:')
drop(KEYS[3], 'Rb:')
for i = 1, 6 do
  n = n + rcall('DEL', KEYS[i])
end
return n
