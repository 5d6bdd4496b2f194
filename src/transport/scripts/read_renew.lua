-- Extend the leases of an owner's read holds (the watchdog's renewal).
-- KEYS[1]  lock key: the hash described in read_acquire.lua
-- KEYS[2]  this owner's timeout prefix (see read_acquire.lua)
-- ARGV[1]  lease in milliseconds
-- ARGV[2]  owner field
-- ARGV[3]  the owner's read holds
-- Reply    1 when the owner's field exists and its holds' leases were extended (the hash
--          lasts at least as long); 0 when its holds are gone (also when the key is not a
--          read-write lock's); an error, with nothing written, when the user may not set
--          the expiries.
local hash, mode = pcall(redis.call, 'hget', KEYS[1], 'mode')
if not hash or not mode or redis.call('hexists', KEYS[1], ARGV[2]) == 0 then
    return 0
end
local check = redis.acl_check_cmd
if check then
    local allowed = check('pexpire', KEYS[1], ARGV[1])
    for i = 1, tonumber(ARGV[3]) do
        allowed = allowed and check('set', KEYS[2] .. ':' .. i, '1', 'px', ARGV[1])
    end
    if not allowed then
        return redis.error_reply('NOPERM this user may not write the read-write lock keys')
    end
end
for i = 1, tonumber(ARGV[3]) do
    redis.call('set', KEYS[2] .. ':' .. i, '1', 'px', ARGV[1])
end
if redis.call('pttl', KEYS[1]) < tonumber(ARGV[1]) then
    redis.call('pexpire', KEYS[1], ARGV[1])
end
return 1
