-- Delete a lock whoever holds it, and wake its waiters; only a key that holds the lock's
-- kind of data, never other data under the same name.
-- KEYS[1]  lock key
-- KEYS[2]  unlock latch of this call, "redisson_unlock_latch:{<key>}:<request id>"
-- The latch is written, so it is a key: Cluster routes by it and checks it in a migration.
-- ARGV[1]  message published when a key was deleted: "0" (wakes one waiter), or "1" on a
--          read-write lock's channel (wakes them all)
-- ARGV[2]  how long the latch lasts, in milliseconds: longer than the call's retries
-- ARGV[3]  what the key must hold: "hash" (a hash without a mode or an epoch: a
--          reentrant, fenced or fair lock), "read" or "write" (a read-write lock's hash in
--          that mode, as Redisson's read and write forceUnlock), or "string" (a SET-NX lock)
-- ARGV[4]  the channel its waiters listen on: the lock's, or a read-write lock's
-- Reply    1 when the key was deleted; 0 when there was none, or a read-write lock in the
--          other mode (left as it was); when the latch shows that an earlier attempt of
--          this call ran, what that attempt replied, and nothing else is done: a retry
--          never deletes a lock taken since;
--          the error "WRONGKIND <type>" ("rwlock" for a read-write lock's hash,
--          "election" for an election's) when the key holds another type; nothing written;
--          an error, with nothing written, when the user may not publish on the channel or
--          write the latch.
local done = redis.call('get', KEYS[2])
if done then
    return tonumber(done)
end
local check = redis.acl_check_cmd
if check and not check('publish', ARGV[4], ARGV[1]) then
    return redis.error_reply('NOPERM this user may not PUBLISH on the unlock channel')
end
if check and not check('set', KEYS[2], '1', 'px', ARGV[2]) then
    return redis.error_reply('NOPERM this user may not SET the unlock latch key')
end
local kind = redis.call('type', KEYS[1]).ok
if kind == 'hash' and redis.call('hexists', KEYS[1], 'mode') == 1 then
    kind = 'rwlock'
elseif kind == 'hash' and redis.call('hexists', KEYS[1], 'epoch') == 1 then
    kind = 'election'
end
local wanted = ARGV[3]
if wanted == 'read' or wanted == 'write' then
    wanted = 'rwlock'
end
if kind ~= 'none' and kind ~= wanted then
    return redis.error_reply('WRONGKIND ' .. kind)
end
if kind == 'rwlock' and redis.call('hget', KEYS[1], 'mode') ~= ARGV[3] then
    redis.call('set', KEYS[2], 0, 'px', ARGV[2])
    return 0
end
local deleted = redis.call('del', KEYS[1])
if deleted == 1 then
    redis.call('publish', ARGV[4], ARGV[1])
end
redis.call('set', KEYS[2], deleted, 'px', ARGV[2])
return deleted
