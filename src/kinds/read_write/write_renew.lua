-- Extend the lease of an owner's write holds of a read-write lock (the watchdog's renewal).
-- KEYS[1]  lock key: the hash described in read_acquire.lua
-- ARGV[1]  lease in milliseconds
-- ARGV[2]  the owner's writer field, "<owner>:write"
-- Reply    1 when the field exists: the hash now lasts at least the lease. Its expiry is
--             only ever raised, never cut: the same owner may hold reads with longer
--             leases, which the hash must outlast;
--          0 when the write holds are gone (also when the key now holds another type);
--          an error, with nothing written, when the user may not set the key's expiry.
local hash, present = pcall(redis.call, 'hexists', KEYS[1], ARGV[2])
if not hash or present == 0 then
    return 0
end
if redis.call('pttl', KEYS[1]) < tonumber(ARGV[1]) then
    redis.call('pexpire', KEYS[1], ARGV[1])
end
return 1
