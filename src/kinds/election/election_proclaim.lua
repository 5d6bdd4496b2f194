-- Set the value a leader publishes (its address, say) while it still leads, and tell the
-- observers.
-- KEYS[1]  the election's key
-- ARGV[1]  the leader's token
-- ARGV[2]  the new value
-- ARGV[3]  the observers' channel "redisson_lock__channel:{<key>}:leader"
-- Reply    1 when the value was set; 0 when the key holds another leader, nothing or
--          another kind of data (the leadership is gone, nothing changed); an error, with
--          nothing changed, when the user may not publish on the channel.
local readable, token = pcall(redis.call, 'hget', KEYS[1], 'token')
if not readable or token ~= ARGV[1] then
    return 0
end
local check = redis.acl_check_cmd
if check and not check('publish', ARGV[3], '1') then
    return redis.error_reply('NOPERM this user may not PUBLISH on the election channel')
end
redis.call('hset', KEYS[1], 'value', ARGV[2])
redis.call('publish', ARGV[3], '1')
return 1
