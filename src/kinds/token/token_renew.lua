-- Extend a token lock's lease if the key still holds our token (the watchdog's renewal and
-- the guard's extend).
-- KEYS[1]  lock key
-- ARGV[1]  the owner's token
-- ARGV[2]  lease in milliseconds
-- ARGV[3]  1 to put the hold back where the key is gone (a node restarted empty), else 0
-- Reply    1 when the lease was extended, 2 when the hold was put back, 0 when the key holds
--          something else or nothing (the hold is gone).
local readable, value = pcall(redis.call, 'get', KEYS[1])
if readable and value == ARGV[1] then
    redis.call('pexpire', KEYS[1], ARGV[2])
    return 1
end
if ARGV[3] == '1' and redis.call('exists', KEYS[1]) == 0 then
    redis.call('set', KEYS[1], ARGV[1], 'px', ARGV[2])
    return 2
end
return 0
