-- Delete a lock whoever holds it, and wake its waiters; only a key whose whole shape is the
-- lock's kind (see shape.lua, which comes before this text), never other data under the
-- same name.
-- KEYS[1]  lock key
-- KEYS[2]  unlock latch of this call, "redisson_unlock_latch:{<key>}:<request id>"
-- The latch is written, so it is a key: Cluster routes by it and checks it in a migration.
-- ARGV[1]  message published when a key was deleted: "0" (wakes one waiter), or "1" on a
--          read-write lock's channel (wakes them all); empty: none (a spin lock's)
-- ARGV[2]  how long the latch lasts, in milliseconds: longer than the call's retries
-- ARGV[3]  what the key must hold: "hash" (a reentrant, fenced or fair lock), "read" or
--          "write" (a read-write lock in that mode, as Redisson's read and write
--          forceUnlock), or "string" (a SET-NX lock's token)
-- ARGV[4]  the channel its waiters listen on: the lock's, or a read-write lock's
-- ARGV[5]  the holder the caller names, or "": with one, the key is deleted only while it
--          holds exactly that token (a string) or that owner's field (a hash: an owner
--          field, or a writer's), and then even without an expiry; without one, only a key
--          with an expiry is deleted
-- ARGV[6]  how many of a hash's fields to judge it by at most
-- Reply    1 when the key was deleted; 0 when there was none, a read-write lock in the
--          other mode, or a lock not held by the holder named (left as it was); when the
--          latch shows that an earlier attempt of this call ran, what that attempt
--          replied, and nothing else is done: a retry never deletes a lock taken since;
--          the error "WRONGKIND <kind>" ("rwlock", "election", "hash", "token",
--          "semaphore") when the key is a lock of another kind, or of another Redis type;
--          the error "NOTALOCK <why>" when the key has no lock's shape, or has one without
--          an expiry and no holder was named; nothing written either way;
--          an error, with nothing written, when the user may not publish on the channel or
--          write the latch.
local done = redis.call('get', KEYS[2])
if done then
    return tonumber(done)
end
local check = redis.acl_check_cmd
local message = ARGV[1] ~= '' and ARGV[1]
if message and check and not check('publish', ARGV[4], message) then
    return redis.error_reply('NOPERM this user may not PUBLISH on the unlock channel')
end
if check and not check('set', KEYS[2], '1', 'px', ARGV[2]) then
    return redis.error_reply('NOPERM this user may not SET the unlock latch key')
end
local kind, shaped, why = judge(KEYS[1], nil, tonumber(ARGV[6]))
if kind == 'none' then
    redis.call('set', KEYS[2], 0, 'px', ARGV[2])
    return 0
end
local wanted = ARGV[3]
local wanted_kind = ({hash = 'hash', read = 'rwlock', write = 'rwlock', string = 'token'})[wanted]
if shaped == '' then
    if kind ~= 'hash' and kind ~= 'string' then
        return redis.error_reply('WRONGKIND ' .. kind)
    end
    return redis.error_reply('NOTALOCK ' .. why)
end
if shaped ~= wanted_kind then
    return redis.error_reply('WRONGKIND ' .. shaped)
end
local holder = ARGV[5]
local held
if holder == '' then
    if redis.call('pttl', KEYS[1]) < 0 then
        return redis.error_reply('NOTALOCK ' .. why .. ': name its holder to remove it')
    end
    held = true
elseif kind == 'string' then
    held = redis.call('get', KEYS[1]) == holder
else
    held = is_holder(holder) and (redis.call('hexists', KEYS[1], holder) == 1
        or redis.call('hexists', KEYS[1], holder .. ':write') == 1)
end
if not held or (kind == 'hash' and shaped == 'rwlock'
        and redis.call('hget', KEYS[1], 'mode') ~= wanted) then
    redis.call('set', KEYS[2], 0, 'px', ARGV[2])
    return 0
end
redis.call('del', KEYS[1])
if message then
    redis.call('publish', ARGV[4], message)
end
redis.call('set', KEYS[2], 1, 'px', ARGV[2])
return 1
