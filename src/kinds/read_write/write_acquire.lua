-- Take one write hold of a read-write lock (Redisson's RReadWriteLock layout).
-- KEYS[1]  lock key: the hash described in read_acquire.lua
-- ARGV[1]  lease in milliseconds
-- ARGV[2]  the owner's writer field, "<client-uuid>:<thread-id>:write"
-- ARGV[3]  write holds the owner believes it has already (0 for a first hold)
-- Reply    nil when the hold was taken (free, or written by this owner): the field counts
--             ARGV[3] + 1, and the key lasts at least the lease (a re-entry never cuts
--             its expiry);
--          -3 when taken although the owner believed it held some already;
--          otherwise the key's PTTL in milliseconds: read by anyone (this owner
--             included: a reader never upgrades) or written by another owner, or a
--             string, busy;
--          the error "WRONGKIND <type>" ("hash" for a hash without a mode, "election"
--             for an election's) when the key holds something else; nothing written;
--          an error, with nothing written, when the user may not set the key's expiry.
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
    had = tonumber(redis.call('hget', KEYS[1], ARGV[2]))
    if mode ~= 'write' or not had then
        return redis.call('pttl', KEYS[1])
    end
end
if redis.acl_check_cmd and not redis.acl_check_cmd('pexpire', KEYS[1], ARGV[1]) then
    return redis.error_reply('NOPERM this user may not run PEXPIRE on the lock key')
end
local expected = tonumber(ARGV[3])
local reply = nil
if had ~= expected and had ~= expected + 1 then
    reply = -3
end
redis.call('hset', KEYS[1], 'mode', 'write', ARGV[2], expected + 1)
-- A re-entry only ever raises the expiry: this owner's read holds may have longer leases.
if redis.call('pttl', KEYS[1]) < tonumber(ARGV[1]) then
    redis.call('pexpire', KEYS[1], ARGV[1])
end
return reply
