-- Delete a fair lock whoever holds it, and wake the head of its queue on the head's own
-- channel, where it waits (as Redisson's RFairLock forceUnlock does); only a key whose
-- whole shape is a lock's (see shape.lua, which comes before this text).
-- KEYS[1]  lock key
-- KEYS[2]  unlock latch of this call, "redisson_unlock_latch:{<key>}:<request id>"
-- KEYS[3]  queue of the waiting owner fields (see fair_acquire.lua)
-- KEYS[4]  places of the waiting owner fields (see fair_acquire.lua)
-- KEYS[5]  our waiters (see fair_acquire.lua)
-- The latch is written, so it is a key: Cluster routes by it and checks it in a migration.
-- ARGV[1]  message published to the head of the queue when the lock was deleted ("0")
-- ARGV[2]  how long the latch lasts, in milliseconds: longer than the call's retries
-- ARGV[3]  the lock's channel: a waiter's channel is this, ":", its owner field
-- ARGV[4]  the holder the caller names, or "" (see force_unlock.lua)
-- ARGV[5]  how many of a hash's fields to judge it by at most
-- Reply    1 when the lock was deleted, 0 when there was none or the holder named does
--          not hold it (then nothing is done, the queue left as it was); when the latch
--          shows that an earlier attempt of this call ran, what that attempt replied, and
--          nothing else is done: a retry never deletes a lock taken since;
--          the errors "WRONGKIND <kind>" and "NOTALOCK <why>" as force_unlock.lua has
--             them; nothing written;
--          an error, with nothing written, when the user may not write the queue, publish
--          to the head's channel or write the latch.
-- The head is the first waiter whose place has not run out (see fair_acquire.lua); those
-- before it are dropped.
local done = redis.call('get', KEYS[2])
if done then
    return tonumber(done)
end
local kind, shaped, why = judge(KEYS[1], nil, tonumber(ARGV[5]))
if kind ~= 'none' then
    if shaped == '' and kind ~= 'hash' and kind ~= 'string' then
        return redis.error_reply('WRONGKIND ' .. kind)
    elseif shaped == '' then
        return redis.error_reply('NOTALOCK ' .. why)
    elseif shaped ~= 'hash' then
        return redis.error_reply('WRONGKIND ' .. shaped)
    elseif ARGV[4] == '' and redis.call('pttl', KEYS[1]) < 0 then
        return redis.error_reply('NOTALOCK ' .. why .. ': name its holder to remove it')
    elseif ARGV[4] ~= '' and (not is_owner(ARGV[4])
            or redis.call('hexists', KEYS[1], ARGV[4]) == 0) then
        return 0
    end
elseif ARGV[4] ~= '' then
    -- Nobody holds it, so not the holder named: nothing is done.
    return 0
end
local now = redis.call('time')
now = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
-- A list of anything but owner fields is no fair queue: left alone.
local queue = {}
if is_queue(KEYS[3], tonumber(ARGV[5])) then
    queue = redis.call('lrange', KEYS[3], 0, -1)
end
local gone = 0
local head = nil
for _, waiter in ipairs(queue) do
    if not is_owner(waiter) then
        break
    end
    local until_ = tonumber(redis.call('zscore', KEYS[5], waiter))
    if not until_ then
        until_ = tonumber(redis.call('zscore', KEYS[4], waiter))
    end
    if until_ and until_ > now then
        head = waiter
        break
    end
    gone = gone + 1
end
local exists = redis.call('exists', KEYS[1]) == 1
local channel = exists and head and (ARGV[3] .. ':' .. head)
local check = redis.acl_check_cmd
if check then
    if not check('set', KEYS[2], '1', 'px', ARGV[2]) then
        return redis.error_reply('NOPERM this user may not SET the unlock latch key')
    end
    if gone > 0 and (not check('lpop', KEYS[3]) or not check('zrem', KEYS[4], 'x')
        or not check('zrem', KEYS[5], 'x')) then
        return redis.error_reply('NOPERM this user may not write the fair lock queue')
    end
    if channel and not check('publish', channel, ARGV[1]) then
        return redis.error_reply('NOPERM this user may not PUBLISH to the next waiter')
    end
end
for i = 1, gone do
    local waiter = redis.call('lpop', KEYS[3])
    redis.call('zrem', KEYS[4], waiter)
    redis.call('zrem', KEYS[5], waiter)
end
local deleted = redis.call('del', KEYS[1])
if channel then
    redis.call('publish', channel, ARGV[1])
end
redis.call('set', KEYS[2], deleted, 'px', ARGV[2])
return deleted
