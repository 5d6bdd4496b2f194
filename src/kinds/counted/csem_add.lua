-- Add to (or take from) the permits of a semaphore without leases, and publish the number
-- available after, as Redisson's release and addPermits do: a release of permits held, a
-- release by anyone, or a change of the pool.
-- KEYS[1]  permits key (see csem_acquire.lua); made when missing, from 0
-- KEYS[2]  the latch of this call, "redisson_unlock_latch:{<key>}:<request id>": records
--             the number available after it ran, so that a retry of the call after a lost
--             reply changes nothing and answers what the first try did
-- KEYS[3]  only in the release of permits taken by csem_acquire.lua: the marker of the
--             attempt that took them, deleted (nothing is left for its undo to give back);
--             when it says "undone", the undo gave them back first (an earlier try of it
--             deleted the number, a later one wrote "undone"): nothing is added, and it stays
-- ARGV[1]  the semaphore's channel (see csem_undo.lua)
-- ARGV[2]  how many permits to add: an integer, below zero to take away, not 0
-- ARGV[3]  how long the latch lasts, in milliseconds: longer than the call's retries
-- ARGV[4]  the largest number of permits, above or below zero, the key may come to
-- ARGV[5]  with KEYS[3]: "1" when the marker must still be there (the permits were taken
--             less than its life ago): if it is not, the attempt's undo (csem_undo.lua)
--             gave them back first, and this release adds nothing; "0" when it may have
--             lapsed
-- Reply    the number available after the call (by this call, or by an earlier try of it
--             as its latch recorded);
--          the error "WRONGKIND <type>" when the permits key holds no integer, and
--             "OVERFLOW <number>" when the number would go past ARGV[4] either way;
--             nothing written;
--          an error, with nothing written, when the user may not write the keys or publish.
local ran = redis.call('get', KEYS[2])
if ran then
    return tonumber(ran)
end
local kind = redis.call('type', KEYS[1]).ok
local value = 0
if kind == 'string' then
    local text = redis.call('get', KEYS[1])
    if #text > 20 or not string.match(text, '^%-?%d+$') then
        return redis.error_reply('WRONGKIND token')
    end
    value = tonumber(text)
elseif kind ~= 'none' then
    return redis.error_reply('WRONGKIND ' .. kind)
end
local delta = tonumber(ARGV[2])
-- The marker counts only while it holds the number taken. "undone" is written by an undo
-- that found no marker: one that came after an earlier try of the same undo (its reply
-- lost) gave the permits back, or after this release ran; either way nothing is to be
-- added, whatever ARGV[5] says.
local marked = KEYS[3] and redis.call('get', KEYS[3])
if KEYS[3] and (marked == 'undone' or (not marked and ARGV[5] == '1')) then
    delta = 0
end
local total = value + delta
if math.abs(total) > tonumber(ARGV[4]) then
    return redis.error_reply('OVERFLOW ' .. string.format('%d', total))
end
local check = redis.acl_check_cmd
if check and (not check('incrby', KEYS[1], '1') or not check('set', KEYS[2], '1', 'px', '1')
    or not check('publish', ARGV[1], '1') or (KEYS[3] and not check('del', KEYS[3]))) then
    return redis.error_reply('NOPERM this user may not write the semaphore keys')
end
if delta ~= 0 then
    total = redis.call('incrby', KEYS[1], delta)
    redis.call('publish', ARGV[1], total)
end
redis.call('set', KEYS[2], total, 'px', ARGV[3])
if KEYS[3] and marked ~= 'undone' then
    redis.call('del', KEYS[3])
end
return total
