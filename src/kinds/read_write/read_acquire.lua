-- Take one read hold of a read-write lock (Redisson's RReadWriteLock layout).
-- KEYS[1]  lock key: a hash of "mode" -> "read" or "write", each reader's owner field
--             "<client-uuid>:<thread-id>" -> its read holds, and the writer's
--             "<owner>:write" -> its write holds
-- KEYS[2]  the new hold's lease key: read hold i of an owner keeps its own lease in the
--             string key "{<key>}:<owner>:rwlock_timeout:i", here i = ARGV[4] + 1. It is
--             declared, as every key a script writes: in a migrating slot, where it does not
--             exist yet, the call then waits for the slot to settle instead of creating it
--             on one node while an older key of that name may still be on the other
-- ARGV[1]  lease in milliseconds
-- ARGV[2]  owner field
-- ARGV[3]  the owner's writer field, "<owner>:write"
-- ARGV[4]  read holds the owner believes it has already (0 for a first hold)
-- Reply    nil when the hold was taken (free, read by others, or written by this owner):
--             the field counts ARGV[4] + 1;
--          -3 when taken although the owner believed it held some already (they expired
--             or were deleted);
--          otherwise the key's PTTL in milliseconds: written by another owner, or a
--             string (a SET-NX lock of another library), busy;
--          the error "WRONGKIND <type>" ("hash" for a hash without a mode: another kind
--             of lock; "election" for an election's) when the key holds something else;
--             nothing written;
--          an error, with nothing written, when the user may not write the keys.
-- The field is set, not incremented, so a retry after a lost reply takes one hold, not two.
local had = 0
if redis.call('exists', KEYS[1]) == 1 then
    local hash, mode = pcall(redis.call, 'hget', KEYS[1], 'mode')
    if not hash then
        local kind = redis.call('type', KEYS[1]).ok
        if kind ~= 'string' then
            return redis.error_reply('WRONGKIND ' .. kind)
        end
        return redis.call('pttl', KEYS[1])
    end
    if not mode then
        if redis.call('hexists', KEYS[1], 'epoch') == 1 then
            return redis.error_reply('WRONGKIND election')
        end
        return redis.error_reply('WRONGKIND hash')
    end
    if mode == 'write' and redis.call('hexists', KEYS[1], ARGV[3]) == 0 then
        return redis.call('pttl', KEYS[1])
    end
    had = tonumber(redis.call('hget', KEYS[1], ARGV[2])) or 0
end
local expected = tonumber(ARGV[4])
local timeout = KEYS[2]
local check = redis.acl_check_cmd
if check then
    if not check('hsetnx', KEYS[1], 'mode', 'read') or not check('hset', KEYS[1], ARGV[2], 1)
        or not check('pexpire', KEYS[1], ARGV[1])
        or not check('set', timeout, '1', 'px', ARGV[1]) then
        return redis.error_reply('NOPERM this user may not write the read-write lock keys')
    end
end
local reply = nil
if had ~= expected and had ~= expected + 1 then
    reply = -3
end
if redis.call('hsetnx', KEYS[1], 'mode', 'read') == 1 then
    redis.call('pexpire', KEYS[1], ARGV[1])
end
redis.call('hset', KEYS[1], ARGV[2], expected + 1)
redis.call('set', timeout, '1', 'px', ARGV[1])
local left = redis.call('pttl', KEYS[1])
if left < tonumber(ARGV[1]) then
    redis.call('pexpire', KEYS[1], ARGV[1])
end
return reply
