-- commit: puts a restored model in place, in one atomic step, by
-- renaming the staged keys (P{user:}R...) to the model's own, so that
-- readers see the whole model or none. It refuses when the user has a
-- model by now (trained while the restore ran).
--
-- KEYS[1]  the user's totals hash
-- KEYS[2]  the user's seen hash
-- KEYS[3]  the staged totals hash, which holds the staged layout
-- KEYS[4]  the staged seen hash
-- KEYS[5]  the user's samples hash
-- KEYS[6]  the staged samples hash
-- ARGV[1]  the user's key base, P{user:}
--
-- Returns the number of buckets put in place, or an error "spamd: exists".

local tk, sk, rtk, rsk, dk, rdk = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]
local base = ARGV[1]
if rcall('EXISTS', tk) == 1 or rcall('EXISTS', sk) == 1 or rcall('EXISTS', dk) == 1 then
  fail('exists')
end
local lv = rcall('HMGET', rtk, 'lvl', 'spl')
local L, split = tonumber(lv[1]) or 0, tonumber(lv[2]) or 0
local n = 0
for id = P2[L] + split, P2[L + 1] + 2 * split - 1 do
  local from = base .. 'Rb:' .. sformat('%x', id)
  if rcall('EXISTS', from) == 1 then
    rcall('RENAME', from, bucket_key(base, id))
    n = n + 1
  end
end
if rcall('EXISTS', rsk) == 1 then
  rcall('RENAME', rsk, sk)
end
if rcall('EXISTS', rdk) == 1 then
  rcall('RENAME', rdk, dk)
end
rcall('RENAME', rtk, tk)
return n
