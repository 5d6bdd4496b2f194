-- Set a count-down latch's count if it has none (Redisson's RCountDownLatch.trySetCount),
-- announcing it with Redisson's "1" (a new count: its waiters wait on).
-- KEYS[1]  latch key: the count, a decimal string; absent when the latch is open
-- KEYS[2]  latch of this call, "redisson_unlock_latch:{<key>}:<request id>", recording
--          its reply so that a retry after a lost reply answers the same
-- ARGV[1]  the count (1 or more)
-- ARGV[2]  the latch's channel, "redisson_countdownlatch__channel__{<key>}"
-- ARGV[3]  how long the call's latch lasts, in milliseconds
-- Reply    1 when the count was set; 0 when the latch had one already (nothing changed);
--          what an earlier attempt of this call replied, when the call's latch shows it
--          ran; the error "WRONGKIND <type>" when the key holds something other than a
--          count ("text" for a string that is no integer); an error, with nothing
--          written, when the user may not write the key, the call's latch, or publish.
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
if check and (not check('set', KEYS[1], ARGV[1]) or not check('publish', ARGV[2], '1')
        or not check('set', KEYS[2], '1', 'px', ARGV[3])) then
    return redis.error_reply('NOPERM this user may not set the latch or publish on its channel')
end
local set = 0
if kind == 'none' then
    redis.call('set', KEYS[1], ARGV[1])
    redis.call('publish', ARGV[2], '1')
    set = 1
end
redis.call('set', KEYS[2], set, 'px', ARGV[3])
return set
