-- dump: the totals of a user and the whole content of some of its
-- buckets, read in one atomic step, for warming a node's cache and for
-- check.
--
-- KEYS[1]  the user's totals hash
-- ARGV[1]  the user's key base, P{user:}
-- ARGV[2…] bucket numbers, in hex
--
-- Returns {totals, buckets}: buckets[i] the fields and values of bucket
-- ARGV[i+1], flat.
local tv = redis.call('HMGET', KEYS[1], 'ver', 'lvl', 'spl', 'rows', 'voc', 'msg', 'tok', 'day', 'fgt')
local out = {}
for i = 2, #ARGV do
  out[i - 1] = redis.call('HGETALL', ARGV[1] .. 'b:' .. ARGV[i])
end
return {tv, out}
