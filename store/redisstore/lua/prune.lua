-- prune: deletes from one user's model the token rows a prune plan
-- selects, among those whose hash's top 32 bits are in [lo, hi), each
-- judged as it is now, and takes their counts from the totals and the
-- vocabulary in the same step. Every row is read and judged before
-- anything is written.
--
-- KEYS[1]  the user's totals hash
-- ARGV[1]  the user's key base, P{user:}
-- ARGV[2]  the day the store was upgraded from schema 2 (0 if it was not),
--          which a row of schema 2 reads as its day
-- ARGV[3]  lo, ARGV[4] hi: the range of the top 32 bits of the hashes
-- ARGV[5…10] the plan (read_plan)
--
-- Returns {rows deleted, the buckets they went from (numbers), totals},
-- totals the values of the totals fields the call leaves.

local tk, base = KEYS[1], ARGV[1]
local upday, lo, hi = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local plan = read_plan(5)
local tv = rcall('HMGET', tk, 'ver', 'lvl', 'spl', 'rows', 'voc', 'msg', 'tok', 'day', 'fgt')
if not tv[1] then return {0, {}, tv} end
local L, split = tonumber(tv[2]) or 0, tonumber(tv[3]) or 0
local nrows, voc = tonumber(tv[4]) or 0, tonumber(tv[5]) or 0
local toks = parse_list(tv[7])

local dels, touched, n = {}, {}, 0
for _, id in ipairs(buckets_in(L, split, lo, hi)) do
  local k = bucket_key(base, id)
  local all = rcall('HGETALL', k)
  local fs = {}
  for i = 1, #all, 2 do
    local f = all[i]
    if in_range(f, lo, hi) then
      local row = decode_row(all[i + 1])
      if prune_drops(plan, row, row.d or upday) then
        fs[#fs + 1] = f
        for c = 1, #row, 2 do
          local v = row[c]
          if v ~= 0 then toks[(c + 1) / 2] = mmax(0, (toks[(c + 1) / 2] or 0) - v) end
        end
        local any = false
        for c = 1, #row, 2 do any = any or row[c] ~= 0 end
        if any then voc = voc - 1 end
        nrows = nrows - 1
      end
    end
  end
  if #fs > 0 then
    dels[k] = fs
    touched[#touched + 1] = id
    n = n + #fs
  end
end
if n == 0 then return {0, {}, tv} end
for k, fs in pairs(dels) do hdel_all(k, fs) end
tv = {num((tonumber(tv[1]) or 0) + 1), tv[2], tv[3], num(mmax(nrows, 0)), num(mmax(voc, 0)), tv[6], format_list(toks), tv[8], tv[9]}
rcall('HSET', tk, 'ver', tv[1], 'rows', tv[4], 'voc', tv[5], 'tok', tv[7])
return {n, touched, tv}
