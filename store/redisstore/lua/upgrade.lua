-- upgrade: marks a store of an old schema as of the new one, when the
-- change asks nothing more, and returns the schema the store is of.
--
-- KEYS[1]  the meta hash
-- ARGV[1]  the old schema
-- ARGV[2]  the new schema
local schema = redis.call('HGET', KEYS[1], 'schema')
if schema == ARGV[1] then
  redis.call('HSET', KEYS[1], 'schema', ARGV[2])
  return ARGV[2]
end
return schema or ''
