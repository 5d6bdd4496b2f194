-- Take permits away from those available of a leased semaphore, not below zero. Held
-- permits whose leases ran out come back first (at most 100 a call), and count as
-- available; held permits are left alone and come back when released.
-- KEYS[1]  permits key (see semaphore_acquire.lua)
-- KEYS[2]  timeouts (see semaphore_acquire.lua)
-- ARGV[1]  how many permits to take away (at least 1)
-- ARGV[2]  the semaphore's channel
-- Reply    {taken, left}: how many were taken away (ARGV[1], or all that were available
--          when fewer) and how many are available after; {0, 0}, with nothing written,
--          when the semaphore has no permits key; the error
--          "WRONGKIND <type>" when a key holds something else; an error, with nothing
--          written, when the user may not write the keys or publish.
local kind = redis.call('type', KEYS[1]).ok
if kind ~= 'none' and (kind ~= 'string' or not tonumber(redis.call('get', KEYS[1]))) then
    return redis.error_reply('WRONGKIND ' .. kind)
end
local zkind = redis.call('type', KEYS[2]).ok
if zkind ~= 'none' and zkind ~= 'zset' then
    return redis.error_reply('WRONGKIND ' .. zkind)
end
if kind == 'none' then
    return {0, 0}
end
local check = redis.acl_check_cmd
if check and (not check('incrby', KEYS[1], '1') or not check('decrby', KEYS[1], '1')
    or not check('zrem', KEYS[2], 'x') or not check('publish', ARGV[2], '1')) then
    return redis.error_reply('NOPERM this user may not write the semaphore keys')
end
local now = redis.call('time')
now = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
local ended = redis.call('zrangebyscore', KEYS[2], '-inf', now, 'limit', 0, 100)
if #ended > 0 then
    redis.call('zrem', KEYS[2], unpack(ended))
    redis.call('incrby', KEYS[1], #ended)
end
local available = tonumber(redis.call('get', KEYS[1]))
local taken = math.min(available, tonumber(ARGV[1]))
if taken > 0 then
    redis.call('decrby', KEYS[1], taken)
end
if #ended > 0 and available > taken then
    redis.call('publish', ARGV[2], available - taken)
end
return {taken, available - taken}
