-- Give back one hold of a reentrant lock (Redisson hash layout).
-- KEYS[1]  lock key
-- KEYS[2]  unlock latch of this release call, "redisson_unlock_latch:{<key>}:<request id>"
-- The latch is written, so it is a key: Cluster routes by it and checks it in a migration.
-- Without KEYS[2] (sent so only while the slot migrates and no earlier send of this call
--             may have run: see scripts.rs, unlatched) the last hold deletes the key, and
--             nothing records the release for a retry, which is never made.
-- ARGV[1]  message published when the last hold goes ("0", as Redisson sends); empty: none,
--             for giving back what a failed attempt took
-- ARGV[2]  lease in milliseconds for the holds that remain
-- ARGV[3]  owner field "<client-uuid>:<thread-id>"
-- ARGV[4]  holds the owner has before this release (at least 1)
-- ARGV[5]  how long the latch lasts, in milliseconds: longer than the call's retries
-- ARGV[6]  unlock channel (see layout.rs)
-- Reply    nil when the field is absent, or the key is not a hash (not held by this owner;
--             nothing changed);
--          0 when holds remain (lease refreshed), 1 when the key was deleted;
--          1 again when the latch shows that an earlier attempt of this call deleted it;
--          an error, with the lock left as it was, when the user may not publish on the
--             channel, rename the key to the latch, or set the key's or the latch's expiry.
-- The field is set to ARGV[4] - 1, not decremented, so running this twice (a retry after a
-- lost reply) releases one hold, not two. The latch is only written when the key is deleted:
-- a retry of any other release finds the field and sets the same count again.
-- The latch is looked for only when the field is gone: while it is there, this call cannot
-- have deleted the key before (the owner's own thread is inside this call).
local held, present = pcall(redis.call, 'hexists', KEYS[1], ARGV[3])
if not held or present == 0 then
    if KEYS[2] and redis.call('exists', KEYS[2]) == 1 then
        return 1
    end
    return nil
end
local left = tonumber(ARGV[4]) - 1
local check = redis.acl_check_cmd
if left > 0 then
    if check and not check('pexpire', KEYS[1], ARGV[2]) then
        return redis.error_reply('NOPERM this user may not run PEXPIRE on the lock key')
    end
    redis.call('hset', KEYS[1], ARGV[3], left)
    redis.call('pexpire', KEYS[1], ARGV[2])
    return 0
end
-- The last hold: the key itself becomes the latch. RENAME frees the lock key and leaves the
-- latch in one write, and PEXPIRE gives the latch its own life. What can fail comes first:
-- the PEXPIRE right (checked, since it runs after the first write), PUBLISH (no write; its
-- message reaches subscribers only after the script, when the key is gone), then RENAME.
-- A refusal (ACL) is passed on as NOPERM.
if KEYS[2] and check and not check('pexpire', KEYS[2], ARGV[5]) then
    return redis.error_reply('NOPERM this user may not run PEXPIRE on the unlock latch')
end
local sent, refused = true, nil
if ARGV[1] ~= '' then
    sent, refused = pcall(redis.call, 'publish', ARGV[6], ARGV[1])
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
    redis.call('pexpire', KEYS[2], ARGV[5])
end
return 1
