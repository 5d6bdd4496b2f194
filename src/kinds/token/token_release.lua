-- Release a token lock: delete the key only if it still holds our token, and wake a waiter.
-- KEYS[1]  lock key: a string holding the owner's token
-- KEYS[2]  unlock latch of this release call, "redisson_unlock_latch:{<key>}:<request id>"
-- The latch is written, so it is a key: Cluster routes by it and checks it in a migration.
-- Without KEYS[2] (sent so only while the slot migrates and no earlier send of this call
--             may have run: see scripts.rs, unlatched) the release deletes the key, and
--             nothing records the release for a retry, which is never made.
-- ARGV[1]  the owner's token
-- ARGV[2]  message published on release ("0"); empty: none, for giving back what a failed
--             attempt took
-- ARGV[3]  how long the latch lasts, in milliseconds: longer than the call's retries
-- ARGV[4]  unlock channel (see layout.rs)
-- Reply    1 when the key was released, now or by an earlier attempt of this call (the latch
--          says so); nil when it holds something else or nothing (not ours; nothing changed);
--          an error, with the lock left as it was, when the user may not publish on the
--          channel, rename the key to the latch or set the latch's expiry.
-- The key itself becomes the latch: RENAME frees the lock key and leaves the latch in one
-- write, and PEXPIRE gives the latch its own life. What can fail comes first: the PEXPIRE
-- right (checked, since it runs after the first write), PUBLISH (no write; its message
-- reaches subscribers only after the script, when the key is gone), then RENAME.
-- The latch is looked for only when the key is not ours: while it holds our token, this
-- call cannot have deleted it before (tokens are never reused).
local readable, value = pcall(redis.call, 'get', KEYS[1])
if not readable or value ~= ARGV[1] then
    if KEYS[2] and redis.call('exists', KEYS[2]) == 1 then
        return 1
    end
    return nil
end
if KEYS[2] and redis.acl_check_cmd and not redis.acl_check_cmd('pexpire', KEYS[2], ARGV[3]) then
    return redis.error_reply('NOPERM this user may not run PEXPIRE on the unlock latch')
end
-- A refusal (ACL) is passed on as NOPERM.
local sent, refused = true, nil
if ARGV[2] ~= '' then
    sent, refused = pcall(redis.call, 'publish', ARGV[4], ARGV[2])
end
if sent and not KEYS[2] then
    sent, refused = pcall(redis.call, 'del', KEYS[1])
elseif sent then
    sent, refused = pcall(redis.call, 'rename', KEYS[1], KEYS[2])
end
if not sent then
    return redis.error_reply('NOPERM ' .. tostring(refused.err or refused))
end
if KEYS[2] then
    redis.call('pexpire', KEYS[2], ARGV[3])
end
return 1
