-- Give a permit of a leased semaphore back, waking one waiter.
-- KEYS[1]  permits key (see semaphore_acquire.lua)
-- KEYS[2]  timeouts (see semaphore_acquire.lua)
-- KEYS[3]  the release latch of this call, "redisson_unlock_latch:{<key>}:<request id>"
-- The latch is written, so it is a key: Cluster routes by it and checks it in a migration.
-- Without KEYS[3] (sent so only while the slot migrates and no earlier send of this call
--             may have run: see scripts.rs, unlatched) nothing records the release for a
--             retry, which is never made.
-- ARGV[1]  the semaphore's channel
-- ARGV[2]  the permit's id (16 bytes)
-- ARGV[3]  how long the latch lasts, in milliseconds: longer than the call's retries
-- Reply    1 when the permit was given back, by this call or (the latch says) an earlier
--          attempt of it; 0 when it was not held: never, released already, or its lease
--          ran out (then it is given back to the others now); an error, with nothing
--          written, when the user may not write the keys or publish.
local ends = redis.call('zscore', KEYS[2], ARGV[2])
if not ends then
    if KEYS[3] and redis.call('exists', KEYS[3]) == 1 then
        return 1
    end
    return 0
end
local check = redis.acl_check_cmd
if check and (not check('incrby', KEYS[1], '1') or not check('publish', ARGV[1], '1')
    or KEYS[3] and not check('set', KEYS[3], '1', 'px', ARGV[3])) then
    return redis.error_reply('NOPERM this user may not write the semaphore keys')
end
local now = redis.call('time')
now = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
redis.call('zrem', KEYS[2], ARGV[2])
local total = redis.call('incrby', KEYS[1], 1)
redis.call('publish', ARGV[1], total)
if tonumber(ends) <= now then
    return 0
end
if KEYS[3] then
    redis.call('set', KEYS[3], '1', 'px', ARGV[3])
end
return 1
