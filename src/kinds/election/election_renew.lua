-- Extend a leader's lease while the election's key still holds its token (the watchdog's
-- renewal).
-- KEYS[1]  the election's key
-- ARGV[1]  the leader's token
-- ARGV[2]  lease in milliseconds
-- Reply    1 when the lease was extended, 0 when the key holds another leader, nothing or
--          another kind of data (the leadership is gone).
local readable, token = pcall(redis.call, 'hget', KEYS[1], 'token')
if readable and token == ARGV[1] then
    redis.call('pexpire', KEYS[1], ARGV[2])
    return 1
end
return 0
