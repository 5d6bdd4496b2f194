-- Set the number of permits available of a leased semaphore, whatever it was, waking as
-- many waiters. Held permits whose leases ran out are dropped: they do not come back.
-- KEYS[1]  permits key (see semaphore_acquire.lua)
-- KEYS[2]  timeouts (see semaphore_acquire.lua)
-- ARGV[1]  the number of permits available from now (at least 1)
-- ARGV[2]  the semaphore's channel
-- Reply    the number available before (0 when the key did not exist); the error
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
local check = redis.acl_check_cmd
if check and (not check('set', KEYS[1], '1') or not check('zremrangebyscore', KEYS[2], '-inf', '1')
    or not check('publish', ARGV[2], '1')) then
    return redis.error_reply('NOPERM this user may not write the semaphore keys')
end
local before = tonumber(redis.call('get', KEYS[1])) or 0
local now = redis.call('time')
now = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
if zkind == 'zset' then
    redis.call('zremrangebyscore', KEYS[2], '-inf', now)
end
redis.call('set', KEYS[1], ARGV[1])
redis.call('publish', ARGV[2], ARGV[1])
return before
