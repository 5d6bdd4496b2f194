-- Give back what an attempt to take permits of a semaphore without leases took, when its
-- reply was lost (see csem_acquire.lua): the number its marker records, once. Safe to
-- repeat: the marker goes in the same call. When the attempt has not come yet (held up on
-- its way), the marker is written "undone", so that it takes nothing when it comes.
-- KEYS[1]  permits key (see csem_acquire.lua)
-- KEYS[2]  the attempt's marker (see csem_acquire.lua)
-- ARGV[1]  the semaphore's channel, "redisson_sc:{<key>}": the number available after is
--             published on it, as Redisson's release does (it wakes that many waiters)
-- ARGV[2]  how long an "undone" marker lasts, in milliseconds (as the attempt's marker)
-- Reply    how many permits were given back: 0 when the attempt took none, or they were
--             given back already, or it has not come;
--          the error "WRONGKIND <type>" when the permits key now holds no integer, with
--             nothing written;
--          an error, with nothing written, when the user may not write the keys or publish.
local taken = redis.call('get', KEYS[2])
if taken == 'undone' then
    return 0
end
if not taken then
    local check = redis.acl_check_cmd
    if check and not check('set', KEYS[2], 'undone', 'px', ARGV[2]) then
        return redis.error_reply('NOPERM this user may not write the semaphore keys')
    end
    redis.call('set', KEYS[2], 'undone', 'px', ARGV[2])
    return 0
end
local kind = redis.call('type', KEYS[1]).ok
if kind ~= 'none' and (kind ~= 'string'
    or not string.match(redis.call('get', KEYS[1]), '^%-?%d+$')) then
    return redis.error_reply('WRONGKIND ' .. kind)
end
local check = redis.acl_check_cmd
if check and (not check('incrby', KEYS[1], '1') or not check('del', KEYS[2])
    or not check('publish', ARGV[1], '1')) then
    return redis.error_reply('NOPERM this user may not write the semaphore keys')
end
redis.call('del', KEYS[2])
local total = redis.call('incrby', KEYS[1], taken)
redis.call('publish', ARGV[1], total)
return tonumber(taken)
