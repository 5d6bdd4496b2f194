-- Give back one hold of a fair lock; the last one hands the lock to the head of the queue
-- when that waiter takes grants, and otherwise wakes it alone.
-- KEYS[1]  lock key
-- KEYS[2]  unlock latch of this release call, "redisson_unlock_latch:{<key>}:<request id>"
-- KEYS[3]  queue of the waiting owner fields (see fair_acquire.lua)
-- KEYS[4]  places of the waiting owner fields (see fair_acquire.lua)
-- KEYS[5]  our waiters (see fair_acquire.lua)
-- The latch is written, so it is a key: Cluster routes by it and checks it in a migration.
-- ARGV[1]  message published to the head of the queue when the last hold goes ("0"); empty:
--             none, for giving back what a failed attempt took
-- ARGV[2]  lease in milliseconds for the holds that remain
-- ARGV[3]  owner field "<client-uuid>:<thread-id>"
-- ARGV[4]  holds the owner has before this release (at least 1)
-- ARGV[5]  how long the latch lasts, in milliseconds: longer than the call's retries
-- ARGV[6]  the longest grant lease in milliseconds (the releasing client's watchdog lease);
--             "0": grant nothing (direct hand-off off: Redisson's protocol exactly)
-- ARGV[7]  the lock's channel: a waiter's channel is this, ":", its owner field
-- Reply    as release.lua: nil when not the owner's (nothing changed); 0 when holds remain;
--          1 when the key was freed, by this call or (the latch says) an earlier attempt of
--          it; an error, with the lock left as it was, when the user may not publish to the
--          head of the queue, rename the key to the latch, or set an expiry.
-- The head is the first waiter whose place has not run out (see fair_acquire.lua); those
-- before it are dropped.
-- Direct hand-off. When the last hold goes, ARGV[1] is not empty, ARGV[6] is not "0", and
-- the head is a waiter that takes grants — its owner field is "<client id>:<thread>" with a
-- version-8 UUID as client id (Redisson's are version 4; so are ours with the hand-off
-- off) and it is in KEYS[5] (queued by fair_acquire.lua) — the head leaves the queue and
-- becomes the holder here: its field is set to 1 and the key expires when its place would
-- have run out (its time in KEYS[5]), or ARGV[6] from now if that is sooner. The message
-- "granted:<that expiry, ms>:<its time in KEYS[5]>" on its channel tells it (the time,
-- which its last attempt set and was told, shows the waiter that no attempt of its came
-- after). The waiter counts its validity from that attempt's sending and for no longer
-- than the expiry named: the expiry is its time less this server's time now, and a clock
-- stepped forward since the attempt shortens it. Its client renews before a third of the
-- grant has passed, which confirms the grant with its own lease. A crashed or departed head thus holds the lock no longer
-- than it would have kept its place at the head of the queue (which stopped everyone just
-- as long before), nor longer than a watchdog lease. A waiter that gave up passes the grant
-- on (fair_give_up.lua); one that missed the message finds the hold by its next attempt,
-- which sets the count to 1 (fair_acquire.lua sets, never adds). A Redisson waiter, or
-- ours with the hand-off off, is woken with ARGV[1] and takes the lock itself.
local held, present = pcall(redis.call, 'hexists', KEYS[1], ARGV[3])
if not held or present == 0 then
    if redis.call('exists', KEYS[2]) == 1 then
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
local gone = 0
local head = nil
-- The head's time in KEYS[5], when it has one.
local ours = nil
while true do
    local waiter = redis.call('lindex', KEYS[3], gone)
    if not waiter then
        break
    end
    local in_ours = tonumber(redis.call('zscore', KEYS[5], waiter))
    local until_ = in_ours or tonumber(redis.call('zscore', KEYS[4], waiter))
    if until_ and until_ > now then
        head, ours = waiter, in_ours
        break
    end
    gone = gone + 1
end
local channel = head and ARGV[1] ~= '' and (ARGV[7] .. ':' .. head)
local message = ARGV[1]
local grant = nil
if channel and ours and ARGV[6] ~= '0' and head ~= ARGV[3] and #head > 37
    and string.sub(head, 9, 9) == '-' and string.sub(head, 15, 15) == '8'
    and string.sub(head, 37, 37) == ':' then
    grant = math.min(ours - now, tonumber(ARGV[6]))
    message = 'granted:' .. string.format('%.0f', grant) .. ':' .. string.format('%.0f', ours)
end
if check then
    if not check('pexpire', KEYS[2], ARGV[5]) then
        return redis.error_reply('NOPERM this user may not run PEXPIRE on the unlock latch')
    end
    if gone > 0 and (not check('lpop', KEYS[3]) or not check('zrem', KEYS[4], 'x')
        or not check('zrem', KEYS[5], 'x')) then
        return redis.error_reply('NOPERM this user may not write the fair lock queue')
    end
    if channel and not check('publish', channel, message) then
        return redis.error_reply('NOPERM this user may not PUBLISH to the next waiter')
    end
    if grant and (not check('lpop', KEYS[3]) or not check('zrem', KEYS[4], 'x')
        or not check('zrem', KEYS[5], 'x') or not check('hset', KEYS[1], head, '1')
        or not check('pexpire', KEYS[1], grant)) then
        return redis.error_reply('NOPERM this user may not hand the lock to the next waiter')
    end
end
local renamed, refused = pcall(redis.call, 'rename', KEYS[1], KEYS[2])
if not renamed then
    return redis.error_reply('NOPERM ' .. tostring(refused.err or refused))
end
redis.call('pexpire', KEYS[2], ARGV[5])
for i = 1, gone do
    local waiter = redis.call('lpop', KEYS[3])
    redis.call('zrem', KEYS[4], waiter)
    redis.call('zrem', KEYS[5], waiter)
end
if grant then
    redis.call('lpop', KEYS[3])
    redis.call('zrem', KEYS[4], head)
    redis.call('zrem', KEYS[5], head)
    redis.call('hset', KEYS[1], head, 1)
    redis.call('pexpire', KEYS[1], grant)
end
if channel then
    redis.call('publish', channel, message)
end
return 1
