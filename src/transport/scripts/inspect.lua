-- Read what a lock of any kind is made of, writing nothing, and judge whether it is one
-- (see shape.lua, which comes before this text): a bounded part of every key only.
-- KEYS[1]  lock key
-- KEYS[2]  the fair lock's queue, "redisson_lock_queue:{<key>}"
-- KEYS[3]  the fair lock's timeouts, "redisson_lock_timeout:{<key>}"
-- KEYS[4]  the fencing counter, "redisson_lock_token:{<key>}"
-- KEYS[5]  the semaphore's held permits, "{<key>}:timeout"
-- ARGV[1]  the lock channel, "redisson_lock__channel:{<key>}"
-- ARGV[2]  the read-write lock's channel, "redisson_rwlock:{<key>}"
-- ARGV[3]  the semaphore's channel, "redisson_sc:{<key>}"
-- ARGV[4]  the count-down latch's channel, "redisson_countdownlatch__channel__{<key>}"
-- ARGV[5]  how many fields, queued owners or permits to read at most
-- Reply    {type, pttl, fields, queue, fence, permits, subscribers, value, now, kind,
--          doubt, size}:
--            type         the lock key's Redis type, "none" when there is no key;
--            pttl         its time to live in milliseconds (-1: none, -2: no key);
--            fields       a hash's fields and values, flat, ARGV[5] of them at most;
--                         empty for other types;
--            queue        the fair queue's first ARGV[5] owner fields in order (none when
--                         the list holds anything but owner fields), each
--                         followed by when its place lapses (milliseconds since the epoch,
--                         or -1), flat;
--            fence        the fencing counter, or -1 when there is none;
--            permits      the first ARGV[5] held permits' ids and when their leases end,
--                         flat;
--            subscribers  of the lock's, the read-write lock's, the semaphore's and the
--                         latch's channels, and of each queued owner's own channel
--                         (plain and sharded subscribers);
--            value        a string key's value when 64 bytes long at most, else "";
--            now          the server's clock, in milliseconds since the epoch;
--            kind         what shape.lua judged the key: "hash", "rwlock", "election",
--                         "token", "semaphore", or "" for no lock; and, for a number
--                         that shape.lua leaves to the caller, "counting" (a semaphore
--                         without leases: its channel has subscribers) or "latch" (a
--                         count-down latch: a positive count whose channel has
--                         subscribers);
--            doubt        why it is no lock (kind ""), or why it may be data after all;
--                         "" for a lock beyond doubt;
--            size         a hash's fields or a string's bytes.
-- Counting subscribers needs PUBSUB rights; without them the count is -1.
--
-- A semaphore without leases and a count-down latch are bare numbers, as a counter is; only
-- their waiters, subscribed to the kind's own channel, tell them apart from data. Redisson
-- writes nothing else beside them, and neither sets an expiry. A number nobody waits on is
-- therefore no lock here (a counter, or such a count that nothing waits for).
local limit = tonumber(ARGV[5])
local kind, shaped, doubt, sample, size = judge(KEYS[1], KEYS[5], limit)
local fields, value = {}, ''
if kind == 'hash' then
    fields = sample
elseif kind == 'string' then
    value = sample
end
local queue = {}
local places = redis.call('type', KEYS[3]).ok == 'zset'
if is_queue(KEYS[2], limit) then
    for _, owner in ipairs(redis.call('lrange', KEYS[2], 0, limit - 1)) do
        queue[#queue + 1] = owner
        queue[#queue + 1] = places and tonumber(redis.call('zscore', KEYS[3], owner)) or -1
    end
end
local fence = -1
if redis.call('type', KEYS[4]).ok == 'string' and redis.call('strlen', KEYS[4]) <= 20 then
    fence = tonumber(redis.call('get', KEYS[4])) or -1
end
local permits = {}
if redis.call('type', KEYS[5]).ok == 'zset' then
    permits = redis.call('zrange', KEYS[5], 0, limit - 1, 'withscores')
end
local channels = {ARGV[1], ARGV[2], ARGV[3], ARGV[4]}
for i = 1, #queue, 2 do
    channels[#channels + 1] = ARGV[1] .. ':' .. queue[i]
end
-- Subscribers of each channel, plain and sharded (a cluster's waiters may use either);
-- nil without the rights to count them.
local function numsub(command)
    local counted, counts = pcall(redis.call, 'pubsub', command, unpack(channels))
    if not counted then
        return nil
    end
    local each = {}
    for i = 2, #counts, 2 do
        each[#each + 1] = counts[i]
    end
    return each
end
local plain, sharded = numsub('numsub'), numsub('shardnumsub')
local subscribers, each = -1, {}
if plain then
    subscribers = 0
    for i, n in ipairs(plain) do
        each[i] = n + (sharded and sharded[i] or 0)
        subscribers = subscribers + each[i]
    end
end
if kind == 'string' and shaped == '' and size <= 20 and string.match(value, '^%-?%d+$') then
    local semaphore, latch = each[3] or 0, each[4] or 0
    if subscribers < 0 then
        doubt = 'a number, whose waiters could not be counted: a counter, or the count '
            .. 'of a semaphore or count-down latch'
    elseif semaphore > 0 and latch > 0 then
        shaped = 'counting'
        doubt = 'a number waited on both as a semaphore and as a count-down latch'
    elseif semaphore > 0 then
        shaped, doubt = 'counting', ''
    elseif latch > 0 and tonumber(value) > 0 then
        shaped, doubt = 'latch', ''
    else
        doubt = 'a number nobody waits on: a counter, or the count of a semaphore or '
            .. 'count-down latch that nothing waits for'
    end
end
local time = redis.call('time')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
return {kind, redis.call('pttl', KEYS[1]), fields, queue, fence, permits, subscribers,
    value, now, shaped, doubt, size}
