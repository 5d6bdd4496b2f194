-- Take one hold of a reentrant lock (Redisson hash layout).
-- KEYS[1]  lock key: a hash of "<client-uuid>:<thread-id>" -> hold count
-- ARGV[1]  lease in milliseconds
-- ARGV[2]  owner field "<client-uuid>:<thread-id>"
-- Reply    nil when the hold was taken (the key is free or already ours),
--          otherwise the key's PTTL in milliseconds (-1 when it has no expiry).
if redis.call('exists', KEYS[1]) == 0 or redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
    redis.call('hincrby', KEYS[1], ARGV[2], 1)
    redis.call('pexpire', KEYS[1], ARGV[1])
    return nil
end
return redis.call('pttl', KEYS[1])
