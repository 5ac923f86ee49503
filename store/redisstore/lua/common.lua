-- Shared by every script of spamd's Redis store (package redisstore): the
-- row encoding and the bucket layout, which Go mirrors in keys.go.
--
-- Numbers are Lua's doubles: integers are exact up to 2^53, which bounds
-- every count, weight and total (MAXEXACT); a script refuses an op that
-- would pass it, before writing anything of it.

local MAXEXACT = 9007199254740992

-- Globals are looked up through the sandbox's metatable on every use:
-- what the loops call is made local once.
local rcall, pcall_, sbyte, ssub, schar, sformat = redis.call, redis.pcall, string.byte, string.sub, string.char, string.format
local floor, mmin, mmax, tconcat, unpack_ = math.floor, math.min, math.max, table.concat, unpack
local spack, sunpack = struct.pack, struct.unpack

local P2 = {}
for i = 0, 40 do P2[i] = 2 ^ i end

-- num formats an integer exactly (tostring would round past 14 digits).
local function num(x)
  return sformat('%d', x)
end

-- fail raises an error the scripts report as the op's failure.
local function fail(msg)
  error('spamd: ' .. msg, 0)
end

-- top32 returns the top 32 bits of a field, a token's 8-byte hash.
local function top32(f)
  local a, b, c, d = sbyte(f, 1, 4)
  return ((a * 256 + b) * 256 + c) * 256 + d
end

-- bucket_of returns the number of the bucket that holds field f at level
-- L with split buckets split: linear hashing on the hash's top bits, the
-- bucket x of level l numbered 2^l + x.
local function bucket_of(f, L, split)
  local t = top32(f)
  local x = 0
  if L > 0 then x = floor(t / P2[32 - L]) end
  if x < split then
    return P2[L + 1] + floor(t / P2[31 - L])
  end
  return P2[L] + x
end

local function bucket_key(base, id)
  return base .. 'b:' .. sformat('%x', id)
end

-- Rows. A row holds per class index a count and a weight; index 2c+1 of
-- the Lua table is class c's count, 2c+2 its weight; its field d is the
-- last day the token was trained on, nil for a row of schema 2, which has
-- none (it reads as the day the store was upgraded).
--
-- A row of at most two classes whose counts fit in 3 bytes unsigned and
-- weights in 3 bytes signed (nearly every row) is a header byte, the
-- widths of its four values in bytes, 2 bits each, low bits first, then
-- the values big-endian, zeros taking no byte, then the day big-endian in
-- 1 to 4 bytes: struct unpacks and packs the values in one call. Any other
-- row is the byte 255 (a header no row of the first kind has), then its
-- values as varints (counts unsigned, weights zigzag, trailing zeros
-- dropped), then the day as a varint, then the byte 128, with which no
-- varint ends. A row of schema 2 ends after its values.
local FMT = {}  -- header → the values' struct format
for h = 0, 254 do
  local w0, w1, w2, w3 = h % 4, floor(h / 4) % 4, floor(h / 16) % 4, floor(h / 64)
  FMT[h] = '>I' .. w0 .. 'i' .. w1 .. 'I' .. w2 .. 'i' .. w3
end

local function width_u(v)
  if v == 0 then return 0 elseif v < 256 then return 1 elseif v < 65536 then return 2 elseif v < 16777216 then return 3 end
  return 4
end

local function width_s(v)
  if v == 0 then return 0 elseif v >= -128 and v < 128 then return 1 elseif v >= -32768 and v < 32768 then return 2
  elseif v >= -8388608 and v < 8388608 then return 3 end
  return 4
end

local DAYFMT = {'>I1', '>I2', '>I3', '>I4'}

