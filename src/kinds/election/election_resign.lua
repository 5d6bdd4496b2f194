-- Resign: end a leadership if the election's key still holds its token, waking a candidate
-- and every observer.
-- KEYS[1]  the election's key
-- KEYS[2]  the latch of this call, "redisson_unlock_latch:{<key>}:<request id>"
-- The latch is written, so it is a key: Cluster routes by it and checks it in a migration.
-- Without KEYS[2] (sent so only while the slot migrates and no earlier send of this call
--             may have run: see scripts.rs, unlatched) the resignation deletes the key, and
--             nothing records the release for a retry, which is never made.
-- ARGV[1]  the leader's token
-- ARGV[2]  message to the candidates ("0": wakes one per client); empty: none, for giving
--          back what a failed attempt took
-- ARGV[3]  how long the latch lasts, in milliseconds: longer than the call's retries
-- ARGV[4]  the candidates' channel, the lock channel "redisson_lock__channel:{<key>}"
-- ARGV[5]  the observers' channel "redisson_lock__channel:{<key>}:leader"
-- Reply    1 when the leadership ended, now or by an earlier attempt of this call (the latch
--          says so); nil when the key holds another leader or nothing (nothing changed);
--          an error, with nothing changed, when the user may not publish on the channels,
--          rename the key to the latch or set the latch's expiry.
-- The key becomes the latch (one write), as the token lock's release does.
local readable, token = pcall(redis.call, 'hget', KEYS[1], 'token')
if not readable or token ~= ARGV[1] then
    if KEYS[2] and redis.call('exists', KEYS[2]) == 1 then
        return 1
    end
    return nil
end
local check = redis.acl_check_cmd
if check then
    if KEYS[2] and not check('pexpire', KEYS[2], ARGV[3]) then
        return redis.error_reply('NOPERM this user may not run PEXPIRE on the latch')
    end
    if KEYS[2] and not check('rename', KEYS[1], KEYS[2]) then
        return redis.error_reply('NOPERM this user may not RENAME the key to the latch')
    end
    if not KEYS[2] and not check('del', KEYS[1]) then
        return redis.error_reply('NOPERM this user may not DEL the election key')
    end
    if not check('publish', ARGV[5], '1') or (ARGV[2] ~= '' and not check('publish', ARGV[4], ARGV[2])) then
        return redis.error_reply('NOPERM this user may not PUBLISH on the election channels')
    end
end
if KEYS[2] then
    redis.call('rename', KEYS[1], KEYS[2])
    redis.call('pexpire', KEYS[2], ARGV[3])
else
    redis.call('del', KEYS[1])
end
if ARGV[2] ~= '' then
    redis.call('publish', ARGV[4], ARGV[2])
end
redis.call('publish', ARGV[5], '1')
return 1
