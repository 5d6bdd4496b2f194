-- How many permits of a leased semaphore are available, counting the held ones whose
-- leases have run out (they come back at the next acquisition). Writes nothing.
-- KEYS[1]  permits key (see semaphore_acquire.lua)
-- KEYS[2]  timeouts (see semaphore_acquire.lua)
-- Reply    the number; the error "WRONGKIND <type>" when a key holds something else.
local kind = redis.call('type', KEYS[1]).ok
local count = 0
if kind ~= 'none' then
    count = kind == 'string' and tonumber(redis.call('get', KEYS[1]))
    if not count then
        return redis.error_reply('WRONGKIND ' .. kind)
    end
end
local zkind = redis.call('type', KEYS[2]).ok
if zkind ~= 'none' and zkind ~= 'zset' then
    return redis.error_reply('WRONGKIND ' .. zkind)
end
local now = redis.call('time')
now = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
return count + redis.call('zcount', KEYS[2], '-inf', now)
