-- A waiter of a fair lock leaves the queue (its deadline passed, it was cancelled, or it
-- failed); if that leaves the lock free, the turn passes to the waiter now at the head: it
-- is granted the lock if it takes grants, else told its turn has come. The places of the
-- waiters behind stay as they are (see fair_acquire.lua).
-- KEYS[1]  lock key
-- KEYS[2]  queue of the waiting owner fields (see fair_acquire.lua)
-- KEYS[3]  places of the waiting owner fields (see fair_acquire.lua)
-- KEYS[4]  our waiters (see fair_acquire.lua)
-- ARGV[1]  the leaving owner field
-- ARGV[2]  message published to the new head ("0")
-- ARGV[3]  holds the leaving owner believes it has (0 unless its earlier holds vanished)
-- ARGV[4]  the longest grant lease in milliseconds, as in fair_release.lua; "0": grant
--             nothing
-- ARGV[5]  the lock's channel: a waiter's channel is this, ":", its owner field
-- Reply    1 when the owner was queued or held a hold it did not know of (both are undone),
--          else 0; an error, with nothing written, when the user may not write the queue,
--          the lock key or publish to the head.
-- A hold the leaving owner does not know of (it believes it has none, and its field is
-- there) was granted to it by a release (fair_release.lua) whose message came too late or
-- not at all, or taken by an attempt whose reply was lost: it is given back here, and the
-- turn passes on, so that a waiter that gave up never keeps the lock. The new head is the
-- first other waiter whose place has not run out; it is granted the lock exactly as
-- fair_release.lua grants it (the two must agree), and left in the queue otherwise.
local check = redis.acl_check_cmd
if check and (not check('zrem', KEYS[3], ARGV[1]) or not check('zrem', KEYS[4], ARGV[1])) then
    return redis.error_reply('NOPERM this user may not write the fair lock queue')
end
local exists = redis.call('exists', KEYS[1]) == 1
local unknown = false
if exists and tonumber(ARGV[3]) == 0 then
    local readable, count = pcall(redis.call, 'hget', KEYS[1], ARGV[1])
    unknown = readable and count ~= false and redis.call('hexists', KEYS[1], 'mode') == 0
end
local free = not exists or (unknown and redis.call('hlen', KEYS[1]) == 1)
local head = nil
-- The head's time in KEYS[4], when it has one, and the time the head was judged by.
local ours = nil
local now = nil
if free then
    now = redis.call('time')
    now = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
    -- Queued: in the places beside the queue, which every client writes with it.
    if unknown or redis.call('zscore', KEYS[3], ARGV[1]) then
        local at = 0
        while true do
            local waiter = redis.call('lindex', KEYS[2], at)
            if not waiter then
                break
            elseif waiter ~= ARGV[1] then
                local in_ours = tonumber(redis.call('zscore', KEYS[4], waiter))
                local until_ = in_ours or tonumber(redis.call('zscore', KEYS[3], waiter))
                if until_ and until_ > now then
                    head, ours = waiter, in_ours
                    break
                end
            end
            at = at + 1
        end
    end
end
local channel = head and (ARGV[5] .. ':' .. head)
local message = ARGV[2]
local grant = nil
if channel and ours and ARGV[4] ~= '0' and #head > 37 and string.sub(head, 9, 9) == '-'
    and string.sub(head, 15, 15) == '8' and string.sub(head, 37, 37) == ':' then
    grant = math.min(ours - now, tonumber(ARGV[4]))
    message = 'granted:' .. string.format('%.0f', grant) .. ':' .. string.format('%.0f', ours)
end
if check then
    if unknown and not check('hdel', KEYS[1], ARGV[1]) then
        return redis.error_reply('NOPERM this user may not give back the lock')
    end
    if grant and (not check('lrem', KEYS[2], '1', head) or not check('hset', KEYS[1], head, '1')
        or not check('pexpire', KEYS[1], grant) or not check('publish', channel, message)) then
        return redis.error_reply('NOPERM this user may not hand the lock to the next waiter')
    end
end
local removed = redis.call('lrem', KEYS[2], 0, ARGV[1])
redis.call('zrem', KEYS[3], ARGV[1])
redis.call('zrem', KEYS[4], ARGV[1])
if unknown then
    redis.call('hdel', KEYS[1], ARGV[1])
end
if grant then
    redis.call('lrem', KEYS[2], 1, head)
    redis.call('zrem', KEYS[3], head)
    redis.call('zrem', KEYS[4], head)
    redis.call('hset', KEYS[1], head, 1)
    redis.call('pexpire', KEYS[1], grant)
end
if channel then
    pcall(redis.call, 'publish', channel, message)
end
if removed > 0 or unknown then
    return 1
end
return 0
