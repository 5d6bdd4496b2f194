-- Extend the lease of a held permit of a leased semaphore (the watchdog's renewal).
-- KEYS[1]  timeouts (see semaphore_acquire.lua)
-- ARGV[1]  the permit's id (16 bytes)
-- ARGV[2]  the new lease in milliseconds, from now
-- Reply    1 when the permit is held and its lease was extended; 0 when it is gone or its
--          lease ran out (then it is the others' again).
local ends = redis.call('zscore', KEYS[1], ARGV[1])
if not ends then
    return 0
end
local now = redis.call('time')
now = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
if tonumber(ends) <= now then
    return 0
end
redis.call('zadd', KEYS[1], 'xx', now + tonumber(ARGV[2]), ARGV[1])
return 1
