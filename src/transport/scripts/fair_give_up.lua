-- A waiter of a fair lock leaves the queue (its deadline passed, or it failed); if the
-- lock is free, the waiter now at the head is told its turn has come. The places of the
-- waiters behind it stay as they are (see fair_acquire.lua).
-- KEYS[1]  lock key
-- KEYS[2]  the lock's channel: a waiter's channel is this, ":", its owner field
-- KEYS[3]  queue of the waiting owner fields (see fair_acquire.lua)
-- KEYS[4]  places of the waiting owner fields (see fair_acquire.lua)
-- KEYS[5]  our waiters (see fair_acquire.lua)
-- ARGV[1]  the leaving owner field
-- ARGV[2]  message published to the new head ("0")
-- Reply    1 when the owner was queued, else 0; an error, with nothing written, when the
--          user may not write the queue.
local check = redis.acl_check_cmd
if check and (not check('zrem', KEYS[4], ARGV[1]) or not check('zrem', KEYS[5], ARGV[1])) then
    return redis.error_reply('NOPERM this user may not write the fair lock queue')
end
local removed = redis.call('lrem', KEYS[3], 0, ARGV[1])
redis.call('zrem', KEYS[4], ARGV[1])
redis.call('zrem', KEYS[5], ARGV[1])
if removed > 0 and redis.call('exists', KEYS[1]) == 0 then
    local head = redis.call('lindex', KEYS[3], 0)
    if head then
        pcall(redis.call, 'publish', KEYS[2] .. ':' .. head, ARGV[2])
    end
end
return math.min(removed, 1)
