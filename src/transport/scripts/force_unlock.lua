-- Delete a lock whoever holds it, and wake its waiters.
-- KEYS[1]  lock key
-- KEYS[2]  the channel its waiters listen on: the lock's, or a read-write lock's
-- KEYS[3]  unlock latch of this call, "redisson_unlock_latch:{<key>}:<request id>"
-- ARGV[1]  message published when a key was deleted: "0" (wakes one waiter), or "1" on a
--          read-write lock's channel (wakes them all)
-- ARGV[2]  how long the latch lasts, in milliseconds: longer than the call's retries
-- ARGV[3]  "" to delete whatever the key holds; "read" or "write" to delete only a
--          read-write lock held in that mode (Redisson's read and write forceUnlock)
-- Reply    1 when a key was deleted, 0 when there was none (or it was not in ARGV[3]'s
--          mode: the lock left as it was); when the latch shows that an
--          earlier attempt of this call ran, what that attempt replied, and nothing else is
--          done: a retry never deletes a lock taken since;
--          an error, with nothing written, when the user may not publish on the channel or
--          write the latch.
local done = redis.call('get', KEYS[3])
if done then
    return tonumber(done)
end
local check = redis.acl_check_cmd
if check and not check('publish', KEYS[2], ARGV[1]) then
    return redis.error_reply('NOPERM this user may not PUBLISH on the unlock channel')
end
if check and not check('set', KEYS[3], '1', 'px', ARGV[2]) then
    return redis.error_reply('NOPERM this user may not SET the unlock latch key')
end
if ARGV[3] ~= '' then
    local hash, mode = pcall(redis.call, 'hget', KEYS[1], 'mode')
    if not hash or mode ~= ARGV[3] then
        redis.call('set', KEYS[3], 0, 'px', ARGV[2])
        return 0
    end
end
local deleted = redis.call('del', KEYS[1])
if deleted == 1 then
    redis.call('publish', KEYS[2], ARGV[1])
end
redis.call('set', KEYS[3], deleted, 'px', ARGV[2])
return deleted
