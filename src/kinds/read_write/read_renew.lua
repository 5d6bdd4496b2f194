-- Extend the leases of an owner's read holds (the watchdog's renewal).
-- KEYS[1]  lock key: the hash described in read_acquire.lua
-- ARGV[1]  lease in milliseconds
-- ARGV[2]  owner field
-- ARGV[3]  the owner's read holds
-- ARGV[4]  this owner's lease-key prefix, "{<key>}:<owner>:rwlock_timeout": the lease of
--             read hold i is the key "<prefix>:i". The script extends those that exist
--             and creates none, so they are no keys to declare: in a slot being migrated
--             some may already be on the other node, where a key this script created
--             would make the migration of the older one fail.
-- Reply    1 when the owner's field exists and the leases of its holds were extended (the
--             hash lasts at least as long);
--          3 the same, but some of its lease keys were not there to extend: on the other
--             node of a slot being migrated, or ended. The caller extends those one by one,
--             each where its key is;
--          0 when its holds are gone (also when the key is not a read-write lock's);
--          an error, with nothing written, when the user may not set the expiries.
local hash, mode = pcall(redis.call, 'hget', KEYS[1], 'mode')
if not hash or not mode or redis.call('hexists', KEYS[1], ARGV[2]) == 0 then
    return 0
end
local holds = tonumber(ARGV[3])
local check = redis.acl_check_cmd
if check then
    local allowed = check('pexpire', KEYS[1], ARGV[1])
    for i = 1, holds do
        allowed = allowed and check('pexpire', ARGV[4] .. ':' .. i, ARGV[1])
    end
    if not allowed then
        return redis.error_reply('NOPERM this user may not write the read-write lock keys')
    end
end
local reply = 1
for i = 1, holds do
    -- On the migrating node a key that is not there is an error, caught here.
    local extended = redis.pcall('pexpire', ARGV[4] .. ':' .. i, ARGV[1])
    if extended ~= 1 then
        reply = 3
    end
end
if redis.call('pttl', KEYS[1]) < tonumber(ARGV[1]) then
    redis.call('pexpire', KEYS[1], ARGV[1])
end
return reply
