-- Why a token lock's SET NX found its key taken, and whether it was taken by this very
-- attempt: a SET sent again after its connection dropped finds the key its first try set.
-- KEYS[1]  lock key
-- ARGV[1]  the attempt's token
-- Reply    {type, pttl, mine}: the key's type ("none" when it was freed meanwhile, "string"
--          for a SET-NX lock of ours or of another library, anything else for another kind
--          of lock), its PTTL in milliseconds (-1 without expiry, -2 when gone), and 1 when
--          it holds ARGV[1], else 0.
local kind = redis.call('type', KEYS[1]).ok
local mine = 0
if kind == 'string' and redis.call('get', KEYS[1]) == ARGV[1] then
    mine = 1
end
return {kind, redis.call('pttl', KEYS[1]), mine}
