-- Read, drain or delete the permits of a semaphore without leases.
-- KEYS[1]  permits key (see csem_acquire.lua)
-- KEYS[2]  for "drain" and "delete" only: the latch of this call,
--             "redisson_unlock_latch:{<key>}:<request id>", holding its reply, so that a
--             retry after a lost reply answers what the first try did
-- ARGV[1]  "get": the number available, writing nothing (0 when never set);
--          "drain": takes every permit available and replies how many (0, with nothing
--             written but the latch, when none is; a number below zero is left as it is),
--             as Redisson's drainPermits, which publishes nothing;
--          "delete": deletes the key; replies 1 when there was one, else 0
-- ARGV[2]  for "drain" and "delete": how long the latch lasts, in milliseconds
-- Reply    as ARGV[1] says (for a retry, what the first try replied); the error
--          "WRONGKIND <type>" when the key holds no integer, nothing written; an error,
--          with nothing written, when the user may not write the key or the latch.
if KEYS[2] then
    local earlier = redis.call('get', KEYS[2])
    if earlier then
        return tonumber(earlier)
    end
end
local kind = redis.call('type', KEYS[1]).ok
local value = 0
if kind == 'string' then
    local text = redis.call('get', KEYS[1])
    if #text > 20 or not string.match(text, '^%-?%d+$') then
        return redis.error_reply('WRONGKIND token')
    end
    value = tonumber(text)
elseif kind ~= 'none' then
    return redis.error_reply('WRONGKIND ' .. kind)
end
if ARGV[1] == 'get' then
    return value
end
local check = redis.acl_check_cmd
if check and (not check('set', KEYS[1], '0') or not check('del', KEYS[1])
    or not check('set', KEYS[2], '0', 'px', ARGV[2])) then
    return redis.error_reply('NOPERM this user may not write the semaphore key')
end
local reply = 0
if ARGV[1] == 'delete' then
    reply = redis.call('del', KEYS[1])
elseif value > 0 then
    redis.call('set', KEYS[1], '0')
    reply = value
end
redis.call('set', KEYS[2], reply, 'px', ARGV[2])
return reply
