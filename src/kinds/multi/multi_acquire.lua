-- Take one hold of each of several reentrant locks (Redisson hash layout) at once, all or
-- none: a multi-lock's attempt on the locks it has in one cluster slot.
-- KEYS       the lock keys, each a hash of "<client-uuid>:<thread-id>" -> hold count
-- ARGV[1]    owner field "<client-uuid>:<thread-id>"
-- ARGV[2i]   holds the owner believes it has of KEYS[i] already (0 for a first hold)
-- ARGV[2i+1] lease in milliseconds for KEYS[i]
-- Reply      {0, f1, ..., fn} when every hold was taken: the field of KEYS[i] now counts
--               ARGV[2i] + 1, and fi is 1 where the key was free although the owner
--               believed it held some (they expired or were deleted), else 0;
--            {1, i} when KEYS[i] is the first key someone else holds (a string too: a
--               SET-NX lock of another library); nothing written;
--            {2, i, type} when KEYS[i] is the first key that holds another kind of lock or
--               other data (as acquire.lua's WRONGKIND: "rwlock", "election" or the Redis
--               type); nothing written;
--            an error, with nothing written, when the user may not set a key's expiry.
-- Each field is set, not incremented, so running this twice (a retry after a lost reply)
-- still leaves ARGV[2i] + 1 holds of each key.
local had = {}
for i, key in ipairs(KEYS) do
    had[i] = 0
    if redis.call('exists', key) == 1 then
        local readable, count = pcall(redis.call, 'hget', key, ARGV[1])
        if not readable then
            local kind = redis.call('type', key).ok
            if kind ~= 'string' then
                return {2, i, kind}
            end
        elseif redis.call('hexists', key, 'mode') == 1 then
            return {2, i, 'rwlock'}
        elseif not count and redis.call('hexists', key, 'epoch') == 1 then
            return {2, i, 'election'}
        end
        if not readable or not count then
            return {1, i}
        end
        had[i] = tonumber(count)
    end
    if redis.acl_check_cmd and not redis.acl_check_cmd('pexpire', key, ARGV[2 * i + 1]) then
        return redis.error_reply('NOPERM this user may not run PEXPIRE on the lock key')
    end
end
local reply = {0}
for i, key in ipairs(KEYS) do
    local expected = tonumber(ARGV[2 * i])
    local fresh = 0
    if had[i] ~= expected and had[i] ~= expected + 1 then
        fresh = 1
    end
    reply[i + 1] = fresh
    redis.call('hset', key, ARGV[1], expected + 1)
    redis.call('pexpire', key, ARGV[2 * i + 1])
end
return reply
