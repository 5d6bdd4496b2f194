-- Take one hold of a reentrant lock (Redisson hash layout).
-- KEYS[1]  lock key: a hash of "<client-uuid>:<thread-id>" -> hold count
-- ARGV[1]  lease in milliseconds
-- ARGV[2]  owner field "<client-uuid>:<thread-id>"
-- ARGV[3]  holds the owner believes it has already (0 for a first hold)
-- Reply    nil when the hold was taken: the field now counts ARGV[3] + 1;
--          -3 when the hold was taken on a free key although the owner believed it held
--             some already (they expired or were deleted): the field counts ARGV[3] + 1 too;
--          otherwise the key's PTTL in milliseconds (-1 when it has no expiry), also when
--             the key holds a string: a SET-NX lock of another library, busy;
--          the error "WRONGKIND <type>" when the key holds another kind of lock or other
--             data ("rwlock" for a read-write lock's hash, "election" for an election's);
--             nothing written;
--          an error, with nothing written, when the user may not set the key's expiry.
-- The field is set, not incremented, so running this twice (a retry after a lost reply)
-- still leaves ARGV[3] + 1 holds.
local had = 0
if redis.call('exists', KEYS[1]) == 1 then
    local readable
    readable, had = pcall(redis.call, 'hget', KEYS[1], ARGV[2])
    if not readable then
        local kind = redis.call('type', KEYS[1]).ok
        if kind ~= 'string' then
            return redis.error_reply('WRONGKIND ' .. kind)
        end
    elseif redis.call('hexists', KEYS[1], 'mode') == 1 then
        return redis.error_reply('WRONGKIND rwlock')
    elseif not had and redis.call('hexists', KEYS[1], 'epoch') == 1 then
        return redis.error_reply('WRONGKIND election')
    end
    if not readable or not had then
        return redis.call('pttl', KEYS[1])
    end
    had = tonumber(had)
end
if redis.acl_check_cmd and not redis.acl_check_cmd('pexpire', KEYS[1], ARGV[1]) then
    return redis.error_reply('NOPERM this user may not run PEXPIRE on the lock key')
end
local expected = tonumber(ARGV[3])
local reply = nil
if had ~= expected and had ~= expected + 1 then
    reply = -3
end
redis.call('hset', KEYS[1], ARGV[2], expected + 1)
redis.call('pexpire', KEYS[1], ARGV[1])
return reply
