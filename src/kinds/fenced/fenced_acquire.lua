-- Take one hold of a fenced lock (Redisson's RFencedLock): the reentrant hash of acquire.lua,
-- plus a counter that every acquisition, re-entries included, increments.
-- KEYS[1]  lock key: a hash of "<client-uuid>:<thread-id>" -> hold count
-- KEYS[2]  token counter "redisson_lock_token:{<lock key>}": a string, never expiring
-- ARGV[1]  lease in milliseconds
-- ARGV[2]  owner field "<client-uuid>:<thread-id>"
-- ARGV[3]  holds the owner believes it has already (0 for a first hold)
-- Reply    {1, token} when the hold was taken: the field now counts ARGV[3] + 1;
--          {2, token} when it was taken on a free key although the owner believed it held
--             some already (they expired or were deleted);
--          {0, pttl} when the key is someone else's (pttl -1 when it has no expiry), also
--             when it holds a string (a SET-NX lock of another library);
--          the error "WRONGKIND <type>" when the key holds another type ("rwlock" for a
--             read-write lock's hash, "election" for an election's); nothing written;
--          an error, with nothing written, when the counter is not an integer or the user
--             may not set the key's expiry. INCR is the first write: if it fails, nothing
--             else was done.
-- A retry after a lost reply takes a new token: tokens grow, with gaps.
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
        return {0, redis.call('pttl', KEYS[1])}
    end
    had = tonumber(had)
end
if redis.acl_check_cmd and not redis.acl_check_cmd('pexpire', KEYS[1], ARGV[1]) then
    return redis.error_reply('NOPERM this user may not run PEXPIRE on the lock key')
end
local token = redis.call('incr', KEYS[2])
local expected = tonumber(ARGV[3])
local status = 1
if had ~= expected and had ~= expected + 1 then
    status = 2
end
redis.call('hset', KEYS[1], ARGV[2], expected + 1)
redis.call('pexpire', KEYS[1], ARGV[1])
return {status, token}
