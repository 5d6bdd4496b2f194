-- Delete a count-down latch (Redisson's RCountDownLatch.delete), announcing it with
-- Redisson's "1". A deleted latch has no count: it is open.
-- KEYS[1]  latch key (see latch_set.lua)
-- KEYS[2]  latch of this call (see latch_set.lua)
-- ARGV[1]  the latch's channel (see latch_set.lua)
-- ARGV[2]  how long the call's latch lasts, in milliseconds
-- Reply    1 when the key was deleted, 0 when there was none; what an earlier attempt of
--          this call replied, when the call's latch shows it ran; the error
--          "WRONGKIND <type>" as latch_set.lua (nothing deleted); an error, with nothing
--          written, when the user may not delete the key, write the call's latch, or
--          publish.
local done = redis.call('get', KEYS[2])
if done then
    return tonumber(done)
end
local kind = redis.call('type', KEYS[1]).ok
if kind ~= 'none' and kind ~= 'string' then
    return redis.error_reply('WRONGKIND ' .. kind)
end
if kind == 'string' and not string.match(redis.call('get', KEYS[1]), '^%-?%d+$') then
    return redis.error_reply('WRONGKIND text')
end
local check = redis.acl_check_cmd
if check and (not check('del', KEYS[1]) or not check('publish', ARGV[1], '1')
        or not check('set', KEYS[2], '1', 'px', ARGV[2])) then
    return redis.error_reply('NOPERM this user may not delete the latch or publish')
end
local deleted = 0
if kind == 'string' then
    redis.call('del', KEYS[1])
    redis.call('publish', ARGV[1], '1')
    deleted = 1
end
redis.call('set', KEYS[2], deleted, 'px', ARGV[2])
return deleted
