-- Extend the lease of a hold that is still ours (the watchdog's renewal).
-- KEYS[1]  lock key
-- ARGV[1]  lease in milliseconds
-- ARGV[2]  owner field "<client-uuid>:<thread-id>"
-- Reply    1 when the field exists and the lease was extended, 0 when the hold is gone.
if redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
    redis.call('pexpire', KEYS[1], ARGV[1])
    return 1
end
return 0
