-- Give back one hold of a reentrant lock (Redisson hash layout).
-- KEYS[1]  lock key
-- KEYS[2]  unlock channel "redisson_lock__channel:{<lock key>}"
-- ARGV[1]  message published when the last hold goes ("0", as Redisson sends)
-- ARGV[2]  lease in milliseconds for the holds that remain
-- ARGV[3]  owner field "<client-uuid>:<thread-id>"
-- Reply    nil when the field is absent (not held by this owner; nothing changed),
--          0 when holds remain (lease refreshed), 1 when the key was deleted.
local count = redis.call('hget', KEYS[1], ARGV[3])
if not count then
    return nil
end
if tonumber(count) > 1 then
    redis.call('hincrby', KEYS[1], ARGV[3], -1)
    redis.call('pexpire', KEYS[1], ARGV[2])
    return 0
end
redis.call('del', KEYS[1])
redis.call('publish', KEYS[2], ARGV[1])
return 1
