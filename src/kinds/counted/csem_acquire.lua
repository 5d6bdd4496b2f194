-- Take permits of a semaphore without leases (Redisson's RSemaphore layout).
-- KEYS[1]  permits key: a string, the number of permits available (below zero after more
--             were taken away than there were)
-- KEYS[2]  this attempt's marker, "{<key>}:redmutex_taken:<claim id>": written with the
--             number taken, in the same call that takes them, so that the attempt's undo
--             (csem_undo.lua) gives back exactly what it took when its reply was lost, and
--             nothing when it took nothing; deleted by the release of what it took
--             (csem_add.lua), or lapses. "undone" when the undo came first (the attempt
--             was held up on its way): the attempt then takes nothing
-- ARGV[1]  how many permits to take (at least 1)
-- ARGV[2]  how long the marker lasts, in milliseconds: longer than the undo may be retried
-- Reply    1 when the permits were taken (or the marker says an earlier try of the same
--             attempt took them); 0 when fewer are available or none were ever set, or the
--             attempt was undone before it came, nothing written;
--          the error "WRONGKIND <type>" when the permits key holds something else: no
--             integer ("token" for a string, "rwlock" or "election" for those hashes);
--             nothing written;
--          an error, with nothing written, when the user may not write the keys.
local kind = redis.call('type', KEYS[1]).ok
local value = 0
if kind == 'string' then
    local text = redis.call('get', KEYS[1])
    if #text > 20 or not string.match(text, '^%-?%d+$') then
        return redis.error_reply('WRONGKIND token')
    end
    value = tonumber(text)
elseif kind ~= 'none' then
    if kind == 'hash' and redis.call('hexists', KEYS[1], 'mode') == 1 then
        kind = 'rwlock'
    elseif kind == 'hash' and redis.call('hexists', KEYS[1], 'epoch') == 1 then
        kind = 'election'
    end
    return redis.error_reply('WRONGKIND ' .. kind)
end
local marked = redis.call('get', KEYS[2])
if marked then
    return marked == 'undone' and 0 or 1
end
local check = redis.acl_check_cmd
if check and (not check('decrby', KEYS[1], '1') or not check('set', KEYS[2], '1', 'px', '1')) then
    return redis.error_reply('NOPERM this user may not write the semaphore keys')
end
if kind == 'none' or value < tonumber(ARGV[1]) then
    return 0
end
redis.call('decrby', KEYS[1], ARGV[1])
redis.call('set', KEYS[2], ARGV[1], 'px', ARGV[2])
return 1
