-- Give back one read hold of a read-write lock; the last hold of all wakes a waiter.
-- KEYS[1]  lock key: the hash described in read_acquire.lua
-- KEYS[2]  unlock latch of this release call, "redisson_unlock_latch:{<key>}:<request id>"
-- The latch is written, so it is a key: Cluster routes by it and checks it in a migration.
-- As it does not exist before the call, a release waits for a migrating slot to settle,
-- and the lease keys below are read and deleted on a settled slot only; the script cannot
-- name them in advance (they are every reader's).
-- ARGV[1]  message published when the lock is freed ("0": a writer or reader may go);
--             empty: none, for giving back what a failed attempt took
-- ARGV[2]  owner field
-- ARGV[3]  read holds the owner has before this release (at least 1)
-- ARGV[4]  how long the latch lasts, in milliseconds: longer than the call's retries
-- ARGV[5]  the lock's channel, "redisson_rwlock:{<key>}"
-- ARGV[6]  this owner's lease-key prefix, "{<key>}:<owner>:rwlock_timeout" (see
--             read_renew.lua)
-- ARGV[7]  the prefix of every reader's lease keys, "{<key>}" ("<key>" with a tag): the
--             script reads every reader's "<prefix>:<field>:rwlock_timeout:<i>"
-- The lock is freed (renamed to the latch, which then expires, and the message published)
-- when no hold is left, or, as Redisson does, when the lock is read and the lease keys of
-- every read hold left have run out. Otherwise, when read, the hash's expiry is set to the
-- longest read lease left.
-- Reply    nil when the owner holds no read hold, or the key is not a read-write lock's
--             (nothing changed);
--          {0, left} when the owner's own read holds remain: their leases are left as they
--             were, and the longest of them ends within `left` milliseconds (0: all have
--             ended). Only that bounds how long the owner still reads: another reader's
--             release sets the hash's expiry to the longest read lease left;
--          0 when the owner's last read hold went and others' holds remain, by this call
--             or (a marker latch says) an earlier attempt of it;
--          1 when the lock was freed, by this call or (the latch says) an earlier attempt
--             of it;
--          an error, with nothing written, when the user may not write the lock key or the
--             owner's lease key, publish on the channel, rename the key or set the latch's
--             expiry, or may not read a reader's lease key.
local hash, mode = pcall(redis.call, 'hget', KEYS[1], 'mode')
if not hash or not mode or redis.call('hexists', KEYS[1], ARGV[2]) == 0 then
    -- An earlier attempt of this call may have released: the latch is then the freed lock
    -- (a hash), or a marker (a string) left when the owner's last hold went before others'.
    local latch = redis.call('type', KEYS[2]).ok
    if latch == 'string' then
        return 0
    elseif latch ~= 'none' then
        return 1
    end
    return nil
end
local held = tonumber(ARGV[3])
-- What the release decides on is read before the first write: the holds left after it
-- (this owner's 1 to held - 1, each other field's 1 to its count) and their leases.
local left, own, longest = false, 0, 0
local fields = redis.call('hgetall', KEYS[1])
for i = 1, #fields, 2 do
    local field, count = fields[i], tonumber(fields[i + 1])
    local prefix = ARGV[7] .. ':' .. field .. ':rwlock_timeout:'
    if field == ARGV[2] then
        count, prefix = held - 1, ARGV[6] .. ':'
    end
    if field ~= 'mode' and count and count > 0 then
        left = true
        for n = 1, count do
            local ttl = redis.call('pttl', prefix .. n)
            longest = math.max(longest, ttl)
            if field == ARGV[2] then
                own = math.max(own, ttl)
            end
        end
    end
end
local free = not left or (mode == 'read' and longest <= 0)
local timeout = ARGV[6] .. ':' .. held
-- The owner's last hold takes every lease key of its field with it: the field may count
-- more than the owner believed (an attempt that found its holds gone, given back whole).
local last = held
if held <= 1 then
    last = math.max(held, tonumber(redis.call('hget', KEYS[1], ARGV[2])) or held)
end
local check = redis.acl_check_cmd
if check then
    local counted = held > 1 and check('hset', KEYS[1], ARGV[2], held - 1)
        or held <= 1 and check('hdel', KEYS[1], ARGV[2])
    if not counted or not check('del', timeout) then
        return redis.error_reply('NOPERM this user may not write the read-write lock keys')
    end
    if free then
        if ARGV[1] ~= '' and not check('publish', ARGV[5], ARGV[1]) then
            return redis.error_reply('NOPERM this user may not PUBLISH on the unlock channel')
        end
        if not check('rename', KEYS[1], KEYS[2]) or not check('pexpire', KEYS[2], ARGV[4]) then
            return redis.error_reply('NOPERM this user may not RENAME the lock key to the latch')
        end
    elseif mode == 'read' and not check('pexpire', KEYS[1], longest) then
        return redis.error_reply('NOPERM this user may not run PEXPIRE on the lock key')
    elseif held <= 1 and not check('set', KEYS[2], '0') then
        return redis.error_reply('NOPERM this user may not set the unlock latch')
    end
end
if held > 1 then
    redis.call('hset', KEYS[1], ARGV[2], held - 1)
else
    redis.call('hdel', KEYS[1], ARGV[2])
end
for n = held, last do
    redis.call('del', ARGV[6] .. ':' .. n)
end
if free then
    redis.call('rename', KEYS[1], KEYS[2])
    redis.call('pexpire', KEYS[2], ARGV[4])
    if ARGV[1] ~= '' then
        redis.call('publish', ARGV[5], ARGV[1])
    end
    return 1
end
if mode == 'read' then
    redis.call('pexpire', KEYS[1], longest)
end
if held > 1 then
    return {0, own}
end
-- The owner's last hold went, others' stay: a marker latch lets a retry of this call after
-- a lost reply say so, instead of finding no hold.
redis.call('set', KEYS[2], '0', 'px', ARGV[4])
return 0
