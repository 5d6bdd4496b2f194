-- Why a token lock's SET NX found its key taken.
-- KEYS[1]  lock key
-- Reply    {type, pttl}: the key's type ("none" when it was freed meanwhile, "string" for a
--          SET-NX lock of ours or of another library, anything else for another kind of
--          lock) and its PTTL in milliseconds (-1 without expiry, -2 when gone).
return {redis.call('type', KEYS[1]).ok, redis.call('pttl', KEYS[1])}
