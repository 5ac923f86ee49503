-- apply: trains, untrains and relabels messages of one user, one op after
-- the other, each op whole or not at all.
--
-- KEYS[1]  the user's totals hash
-- KEYS[2]  the user's seen hash
-- KEYS[3]  the user's samples hash
-- ARGV[1]  the user's key base, P{user:}
-- ARGV[2]  the bucket load: rows per bucket past which a bucket is split
-- ARGV[3]  the most buckets one call may split
-- ARGV[4]  the day the store was upgraded from schema 2 (0 if it was not),
--          which rows and records of schema 2 read as their day
-- ARGV[5]  the number of ops, then seven arguments per op:
--          the digest (32 bytes, the seen hash's field);
--          the index of the class to train the message as, -1 to forget it;
--          its steps as its seen record will keep them ("HEAD BODY ..."
--          per class index);
--          how many of its features are its header's;
--          its features, 12 bytes each: the hash and the count, big-endian;
--          its values as its seen record will keep them ("MEASURE LEVEL ...");
--          its day and mark as its seen record will keep them ("DAY[ MARK]",
--          the mark in hex), the day being what training writes into the
--          rows it adds to: the latest of theirs and its own.
--
-- Each op reads what it needs (the seen record, the rows of its tokens,
-- the fields of the samples its values and its old values change) into an
-- overlay of the values the call has read or changed, computes every new
-- value on copies and checks it, and only then puts them into the
-- overlay: an op that fails leaves no trace, and the ops before it stand.
-- Nothing is written to Redis until every op has run (or one has failed):
-- then the buckets are split as the new number of rows asks, and each
-- changed row, seen record, sample field and the totals are written once,
-- rows in their buckets of the new layout.
--
-- A sample is fields of the samples hash: "C.M.L" the count of class C's
-- values of measure M at level L, and "C.M.n", "C.M.s", "C.M.q" their
-- count, sum and sum of squares; a field that reaches 0 is deleted.
--
-- The totals keep the latest day a message was trained on (day), and
-- the seen records Prune deleted per class (fgt), which an op leaves.
--
-- Returns {results, failure, totals}: results a previous class index (-1
-- for none) and a changed flag (0 or 1) per op applied; failure false, or
-- why the op after them was not applied; totals the values of the totals
-- fields the call leaves, as lookup returns them.

local tk, sk, dk = KEYS[1], KEYS[2], KEYS[3]
local base = ARGV[1]
local load = tonumber(ARGV[2])
local maxsplits = tonumber(ARGV[3])
local upday = tonumber(ARGV[4])
local nops = tonumber(ARGV[5])

local tv = redis.call('HMGET', tk, 'ver', 'lvl', 'spl', 'rows', 'voc', 'msg', 'tok', 'day', 'fgt')
local ver = tonumber(tv[1]) or 0
local L = tonumber(tv[2]) or 0
local split = tonumber(tv[3]) or 0
local nrows = tonumber(tv[4]) or 0
local voc = tonumber(tv[5]) or 0
local msgs = parse_list(tv[6])
local toks = parse_list(tv[7])
-- A model of schema 2 not trained since has no day: the upgrade's.
local lastday = tonumber(tv[8]) or (tv[1] and upday) or 0

local function counts_any(row)
  for i = 1, #row, 2 do
    if row[i] ~= 0 then return true end
  end
  return false
end

local function all_zero(row)
  for i = 1, #row do
    if row[i] ~= 0 then return false end
  end
  return true
end

local rows = {}      -- field → row, or false for none: the overlay
local dirty = {}     -- fields changed, in order
local isdirty = {}
local seen = {}      -- digest → record, or false for none
local seendirty = {} -- digests changed, in order
local isseendirty = {}
local results = {}
local changed = false
local dv = {}        -- samples field → value: the overlay
local ddirty = {}    -- fields changed, in order
local isddirty = {}

local keys = {} -- bucket number → key
local function key_of(f)
  local id = bucket_of(f, L, split)
  local k = keys[id]
  if not k then
    k = bucket_key(base, id)
    keys[id] = k
  end
  return k
end

-- fetch returns a row to change: a copy of the overlay's, or one decoded
-- afresh from Redis, which the overlay does not hold yet (the op puts it
-- there once it succeeds); false for none. It also returns whether the
-- row existed and had a count, before the op.
local function fetch(f)
  local r = rows[f]
  if r == nil then
    local v = rcall('HGET', key_of(f), f)
    if not v then return false, false, false end
    r = decode_row(v)
    return r, true, counts_any(r)
  end
  if not r then return false, false, false end
  local c = {d = r.d}
  for i = 1, #r do c[i] = r[i] end
  return c, true, counts_any(r)
end

local function load_seen(d)
  local r = seen[d]
  if r == nil then
    r = rcall('HGET', sk, d)
    seen[d] = r
  end
  return r
end

-- dget returns a samples field's value, pending or in the overlay or in
-- Redis.
local function dget(pend, f)
  local v = pend[f]
  if v == nil then v = cached_num(dv, dk, f) end
  return v
end

-- change_samples adds (n = 1) or takes away (n = -1) the values of a
-- message of class c into pend. Taking away a value where there is none,
-- which only damage makes, takes nothing, for check to report.
local function change_samples(pend, c, vals, n)
  for i = 1, #vals, 2 do
    local p = num(c) .. '.' .. num(vals[i]) .. '.'
    local l = vals[i + 1]
    local lf = p .. num(l)
    local cur = dget(pend, lf)
    if n > 0 or cur > 0 then
      for _, d in ipairs({{lf, n}, {p .. 'n', n}, {p .. 's', n * l}, {p .. 'q', n * l * l}}) do
        local v = dget(pend, d[1]) + d[2]
        if v < 0 or v > MAXEXACT then fail('sample out of range') end
        pend[d[1]] = v
      end
    end
  end
end

-- add adds d to row[i], growing the row with zeros as needed.
local function add(row, i, d)
  for j = #row + 1, i do row[j] = 0 end
  local v = row[i] + d
  if v > MAXEXACT or v < -MAXEXACT then fail('count or weight out of range') end
  row[i] = v
end

-- add_steps adds n times the head (part 1) or body (part 2) steps to the
-- weights of row: steps[2c+part] is class c's, its weight row[2c+2].
local function add_steps(row, steps, part, n)
  for c = 0, #steps / 2 - 1 do
    local s = steps[2 * c + part]
    if s ~= 0 then
      local d = s * n
      if d > MAXEXACT or d < -MAXEXACT then fail('weight step out of range') end
      add(row, 2 * c + 2, d)
    end
  end
end

local function apply_op(d, cls, steptxt, head, bag, valtxt, daytxt)
  local rec = load_seen(d)
  local prev, psteps, pvals = -1, nil, nil
  if rec then prev, psteps, pvals = parse_seen(rec) end
  if prev == cls then return prev, 0 end
  local nsteps, nvals = {}, {}
  if cls >= 0 then
    nsteps = parse_list(steptxt)
    nvals = parse_values(valtxt)
  end
  if #nsteps % 2 ~= 0 then fail('odd number of steps') end
  local day = tonumber(string.match(daytxt, '^%d+'))
  if day == nil then fail('no day') end
  local dpend = {}
  if prev >= 0 then change_samples(dpend, prev, pvals, -1) end
  if cls >= 0 then change_samples(dpend, cls, nvals, 1) end
  local pend, order, existed, had = {}, {}, {}, {}
  local dtok = {}
  for j = 0, #bag / 12 - 1 do
    local f = ssub(bag, 12 * j + 1, 12 * j + 8)
    local b1, b2, b3, b4 = sbyte(bag, 12 * j + 9, 12 * j + 12)
    local n = ((b1 * 256 + b2) * 256 + b3) * 256 + b4
    if n > 0 then
      local part = 2
      if j < head then part = 1 end
      local row = pend[f]
      if row == nil then
        local ex, hd
        row, ex, hd = fetch(f)
        order[#order + 1] = f
        existed[f], had[f] = ex, hd
      end
      -- A token without a row has nothing to take back, not even steps.
      if prev >= 0 and row then
        local ci = 2 * prev + 1
        local take = mmin(row[ci] or 0, n)
        add(row, ci, -take)
        dtok[prev] = (dtok[prev] or 0) - take
        add_steps(row, psteps, part, -n)
        -- A row untrained to nothing is gone, its day with it, even if
        -- the op trains it again.
        if all_zero(row) then row = false end
      end
      if cls >= 0 then
        row = row or {d = 0}
        -- A row of schema 2 was last trained by the upgrade at the latest.
        row.d = mmax(row.d or upday, day)
        add(row, 2 * cls + 1, n)
        dtok[cls] = (dtok[cls] or 0) + n
        add_steps(row, nsteps, part, n)
      end
      pend[f] = row
    end
  end

  -- Everything checked: into the overlay.
  for f, v in pairs(dpend) do
    dv[f] = v
    if not isddirty[f] then
      isddirty[f] = true
      ddirty[#ddirty + 1] = f
    end
  end
  for _, f in ipairs(order) do
    local new = pend[f]
    if new and all_zero(new) then new = false end
    local hd, has = had[f], new and counts_any(new)
    if has and not hd then voc = voc + 1 elseif hd and not has then voc = voc - 1 end
    if new and not existed[f] then nrows = nrows + 1 elseif existed[f] and not new then nrows = nrows - 1 end
    rows[f] = new
    if not isdirty[f] then
      isdirty[f] = true
      dirty[#dirty + 1] = f
    end
  end
  for c, dt in pairs(dtok) do
    toks[c + 1] = math.max(0, (toks[c + 1] or 0) + dt)
  end
  if prev >= 0 then msgs[prev + 1] = math.max(0, (msgs[prev + 1] or 0) - 1) end
  if cls >= 0 then
    msgs[cls + 1] = (msgs[cls + 1] or 0) + 1
    local r = num(cls)
    if steptxt ~= '' then r = r .. ' ' .. steptxt end
    seen[d] = r .. ';' .. valtxt .. ';' .. daytxt
    lastday = mmax(lastday, day)
  else
    seen[d] = false
  end
  if not isseendirty[d] then
    isseendirty[d] = true
    seendirty[#seendirty + 1] = d
  end
  changed = true
  return prev, 1
end

local failure = false
for o = 0, nops - 1 do
  local a = 6 + 7 * o
  local ok, prev, ch = pcall(apply_op, ARGV[a], tonumber(ARGV[a + 1]), ARGV[a + 2], tonumber(ARGV[a + 3]), ARGV[a + 4], ARGV[a + 5], ARGV[a + 6])
  if not ok then
    -- A failed redis.call raises a table; fail, a string.
    if type(prev) == 'table' then prev = prev.err end
    failure = tostring(prev)
    break
  end
  results[#results + 1] = prev
  results[#results + 1] = ch
end

if not changed then
  return {results, failure, tv}
end

-- Split buckets, in linear hashing's order, while the rows outnumber the
-- load the buckets may carry. A split moves what Redis holds; the rows the
-- ops changed are then written where the new layout puts them.
local splits = 0
while nrows > load * (P2[L] + split) and splits < maxsplits and L < 31 do
  local id = P2[L] + split
  local k = bucket_key(base, id)
  -- Not a hash (which no script writes) reads as empty, and stays: the
  -- writes below may not fail halfway. check reports it.
  local all = pcall_('HGETALL', k)
  if type(all) ~= 'table' or all.err then all = {} end
  local halves = {{}, {}}
  for i = 1, #all, 2 do
    local bit = 0
    if #all[i] >= 4 then bit = floor(top32(all[i]) / P2[31 - L]) % 2 end
    local h = halves[bit + 1]
    h[#h + 1] = all[i]
    h[#h + 1] = all[i + 1]
  end
  if #all > 0 then
    rcall('DEL', k)
    if #halves[1] > 0 then hset_all(bucket_key(base, 2 * id), halves[1]) end
    if #halves[2] > 0 then hset_all(bucket_key(base, 2 * id + 1), halves[2]) end
  end
  split = split + 1
  if split == P2[L] then
    L = L + 1
    split = 0
  end
  splits = splits + 1
end

local sets, dels = {}, {}
for _, f in ipairs(dirty) do
  local k = key_of(f)
  local r = rows[f]
  if r then
    local t = sets[k]
    if not t then t = {}; sets[k] = t end
    t[#t + 1] = f
    t[#t + 1] = encode_row(r)
  else
    local t = dels[k]
    if not t then t = {}; dels[k] = t end
    t[#t + 1] = f
  end
end
for k, t in pairs(sets) do hset_all(k, t) end
for k, t in pairs(dels) do hdel_all(k, t) end
put_all(sk, seendirty, function(d) return seen[d] end)
put_all(dk, ddirty, function(f)
  if dv[f] ~= 0 then return num(dv[f]) end
end)
tv = {num(ver + 1), num(L), num(split), num(nrows), num(math.max(voc, 0)), format_list(msgs), format_list(toks), num(lastday), tv[9]}
redis.call('HSET', tk, 'ver', tv[1], 'lvl', tv[2], 'spl', tv[3], 'rows', tv[4], 'voc', tv[5], 'msg', tv[6], 'tok', tv[7], 'day', tv[8])
return {results, failure, tv}
