-- Give back one hold of a fair lock; the last one wakes the head of the queue only.
-- KEYS[1]  lock key
-- KEYS[2]  the lock's channel: a waiter's channel is this, ":", its owner field
-- KEYS[3]  unlock latch of this release call, "redisson_unlock_latch:{<key>}:<request id>"
-- KEYS[4]  queue of the waiting owner fields (see fair_acquire.lua)
-- KEYS[5]  places of the waiting owner fields (see fair_acquire.lua)
-- KEYS[6]  our waiters (see fair_acquire.lua)
-- ARGV[1]  message published to the head of the queue when the last hold goes ("0"); empty:
--             none, for giving back what a failed attempt took
-- ARGV[2]  lease in milliseconds for the holds that remain
-- ARGV[3]  owner field "<client-uuid>:<thread-id>"
-- ARGV[4]  holds the owner has before this release (at least 1)
-- ARGV[5]  how long the latch lasts, in milliseconds: longer than the call's retries
-- Reply    as release.lua: nil when not the owner's (nothing changed); 0 when holds remain;
--          1 when the key was freed, by this call or (the latch says) an earlier attempt of
--          it; an error, with the lock left as it was, when the user may not publish to the
--          head of the queue, rename the key to the latch, or set an expiry.
-- The head is the first waiter whose place has not run out (see fair_acquire.lua); those
-- before it are dropped.
local held, present = pcall(redis.call, 'hexists', KEYS[1], ARGV[3])
if not held or present == 0 then
    if redis.call('exists', KEYS[3]) == 1 then
        return 1
    end
    return nil
end
local left = tonumber(ARGV[4]) - 1
local check = redis.acl_check_cmd
if left > 0 then
    if check and not check('pexpire', KEYS[1], ARGV[2]) then
        return redis.error_reply('NOPERM this user may not run PEXPIRE on the lock key')
    end
    redis.call('hset', KEYS[1], ARGV[3], left)
    redis.call('pexpire', KEYS[1], ARGV[2])
    return 0
end
local now = redis.call('time')
now = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
local queue = redis.call('lrange', KEYS[4], 0, -1)
local gone = 0
local head = nil
for _, waiter in ipairs(queue) do
    local until_ = tonumber(redis.call('zscore', KEYS[6], waiter))
    if not until_ then
        until_ = tonumber(redis.call('zscore', KEYS[5], waiter))
    end
    if until_ and until_ > now then
        head = waiter
        break
    end
    gone = gone + 1
end
local channel = head and ARGV[1] ~= '' and (KEYS[2] .. ':' .. head)
if check then
    if not check('pexpire', KEYS[3], ARGV[5]) then
        return redis.error_reply('NOPERM this user may not run PEXPIRE on the unlock latch')
    end
    if gone > 0 and (not check('lpop', KEYS[4]) or not check('zrem', KEYS[5], 'x')
        or not check('zrem', KEYS[6], 'x')) then
        return redis.error_reply('NOPERM this user may not write the fair lock queue')
    end
    if channel and not check('publish', channel, ARGV[1]) then
        return redis.error_reply('NOPERM this user may not PUBLISH to the next waiter')
    end
end
local renamed, refused = pcall(redis.call, 'rename', KEYS[1], KEYS[3])
if not renamed then
    return redis.error_reply('NOPERM ' .. tostring(refused.err or refused))
end
redis.call('pexpire', KEYS[3], ARGV[5])
for i = 1, gone do
    local waiter = redis.call('lpop', KEYS[4])
    redis.call('zrem', KEYS[5], waiter)
    redis.call('zrem', KEYS[6], waiter)
end
if channel then
    redis.call('publish', channel, ARGV[1])
end
return 1
