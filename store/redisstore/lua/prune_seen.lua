-- prune_seen: deletes the seen records of messages trained before a day
-- (not those of day 0, whose day is unknown), among the digests given,
-- each judged as it is now: it counts each as
-- forgotten in its class and takes its values out of the samples, as
-- untraining does (its counts stay in the model). Every record is read
-- and judged before anything is written.
--
-- KEYS[1]  the user's totals hash
-- KEYS[2]  the user's seen hash
-- KEYS[3]  the user's samples hash
-- ARGV[1]  the day the store was upgraded from schema 2 (0 if it was not),
--          which a record of schema 2 reads as its day
-- ARGV[2]  the day: records of days before it go
-- ARGV[3…] digests
--
-- Returns {records deleted, totals}.

local tk, sk, dk = KEYS[1], KEYS[2], KEYS[3]
local upday, before = tonumber(ARGV[1]), tonumber(ARGV[2])
local tv = rcall('HMGET', tk, 'ver', 'lvl', 'spl', 'rows', 'voc', 'msg', 'tok', 'day', 'fgt')
if not tv[1] then return {0, tv} end
local fgt = parse_list(tv[9])

local gone, dv = {}, {}
for i = 3, #ARGV do
  local d = ARGV[i]
  local rec = rcall('HGET', sk, d)
  if rec then
    local cls, _, vals, day = parse_seen(rec)
    day = day or upday
    -- Day 0 is no day (a record restored from an old dump): it stays.
    if day ~= 0 and day < before then
      gone[#gone + 1] = d
      fgt[cls + 1] = (fgt[cls + 1] or 0) + 1
      for j = 1, #vals, 2 do
        local p = num(cls) .. '.' .. num(vals[j]) .. '.'
        local l = vals[j + 1]
        -- A value missing from the samples, which only damage makes, is
        -- taken from nothing, for check to report.
        if cached_num(dv, dk, p .. num(l)) > 0 then
          for _, c in ipairs({{p .. num(l), 1}, {p .. 'n', 1}, {p .. 's', l}, {p .. 'q', l * l}}) do
            dv[c[1]] = mmax(cached_num(dv, dk, c[1]) - c[2], 0)
          end
        end
      end
    end
  end
end
if #gone == 0 then return {0, tv} end
hdel_all(sk, gone)
local changed = {}
for f in pairs(dv) do changed[#changed + 1] = f end
put_all(dk, changed, function(f)
  if dv[f] > 0 then return num(dv[f]) end
end)
tv[1] = num((tonumber(tv[1]) or 0) + 1)
tv[9] = format_list(fgt)
rcall('HSET', tk, 'ver', tv[1], 'fgt', tv[9])
return {#gone, tv}
