-- Read a count-down latch's count (Redisson's RCountDownLatch.getCount). Writes nothing.
-- KEYS[1]  latch key (see latch_set.lua)
-- Reply    the count: 0 when the key is absent (the latch is open), and for a count of
--          zero or below that a writer other than a count-down left; the error
--          "WRONGKIND <type>" as latch_set.lua.
local kind = redis.call('type', KEYS[1]).ok
if kind == 'none' then
    return 0
end
if kind ~= 'string' then
    return redis.error_reply('WRONGKIND ' .. kind)
end
local count = redis.call('get', KEYS[1])
if not string.match(count, '^%-?%d+$') or #count > 19 then
    return redis.error_reply('WRONGKIND text')
end
local n = tonumber(count)
if n < 0 then
    return 0
end
return count
