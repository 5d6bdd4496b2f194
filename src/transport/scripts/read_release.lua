-- Give back one read hold of a read-write lock; the last hold of all wakes a waiter.
-- KEYS[1]  lock key: the hash described in read_acquire.lua
-- KEYS[2]  the lock's channel, "redisson_rwlock:{<key>}"
-- KEYS[3]  unlock latch of this release call, "redisson_unlock_latch:{<key>}:<request id>"
-- KEYS[4]  this owner's timeout prefix (see read_acquire.lua)
-- KEYS[5]  the key prefix of every owner's timeout keys, "{<key>}" ("<key>" with a tag)
-- ARGV[1]  message published when the lock is freed ("0": a writer or reader may go);
--             empty: none, for giving back what a failed attempt took
-- ARGV[2]  owner field
-- ARGV[3]  read holds the owner has before this release (at least 1)
-- ARGV[4]  how long the latch lasts, in milliseconds: longer than the call's retries
-- Reply    nil when the owner holds no read hold (nothing changed);
--          {0, left} when the owner's own read holds remain: their leases are left as they
--             were, and the longest of them ends within `left` milliseconds (0: all have
--             ended). Only that bounds how long the owner still reads: another reader's
--             release sets the hash's expiry to the longest read lease left;
--          0 when the owner's last read hold went and others' holds remain (the hash then
--             lasts as long as the longest read lease left, unless a writer holds it);
--          1 when the lock was freed, by this call or (the latch says) an earlier attempt
--             of it; an error, with nothing written, when the user may not publish on the
--             channel, rename the key or set the latch's expiry.
local hash, present = pcall(redis.call, 'hexists', KEYS[1], ARGV[2])
if not hash or present == 0 then
    if redis.call('exists', KEYS[3]) == 1 then
        return 1
    end
    return nil
end
local check = redis.acl_check_cmd
if check then
    if not check('pexpire', KEYS[3], ARGV[4]) or not check('del', KEYS[4] .. ':1') then
        return redis.error_reply('NOPERM this user may not write the read-write lock keys')
    end
    if ARGV[1] ~= '' and not check('publish', KEYS[2], ARGV[1]) then
        return redis.error_reply('NOPERM this user may not PUBLISH on the unlock channel')
    end
    if not check('rename', KEYS[1], KEYS[3]) then
        return redis.error_reply('NOPERM this user may not RENAME the lock key')
    end
end
local held = tonumber(ARGV[3])
if held > 1 then
    redis.call('hset', KEYS[1], ARGV[2], held - 1)
else
    redis.call('hdel', KEYS[1], ARGV[2])
end
redis.call('del', KEYS[4] .. ':' .. held)
local reply = 0
if held > 1 then
    local left = 0
    for i = 1, held - 1 do
        left = math.max(left, redis.call('pttl', KEYS[4] .. ':' .. i))
    end
    reply = {0, left}
end
if redis.call('hlen', KEYS[1]) > 1 then
    if redis.call('hget', KEYS[1], 'mode') == 'read' then
        local longest = 0
        local fields = redis.call('hgetall', KEYS[1])
        for i = 1, #fields, 2 do
            local count = tonumber(fields[i + 1])
            if fields[i] ~= 'mode' and count then
                local prefix = KEYS[5] .. ':' .. fields[i] .. ':rwlock_timeout:'
                for n = 1, count do
                    longest = math.max(longest, redis.call('pttl', prefix .. n))
                end
            end
        end
        if longest > 0 then
            redis.call('pexpire', KEYS[1], longest)
        end
    end
    return reply
end
redis.call('rename', KEYS[1], KEYS[3])
redis.call('pexpire', KEYS[3], ARGV[4])
if ARGV[1] ~= '' then
    redis.call('publish', KEYS[2], ARGV[1])
end
return 1
