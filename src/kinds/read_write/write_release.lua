-- Give back one write hold of a read-write lock. The last one wakes every waiter: readers
-- may all go, or a writer.
-- KEYS[1]  lock key: the hash described in read_acquire.lua
-- KEYS[2]  unlock latch of this release call, "redisson_unlock_latch:{<key>}:<request id>"
-- The latch is written, so it is a key: Cluster routes by it and checks it in a migration.
-- Without KEYS[2] (sent so only while the slot migrates and no earlier send of this call
--             may have run: see scripts.rs, unlatched) the last write hold deletes the key
--             (or leaves this owner's read holds), and nothing records the release for a
--             retry, which is never made.
-- ARGV[1]  message published when the write lock goes ("1": wake every waiter); empty:
--             none, for giving back what a failed attempt took
-- ARGV[2]  lease in milliseconds for the holds that remain (at least)
-- ARGV[3]  the owner's writer field, "<owner>:write"
-- ARGV[4]  write holds the owner has before this release (at least 1)
-- ARGV[5]  how long the latch lasts, in milliseconds: longer than the call's retries
-- ARGV[6]  the lock's channel, "redisson_rwlock:{<key>}"
-- Reply    nil when the owner holds no write hold (nothing changed);
--          0 when write holds remain: the key then lasts at least ARGV[2] (its expiry is
--             raised, never cut: this owner's read holds may have longer leases);
--          1 when its last write hold went, by this call or (the latch says) an earlier
--             attempt of it: the lock is freed, or read by this owner alone if it holds
--             read holds too;
--          an error, with nothing written, when the user may not publish, rename the key
--             or set an expiry.
local hash, present = pcall(redis.call, 'hexists', KEYS[1], ARGV[3])
if not hash or present == 0 then
    if KEYS[2] and redis.call('exists', KEYS[2]) == 1 then
        return 1
    end
    return nil
end
local check = redis.acl_check_cmd
local left = tonumber(ARGV[4]) - 1
if left > 0 then
    if check and not check('pexpire', KEYS[1], ARGV[2]) then
        return redis.error_reply('NOPERM this user may not run PEXPIRE on the lock key')
    end
    redis.call('hset', KEYS[1], ARGV[3], left)
    -- Only ever raised: this owner's read holds may have longer leases.
    if redis.call('pttl', KEYS[1]) < tonumber(ARGV[2]) then
        redis.call('pexpire', KEYS[1], ARGV[2])
    end
    return 0
end
if check then
    local freed
    if KEYS[2] then
        freed = check('pexpire', KEYS[2], ARGV[5]) and check('rename', KEYS[1], KEYS[2])
            and check('set', KEYS[2], '1')
    else
        freed = check('del', KEYS[1])
    end
    if not freed or not check('hset', KEYS[1], 'mode', 'read') then
        return redis.error_reply('NOPERM this user may not write the read-write lock keys')
    end
    if ARGV[1] ~= '' and not check('publish', ARGV[6], ARGV[1]) then
        return redis.error_reply('NOPERM this user may not PUBLISH on the unlock channel')
    end
end
redis.call('hdel', KEYS[1], ARGV[3])
if redis.call('hlen', KEYS[1]) > 1 then
    -- This owner still reads: the lock stays, read, and a marker latch records the release.
    redis.call('hset', KEYS[1], 'mode', 'read')
    if KEYS[2] then
        redis.call('set', KEYS[2], '1', 'px', ARGV[5])
    end
elseif KEYS[2] then
    redis.call('rename', KEYS[1], KEYS[2])
    redis.call('pexpire', KEYS[2], ARGV[5])
else
    redis.call('del', KEYS[1])
end
if ARGV[1] ~= '' then
    redis.call('publish', ARGV[6], ARGV[1])
end
return 1
