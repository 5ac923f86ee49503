-- register: appends classes to the store-wide class list, in the order
-- given, skipping those already there, and returns the whole list. Classes
-- are never removed or reordered: a class's index is what rows and seen
-- records hold.
--
-- KEYS[1]  the meta hash
-- ARGV[1]  the schema version this build writes
-- ARGV[2…] class names
local schema = redis.call('HGET', KEYS[1], 'schema')
if schema and schema ~= ARGV[1] then
  return redis.error_reply('SCHEMA spamd store of schema ' .. schema .. ', this build reads ' .. ARGV[1])
end
local cur = redis.call('HGET', KEYS[1], 'classes')
local list, have = {}, {}
if cur then
  for c in string.gmatch(cur, '[^,]+') do
    list[#list + 1] = c
    have[c] = true
  end
end
local added = not schema
for i = 2, #ARGV do
  local c = ARGV[i]
  if not have[c] then
    list[#list + 1] = c
    have[c] = true
    added = true
  end
end
local s = table.concat(list, ',')
if added then
  redis.call('HSET', KEYS[1], 'schema', ARGV[1], 'classes', s)
end
return s