local function decode_row(s)
  local h = sbyte(s, 1)
  if h == nil then fail('corrupt row: empty') end
  if h ~= 255 then
    local a, b, c, d, pos = sunpack(FMT[h], s, 2)
    local row = {a, b, c, d}
    local n = #s - pos + 1
    if n > 0 then
      if n > 4 then fail('corrupt row: length') end
      row.d = sunpack(DAYFMT[n], s, pos)
    end
    return row
  end
  local row = {}
  local v, mul, k = 0, 1, 0
  local len = #s
  local dated = sbyte(s, len) == 128
  if dated then len = len - 1 end
  for j = 2, len do
    local b = sbyte(s, j)
    if b >= 128 then
      v = v + (b - 128) * mul
      mul = mul * 128
    else
      v = v + b * mul
      if dated and j == len then
        if v >= P2[32] then fail('corrupt row: day') end
        row.d = v
      else
        if v > 2 * MAXEXACT then fail('corrupt row: value out of range') end
        k = k + 1
        if k % 2 == 0 then
          if v % 2 == 0 then v = v / 2 else v = -(v + 1) / 2 end
        end
        row[k] = v
      end
      v, mul = 0, 1
    end
  end
  if mul ~= 1 then fail('corrupt row: truncated') end
  if dated and row.d == nil then fail('corrupt row: no day') end
  return row
end

local buf = {}

-- encode_row is the inverse of decode_row.
local function encode_row(row)
  local n = #row
  while n > 0 and row[n] == 0 do n = n - 1 end
  local day = row.d
  if n <= 4 then
    local a, b, c, d = row[1] or 0, row[2] or 0, row[3] or 0, row[4] or 0
    local wa, wb, wc, wd = width_u(a), width_s(b), width_u(c), width_s(d)
    if wa < 4 and wb < 4 and wc < 4 and wd < 4 then
      local h = wa + wb * 4 + wc * 16 + wd * 64
      if h ~= 255 then
        local s = schar(h) .. spack(FMT[h], a, b, c, d)
        if day then s = s .. spack(DAYFMT[mmax(width_u(day), 1)], day) end
        return s
      end
    end
  end
  local m = 1
  buf[1] = 255
  local function put(v)
    while v >= 128 do
      local b = v % 128
      m = m + 1
      buf[m] = b + 128
      v = (v - b) / 128
    end
    m = m + 1
    buf[m] = v
  end
  for k = 1, n do
    local v = row[k]
    if k % 2 == 0 then
      if v >= 0 then v = v * 2 else v = -v * 2 - 1 end
    end
    put(v)
  end
  if day then
    put(day)
    m = m + 1
    buf[m] = 128
  end
  return schar(unpack_(buf, 1, m))
end

