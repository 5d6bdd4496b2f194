-- Delete a leased semaphore: its permits key and its held permits. Held permits are then
-- not held any more: their releases and renewals find them gone.
-- KEYS[1]  permits key (see semaphore_acquire.lua)
-- KEYS[2]  timeouts (see semaphore_acquire.lua)
-- Reply    1 when a key was deleted, 0 when neither existed; the error "WRONGKIND <type>"
--          when a key holds something else (nothing deleted); an error, with nothing
--          deleted, when the user may not delete the keys.
local kind = redis.call('type', KEYS[1]).ok
if kind ~= 'none' and (kind ~= 'string' or not tonumber(redis.call('get', KEYS[1]))) then
    return redis.error_reply('WRONGKIND ' .. kind)
end
local zkind = redis.call('type', KEYS[2]).ok
if zkind ~= 'none' and zkind ~= 'zset' then
    return redis.error_reply('WRONGKIND ' .. zkind)
end
local check = redis.acl_check_cmd
if check and (not check('del', KEYS[1]) or not check('del', KEYS[2])) then
    return redis.error_reply('NOPERM this user may not delete the semaphore keys')
end
if redis.call('del', KEYS[1], KEYS[2]) > 0 then
    return 1
end
return 0
