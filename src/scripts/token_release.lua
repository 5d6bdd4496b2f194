-- Release a token lock: delete the key only if it still holds our token, and wake a waiter.
-- KEYS[1]  lock key: a string holding the owner's token
-- KEYS[2]  unlock channel (see layout.rs)
-- KEYS[3]  unlock latch of this release call, "redisson_unlock_latch:{<key>}:<request id>"
-- ARGV[1]  the owner's token
-- ARGV[2]  message published on release ("0")
-- ARGV[3]  how long the latch lasts, in milliseconds: longer than the call's retries
-- Reply    1 when the key was deleted, now or by an earlier attempt of this call (the latch
--          says so); 0 when it holds something else or nothing (not ours; nothing changed);
--          an error, with nothing written, when the user may not publish on the channel or
--          write the latch.
if redis.call('exists', KEYS[3]) == 1 then
    return 1
end
local readable, value = pcall(redis.call, 'get', KEYS[1])
if not readable or value ~= ARGV[1] then
    return 0
end
local check = redis.acl_check_cmd
if check and not check('publish', KEYS[2], ARGV[2]) then
    return redis.error_reply('NOPERM this user may not PUBLISH on the unlock channel')
end
if check and not check('set', KEYS[3], '1', 'px', ARGV[3]) then
    return redis.error_reply('NOPERM this user may not SET the unlock latch key')
end
redis.call('del', KEYS[1])
redis.call('publish', KEYS[2], ARGV[2])
redis.call('set', KEYS[3], '1', 'px', ARGV[3])
return 1