-- parse_list reads a space-separated list of numbers.
local function parse_list(s)
  local t = {}
  if s then
    for x in string.gmatch(s, '%S+') do
      local v = tonumber(x)
      if v == nil then fail('corrupt totals') end
      t[#t + 1] = v
    end
  end
  return t
end

-- format_list writes t[1..n] (nil counting as zero), n being the
-- largest index set.
local function format_list(t)
  local n = 0
  for i in pairs(t) do
    if i > n then n = i end
  end
  local parts = {}
  for i = 1, n do parts[i] = num(t[i] or 0) end
  return table.concat(parts, ' ')
end

-- hset_all sets field/value pairs in t, a flat list, in calls of a
-- bounded number of arguments (Lua's unpack takes some thousands).
local function hset_all(key, t)
  for i = 1, #t, 1000 do
    rcall('HSET', key, unpack_(t, i, mmin(i + 999, #t)))
  end
end

local function hdel_all(key, t)
  for i = 1, #t, 1000 do
    rcall('HDEL', key, unpack_(t, i, mmin(i + 999, #t)))
  end
end

-- put_all sets each of fields of hash key to value(f), or deletes it
-- where value(f) is nil: one HSET and one HDEL, each in chunks.
local function put_all(key, fields, value)
  local set, del = {}, {}
  for _, f in ipairs(fields) do
    local v = value(f)
    if v then
      set[#set + 1] = f
      set[#set + 1] = v
    else
      del[#del + 1] = f
    end
  end
  if #set > 0 then hset_all(key, set) end
  if #del > 0 then hdel_all(key, del) end
end

-- parse_values reads "MEASURE LEVEL ..." into a flat list, checking it.
-- cached_num returns field f of hash key as a number (0 if unset),
-- reading Redis once per field: cache holds what was read.
local function cached_num(cache, key, f)
  local v = cache[f]
  if v == nil then
    v = tonumber(rcall('HGET', key, f)) or 0
    cache[f] = v
  end
  return v
end

local function parse_values(txt)
  local t = parse_list(txt)
  if #t % 2 ~= 0 then fail('corrupt values') end
  for i = 1, #t, 2 do
    local m, l = t[i], t[i + 1]
    if m < 0 or m >= 64 or l < 0 or l >= 1024 or m ~= floor(m) or l ~= floor(l) or (i > 1 and m <= t[i - 2]) then
      fail('corrupt values')
    end
  end
  return t
end

-- parse_seen returns a seen record's class index, steps, values and day
-- (nil for a record of schema 1 or 2, which has none): the record is
-- "CLASS [HEAD BODY]...;[MEASURE LEVEL]...;DAY[ MARK]", the mark in hex,
-- and one of schema 2 ends before its second ";".
local function parse_seen(v)
  local head, vals, tail = v, '', nil
  local semi = string.find(v, ';', 1, true)
  if semi then
    head, vals = ssub(v, 1, semi - 1), ssub(v, semi + 1)
    local semi2 = string.find(vals, ';', 1, true)
    if semi2 then vals, tail = ssub(vals, 1, semi2 - 1), ssub(vals, semi2 + 1) end
  end
  local t = parse_list(head)
  if #t == 0 or #t % 2 == 0 or t[1] < 0 then fail('corrupt seen record') end
  local steps = {}
  for i = 2, #t do steps[i - 1] = t[i] end
  local day = nil
  if tail then
    day = tonumber(string.match(tail, '^%d+'))
    if day == nil then fail('corrupt seen record: day') end
  end
  return t[1], steps, parse_values(vals), day
end

-- buckets_in returns the numbers of the buckets of the layout (level L,
-- split buckets split) that hold tokens whose hash's top 32 bits are in
-- [lo, hi): at level L the bucket of position x holds the top bits
-- [x, x+1) times 2^(32-L), and a split one's two children the halves.
local function buckets_in(L, split, lo, hi)
  local out = {}
  local size = P2[32 - L]
  for x = floor(lo / size), floor((hi - 1) / size) do
    if x < split then
      local half = size / 2
      for bit = 0, 1 do
        local from = x * size + bit * half
        if from < hi and from + half > lo then
          out[#out + 1] = P2[L + 1] + 2 * x + bit
        end
      end
    else
      out[#out + 1] = P2[L] + x
    end
  end
  return out
end

-- in_range reports whether field f, a token's hash, has its top 32 bits
-- in [lo, hi).
local function in_range(f, lo, hi)
  if #f ~= 8 then return false end
  local t = top32(f)
  return t >= lo and t < hi
end

-- prune_drops reports whether a prune plan deletes row, last trained on
-- day, as store.PrunePlan.Drop does (TestPruneJudge holds them to it):
-- plan.tokens is whether the rule deletes rows at all; maxcount and
-- before its age rule (before 0 for none); budget whether its budget
-- deletes rows, those up to (ctotal, cday) in the order of total count,
-- then day.
local function prune_drops(plan, row, day)
  local total = 0
  for i = 1, #row, 2 do total = total + row[i] end
  if total == 0 then
    -- Weights alone, the message that brought the token untrained.
    return plan.tokens
  end
  -- Day 0 is no day (a row restored from an old dump): never old.
  if plan.before ~= 0 and total <= plan.maxcount and day ~= 0 and day < plan.before then
    return true
  end
  if not plan.budget then return false end
  return total < plan.ctotal or (total == plan.ctotal and day <= plan.cday)
end

-- read_plan reads a prune plan from six arguments from ARGV[i]: tokens
-- (1 or 0), maxcount, before, budget (1 or 0), ctotal, cday.
local function read_plan(i)
  return {
    tokens = ARGV[i] == '1', maxcount = tonumber(ARGV[i + 1]), before = tonumber(ARGV[i + 2]),
    budget = ARGV[i + 3] == '1', ctotal = tonumber(ARGV[i + 4]), cday = tonumber(ARGV[i + 5]),
  }
end
