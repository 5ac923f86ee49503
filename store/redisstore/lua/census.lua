-- census: the totals of a user and the rows of the tokens whose hash's
-- top 32 bits are in [lo, hi), read in one atomic step, for the first
-- pass of a prune with a budget.
--
-- KEYS[1]  the user's totals hash
-- ARGV[1]  the user's key base, P{user:}
-- ARGV[2]  lo, ARGV[3] hi
--
-- Returns {totals, rows}: rows the fields and values, flat.
local base, lo, hi = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local tv = rcall('HMGET', KEYS[1], 'ver', 'lvl', 'spl', 'rows', 'voc', 'msg', 'tok', 'day', 'fgt')
local out = {}
if tv[1] then
  for _, id in ipairs(buckets_in(tonumber(tv[2]) or 0, tonumber(tv[3]) or 0, lo, hi)) do
    local all = rcall('HGETALL', bucket_key(base, id))
    for i = 1, #all, 2 do
      if in_range(all[i], lo, hi) then
        out[#out + 1] = all[i]
        out[#out + 1] = all[i + 1]
      end
    end
  end
end
return {tv, out}
