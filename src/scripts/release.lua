-- Give back one hold of a reentrant lock (Redisson hash layout).
-- KEYS[1]  lock key
-- KEYS[2]  unlock channel "redisson_lock__channel:{<lock key>}"
-- ARGV[1]  message published when the last hold goes ("0", as Redisson sends)
-- ARGV[2]  lease in milliseconds for the holds that remain
-- ARGV[3]  owner field "<client-uuid>:<thread-id>"
-- ARGV[4]  holds the owner has before this release (at least 1)
-- Reply    nil when the field is absent (not held by this owner; nothing changed),
--          0 when holds remain (lease refreshed), 1 when the key was deleted.
-- The field is set to ARGV[4] - 1, not decremented, so running this twice (a retry after a
-- lost reply) releases one hold, not two.
if redis.call('hexists', KEYS[1], ARGV[3]) == 0 then
    return nil
end
local left = tonumber(ARGV[4]) - 1
if left > 0 then
    redis.call('hset', KEYS[1], ARGV[3], left)
    redis.call('pexpire', KEYS[1], ARGV[2])
    return 0
end
redis.call('del', KEYS[1])
redis.call('publish', KEYS[2], ARGV[1])
return 1
