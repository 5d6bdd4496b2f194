-- Delete a lock whoever holds it, and wake its waiters.
-- KEYS[1]  lock key
-- KEYS[2]  unlock channel "redisson_lock__channel:{<lock key>}"
-- ARGV[1]  message published when a key was deleted ("0")
-- Reply    1 when a key was deleted, 0 when there was none.
if redis.call('del', KEYS[1]) == 1 then
    redis.call('publish', KEYS[2], ARGV[1])
    return 1
end
return 0
