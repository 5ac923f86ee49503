-- upgrade: marks a store of an old schema as of the new one, whose
-- readers take what the old one wrote as it is, and records the day it
-- did, once: what the old schema kept no day of reads as trained on it.
-- Returns the schema the store is of and the day it was upgraded ('' if
-- it never was).
--
-- KEYS[1]  the meta hash
-- ARGV[1]  the new schema
-- ARGV[2]  today
-- ARGV[3…] the old schemas it converts
local schema = redis.call('HGET', KEYS[1], 'schema')
for i = 3, #ARGV do
  if schema == ARGV[i] then
    redis.call('HSETNX', KEYS[1], 'upgraded', ARGV[2])
    redis.call('HSET', KEYS[1], 'schema', ARGV[1])
    schema = ARGV[1]
    break
  end
end
return {schema or '', redis.call('HGET', KEYS[1], 'upgraded') or ''}
