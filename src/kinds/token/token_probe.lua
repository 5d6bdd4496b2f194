-- Why a token lock's SET NX found its key taken, and whether it was taken by this very
-- attempt: a SET sent again after its connection dropped finds the key its first try set.
-- KEYS[1]  lock key
-- ARGV[1]  the attempt's token
-- ARGV[2]  the attempt's lease in milliseconds
-- Reply    {type, pttl, mine}: the key's type ("none" when it was freed meanwhile, "string"
--          for a SET-NX lock of ours or of another library, anything else for another kind
--          of lock: "rwlock" for a read-write lock's hash, "election" for an election's),
--          its PTTL in milliseconds (-1 without expiry, -2 when gone), and 1 when
--          it holds ARGV[1], else 0.
-- A key that holds ARGV[1] gets its lease again: the one write, so that a WAIT sent after
-- this script on the same connection covers the SET that set the key.
local kind = redis.call('type', KEYS[1]).ok
if kind == 'hash' and redis.call('hexists', KEYS[1], 'mode') == 1 then
    kind = 'rwlock'
elseif kind == 'hash' and redis.call('hexists', KEYS[1], 'epoch') == 1 then
    kind = 'election'
end
if kind == 'string' and redis.call('get', KEYS[1]) == ARGV[1] then
    redis.call('pexpire', KEYS[1], ARGV[2])
    return {kind, tonumber(ARGV[2]), 1}
end
return {kind, redis.call('pttl', KEYS[1]), 0}
