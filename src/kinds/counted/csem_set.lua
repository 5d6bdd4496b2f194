-- Set the permits of a semaphore without leases if it has none yet, and publish them, as
-- Redisson's trySetPermits does.
-- KEYS[1]  permits key (see csem_acquire.lua)
-- KEYS[2]  the latch of this call (see csem_add.lua): a retry after a lost reply answers
--             what the first try did
-- ARGV[1]  the semaphore's channel (see csem_undo.lua)
-- ARGV[2]  the number of permits (at least 1)
-- ARGV[3]  how long the latch lasts, in milliseconds
-- Reply    1 when set (by this call or, as its latch says, an earlier try of it); 0 when the
--             key was there already, nothing written;
--          the error "WRONGKIND <type>" when the key holds no integer, nothing written;
--          an error, with nothing written, when the user may not write the keys or publish.
if redis.call('exists', KEYS[2]) == 1 then
    return 1
end
local kind = redis.call('type', KEYS[1]).ok
if kind == 'string' then
    local text = redis.call('get', KEYS[1])
    if #text > 20 or not string.match(text, '^%-?%d+$') then
        return redis.error_reply('WRONGKIND token')
    end
    return 0
elseif kind ~= 'none' then
    return redis.error_reply('WRONGKIND ' .. kind)
end
local check = redis.acl_check_cmd
if check and (not check('set', KEYS[1], '1') or not check('set', KEYS[2], '1', 'px', '1')
    or not check('publish', ARGV[1], '1')) then
    return redis.error_reply('NOPERM this user may not write the semaphore keys')
end
redis.call('set', KEYS[1], ARGV[2])
redis.call('publish', ARGV[1], ARGV[2])
redis.call('set', KEYS[2], '1', 'px', ARGV[3])
return 1
