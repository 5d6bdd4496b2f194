-- Set or add to the permits of a leased semaphore, waking as many waiters.
-- KEYS[1]  permits key (see semaphore_acquire.lua)
-- ARGV[1]  "set" (only when the semaphore has no permits key yet) or "add"
-- ARGV[2]  the number of permits to set or add (at least 1)
-- ARGV[3]  the semaphore's channel
-- Reply    the number of permits available after the call; -1 when "set" found the key
--          there already (nothing changed); the error "WRONGKIND <type>" when the key
--          holds something else; an error, with nothing written, when the user may not
--          write the key or publish.
local kind = redis.call('type', KEYS[1]).ok
if kind ~= 'none' and (kind ~= 'string' or not tonumber(redis.call('get', KEYS[1]))) then
    return redis.error_reply('WRONGKIND ' .. kind)
end
if ARGV[1] == 'set' and kind ~= 'none' then
    return -1
end
local check = redis.acl_check_cmd
if check and (not check('incrby', KEYS[1], '1') or not check('publish', ARGV[3], '1')) then
    return redis.error_reply('NOPERM this user may not write the semaphore key')
end
local total = redis.call('incrby', KEYS[1], ARGV[2])
redis.call('publish', ARGV[3], total)
return total
