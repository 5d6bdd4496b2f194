-- Count a count-down latch down by one (Redisson's RCountDownLatch.countDown): the key
-- goes when the count reaches zero or below, and reaching exactly zero publishes
-- Redisson's "0", which opens the latch for its waiters.
-- KEYS[1]  latch key (see latch_set.lua)
-- KEYS[2]  latch of this call (see latch_set.lua): a retry after a lost reply counts
--          nothing down a second time
-- ARGV[1]  the latch's channel (see latch_set.lua)
-- ARGV[2]  how long the call's latch lasts, in milliseconds
-- Reply    the count left (0 when the latch is open, and when it had no count: nothing
--          is written then); what an earlier attempt of this call replied, when the
--          call's latch shows it ran; the error "WRONGKIND <type>" as latch_set.lua; an
--          error, with nothing written, when the user may not write the key, the call's
--          latch, or publish.
local done = redis.call('get', KEYS[2])
if done then
    return tonumber(done)
end
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
local check = redis.acl_check_cmd
if check and (not check('decr', KEYS[1]) or not check('del', KEYS[1])
        or not check('publish', ARGV[1], '0')
        or not check('set', KEYS[2], '0', 'px', ARGV[2])) then
    return redis.error_reply('NOPERM this user may not count the latch down or publish')
end
local left = redis.call('decr', KEYS[1])
if left <= 0 then
    redis.call('del', KEYS[1])
end
if left == 0 then
    redis.call('publish', ARGV[1], '0')
end
if left < 0 then
    left = 0
end
redis.call('set', KEYS[2], left, 'px', ARGV[2])
return left
