-- What holds a lock's key, for a waiter that explains its wait. Writes nothing.
-- KEYS[1]  the lock's key
-- Reply    {type, pttl, holder}: type as TYPE names it, or "rwlock" for a hash with a
--          "mode" field; pttl as PTTL replies (-1: no expiry, -2: no key); holder the
--          first field of a hash other than "mode", or false (not a hash, or the user may
--          not run HKEYS on the key).
local kind = redis.call('type', KEYS[1]).ok
local ttl = redis.call('pttl', KEYS[1])
local holder = false
local check = redis.acl_check_cmd
if kind == 'hash' and (not check or check('hkeys', KEYS[1])) then
    for _, field in ipairs(redis.call('hkeys', KEYS[1])) do
        if field == 'mode' then
            kind = 'rwlock'
        elseif not holder then
            holder = field
        end
    end
end
return {kind, ttl, holder}
