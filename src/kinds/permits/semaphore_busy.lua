-- Where a leased semaphore's permits stand, for a waiter that explains its wait. Writes
-- nothing.
-- KEYS[1]  permits key (see semaphore_acquire.lua)
-- KEYS[2]  timeouts (see semaphore_acquire.lua)
-- Reply    {type of the permits key, permits available (-1 when the key holds no number),
--          permits held, milliseconds until the first held lease ends (-1 when none is
--          held)}.
local kind = redis.call('type', KEYS[1]).ok
local available = 0
if kind == 'string' then
    available = tonumber(redis.call('get', KEYS[1])) or -1
elseif kind ~= 'none' then
    available = -1
end
if redis.call('type', KEYS[2]).ok ~= 'zset' then
    return {kind, available, 0, -1}
end
local now = redis.call('time')
now = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
local first = redis.call('zrange', KEYS[2], 0, 0, 'withscores')
local ends = -1
if first[2] then
    ends = math.max(0, tonumber(first[2]) - now)
end
return {kind, available, redis.call('zcard', KEYS[2]), ends}
