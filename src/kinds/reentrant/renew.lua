-- Extend the lease of a hold that is still ours (the watchdog's renewal).
-- KEYS[1]  lock key
-- ARGV[1]  lease in milliseconds
-- ARGV[2]  owner field "<client-uuid>:<thread-id>"
-- ARGV[3]  hold count to put back if the key is gone, as on a node restarted empty
--          (0: never put back; a single node never does)
-- Reply    1 when the field exists and the lease was extended,
--          2 when the key was gone and the hold was put back,
--          0 when the hold is gone (and was not put back), also when the key now holds
--            another type;
--          an error, with nothing written, when the user may not set the key's expiry.
local hash, present = pcall(redis.call, 'hexists', KEYS[1], ARGV[2])
if hash and present == 1 then
    redis.call('pexpire', KEYS[1], ARGV[1])
    return 1
end
if hash and tonumber(ARGV[3]) > 0 and redis.call('exists', KEYS[1]) == 0 then
    if redis.acl_check_cmd and not redis.acl_check_cmd('pexpire', KEYS[1], ARGV[1]) then
        return redis.error_reply('NOPERM this user may not run PEXPIRE on the lock key')
    end
    redis.call('hset', KEYS[1], ARGV[2], ARGV[3])
    redis.call('pexpire', KEYS[1], ARGV[1])
    return 2
end
return 0
