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
-- ARGV[7]  the prefix of every reader's lease keys, "{<key>}" (see read_release.lua)
-- When the last write hold goes and read holds are left (the writer's own), the hash's
-- expiry becomes the longest of their lease keys, and the lock is freed when all have run
-- out, as a read release does: a read hold no guard keeps (an attempt that came after its
-- give-back) then ends with its own lease, not with the write side's. Without KEYS[2] the
-- lease keys may be on the other node of the migrating slot: the expiry is left as it was.
-- Reply    nil when the owner holds no write hold (nothing changed);
--          0 when write holds remain: the key then lasts at least ARGV[2] (its expiry is
--             raised, never cut: this owner's read holds may have longer leases);
--          1 when its last write hold went, by this call or (the latch says) an earlier
--             attempt of it: the lock is freed, or read by this owner alone if it holds
--             read holds whose leases have not run out;
--          an error, with nothing written, when the user may not publish, rename the key,
--             set an expiry or read a reader's lease key.
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
-- The read holds left after this release, and the longest of their leases.
local reads, longest = false, 0
local fields = redis.call('hgetall', KEYS[1])
for i = 1, #fields, 2 do
    local field, count = fields[i], tonumber(fields[i + 1])
    if field ~= 'mode' and field ~= ARGV[3] and count and count > 0 then
        reads = true
        for n = 1, KEYS[2] and count or 0 do
            local ttl = redis.call('pttl', ARGV[7] .. ':' .. field .. ':rwlock_timeout:' .. n)
            longest = math.max(longest, ttl)
        end
    end
end
local stays = reads and (longest > 0 or not KEYS[2])
if check then
    local freed
    if stays then
        freed = check('hset', KEYS[1], 'mode', 'read') and check('pexpire', KEYS[1], '1')
    elseif KEYS[2] then
        freed = check('pexpire', KEYS[2], ARGV[5]) and check('rename', KEYS[1], KEYS[2])
            and check('set', KEYS[2], '1')
    else
        freed = check('del', KEYS[1])
    end
    if not freed or not check('hdel', KEYS[1], ARGV[3])
        or KEYS[2] and not check('set', KEYS[2], '1') then
        return redis.error_reply('NOPERM this user may not write the read-write lock keys')
    end
    if ARGV[1] ~= '' and not check('publish', ARGV[6], ARGV[1]) then
        return redis.error_reply('NOPERM this user may not PUBLISH on the unlock channel')
    end
end
redis.call('hdel', KEYS[1], ARGV[3])
if stays then
    -- This owner still reads: the lock stays, read, and a marker latch records the release.
    redis.call('hset', KEYS[1], 'mode', 'read')
    if KEYS[2] then
        redis.call('pexpire', KEYS[1], longest)
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
