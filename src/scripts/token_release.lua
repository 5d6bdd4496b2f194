-- Release a token lock: delete the key only if it still holds our token, and wake a waiter.
-- KEYS[1]  lock key: a string holding the owner's token
-- KEYS[2]  unlock channel (see layout.rs)
-- KEYS[3]  unlock latch of this release call, "redisson_unlock_latch:{<key>}:<request id>"
-- ARGV[1]  the owner's token
-- ARGV[2]  message published on release ("0")
-- ARGV[3]  how long the latch lasts, in milliseconds: longer than the call's retries
-- Reply    1 when the key was deleted, now or by an earlier attempt of this call (the latch
--          says so); nil when it holds something else or nothing (not ours; nothing changed);
--          an error, with the lock left as it was, when the user may not publish on the
--          channel, write the latch or delete the key.
-- What can fail comes first: PUBLISH (no write; its message reaches subscribers only after
-- the script, when the key is gone), then the latch (a key of this call alone), and the
-- DEL of the lock last. So no permission needs checking up front on this, the hot path.
-- The latch is looked for only when the key is not ours: while it holds our token, this
-- call cannot have deleted it before (tokens are never reused).
local readable, value = pcall(redis.call, 'get', KEYS[1])
if not readable or value ~= ARGV[1] then
    if redis.call('exists', KEYS[3]) == 1 then
        return 1
    end
    return nil
end
-- A refusal (ACL) is passed on as NOPERM.
local sent, refused = pcall(redis.call, 'publish', KEYS[2], ARGV[2])
if sent then
    sent, refused = pcall(redis.call, 'set', KEYS[3], '1', 'px', ARGV[3])
end
if not sent then
    return redis.error_reply('NOPERM ' .. tostring(refused.err or refused))
end
redis.call('del', KEYS[1])
return 1
