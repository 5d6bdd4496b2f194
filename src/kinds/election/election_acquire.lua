-- Take the lead of an election, or learn that someone else has it (and wait as a listed
-- candidate).
-- KEYS[1]  the election's key: while someone leads, a hash {token, epoch, name, candidate,
--          since[, value]} that expires with the leader's lease
-- KEYS[2]  the epoch counter "redisson_lock_token:{<key>}" (the fencing counter's name): a
--          string, never expiring
-- KEYS[3]  the record of recent leaders "redisson_lock_token:{<key>}:redmutex_leaders": a
--          list of "<epoch> <name>", oldest first
-- KEYS[4]  the waiting candidates "redisson_lock_token:{<key>}:redmutex_candidates": a hash
--          of candidate id to "<listed until> <since> <name>" (server times, milliseconds),
--          which expires with its last entry (and queued candidates' listings, fields
--          "queued:<owner>", which election_enlist.lua writes)
-- KEYS[5]  the times until which this crate's candidates queued in a first-come-first-
--          served election keep their places:
--          "redisson_lock_timeout:{<key>}:redmutex_queue:redmutex_alive"; a queued
--          candidate's listing ("queued:<owner>") is dropped a minute after it was made
--          once its owner has no place there
-- ARGV[1]  the attempt's token: 32 hex digits, new for every attempt
-- ARGV[2]  lease in milliseconds
-- ARGV[3]  the candidate's name
-- ARGV[4]  how many leaders the record keeps
-- ARGV[5]  the observers' channel "redisson_lock__channel:{<key>}:leader"
-- ARGV[6]  the candidate's id
-- ARGV[7]  "1" when a leadership of the same candidate id is to be taken over (resumed)
-- ARGV[8]  the leader's value, with ARGV[9] = "1"; ARGV[9] = "0": none (kept on a resume)
-- ARGV[10] how long a waiting candidate stays listed after the leader's lease would end,
--          in milliseconds
-- Reply    {1, epoch} when this attempt leads: newly (the counter's next value), already
--             (the key holds ARGV[1]: the same attempt sent again after its reply was lost
--             takes no new epoch, and its lease is set again), or by taking over the
--             leadership of its own candidate id (ARGV[7]: the epoch is kept, the token
--             and lease replaced, and observers told);
--          {0, pttl} when someone else leads (pttl -1 when the key has no expiry), also
--             when the key holds a token (a SET-NX lock of another library; see shape.lua,
--             which comes before this text); the candidate is listed in KEYS[4];
--          the error "WRONGKIND <type>" when the key holds anything else ("hash" for a
--             lock's hash, "rwlock" for a read-write lock's, "string" for a string that is
--             no token, such as a semaphore's permits); nothing written;
--          an error, with nothing written, when the record is not a list, the candidates
--             are not a hash, the user may not run what follows, or the counter is not an
--             integer (INCR, the first write of a new leadership, fails then).
local kind = redis.call('type', KEYS[1]).ok
local held
if kind == 'hash' then
    local _, shaped = judge(KEYS[1], nil, 8)
    if shaped ~= 'election' then
        return redis.error_reply('WRONGKIND ' .. (shaped == 'rwlock' and 'rwlock' or 'hash'))
    end
    held = redis.call('hmget', KEYS[1], 'token', 'epoch', 'candidate')
    if held[1] == ARGV[1] then
        redis.call('pexpire', KEYS[1], ARGV[2])
        return {1, tonumber(held[2])}
    end
elseif kind == 'string' then
    -- A SET-NX lock of another library holds it; any other string is another kind's data
    -- (a semaphore's permits, a counter), which a campaign would wait on for ever.
    local _, shaped = judge(KEYS[1], nil, 1)
    if shaped ~= 'token' then
        return redis.error_reply('WRONGKIND string')
    end
elseif kind ~= 'none' then
    return redis.error_reply('WRONGKIND ' .. kind)
end
local record = redis.call('type', KEYS[3]).ok
if record ~= 'none' and record ~= 'list' then
    return redis.error_reply('WRONGTYPE the record of leaders holds a ' .. record)
end
local listed = redis.call('type', KEYS[4]).ok
if listed ~= 'none' and listed ~= 'hash' then
    return redis.error_reply('WRONGTYPE the candidates of the election hold a ' .. listed)
end
local check = redis.acl_check_cmd
if check then
    local needed = {
        {'hset', KEYS[1], 'token', ARGV[1]},
        {'pexpire', KEYS[1], ARGV[2]},
        {'rpush', KEYS[3], 'x'},
        {'ltrim', KEYS[3], '0', '-1'},
        {'hset', KEYS[4], ARGV[6], 'x'},
        {'hdel', KEYS[4], ARGV[6]},
        {'hgetall', KEYS[4]},
        {'pexpire', KEYS[4], ARGV[10]},
        {'pttl', KEYS[4]},
        {'publish', ARGV[5], '1'},
    }
    for _, command in ipairs(needed) do
        if not check(unpack(command)) then
            return redis.error_reply('NOPERM this user may not run ' .. string.upper(command[1])
                .. ' on ' .. command[2])
        end
    end
end

local clock = redis.call('time')
local now = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
-- The candidates listed, those whose listing ran out dropped; this one's entry, if any.
local own
local latest = 0
local entries = redis.call('hgetall', KEYS[4])
for i = 1, #entries, 2 do
    local id, entry = entries[i], entries[i + 1]
    local until_ms = tonumber(string.match(entry, '^(%d+) ')) or 0
    local queued = string.sub(id, 1, 7) == 'queued:'
    if queued then
        -- Listed while it keeps its place in the queue; before it joined, for a minute.
        -- (A user without rights there keeps such listings for their day.)
        local readable, score = pcall(redis.call, 'zscore', KEYS[5], string.sub(id, 8))
        local place = readable and tonumber(score)
        local made = tonumber(string.match(entry, '^%d+ (%d+) ')) or 0
        if readable and (not place or place < now) and made < now - 60000 then
            until_ms = 0
        end
    end
    if id == ARGV[6] and not queued then
        own = entry
    elseif until_ms < now then
        redis.call('hdel', KEYS[4], id)
    else
        latest = math.max(latest, until_ms)
    end
end
local since = own and string.match(own, '^%d+ (%d+) ') or tostring(now)

if held and ARGV[7] == '1' and held[3] == ARGV[6] then
    -- This candidate's own leadership, left by a process that stopped or restarted.
    redis.call('hset', KEYS[1], 'token', ARGV[1])
    if ARGV[9] == '1' then
        redis.call('hset', KEYS[1], 'value', ARGV[8])
    end
    redis.call('pexpire', KEYS[1], ARGV[2])
    redis.call('hdel', KEYS[4], ARGV[6])
    redis.call('publish', ARGV[5], '1')
    return {1, tonumber(held[2])}
end
if kind ~= 'none' then
    local pttl = redis.call('pttl', KEYS[1])
    local listed_until = now + math.max(pttl, 0) + tonumber(ARGV[10])
    redis.call('hset', KEYS[4], ARGV[6], listed_until .. ' ' .. since .. ' ' .. ARGV[3])
    -- The list goes when its last entry would: nobody is left to clear it.
    local keep = math.max(latest, listed_until) - now
    if redis.call('pttl', KEYS[4]) < keep then
        redis.call('pexpire', KEYS[4], keep)
    end
    return {0, pttl}
end
local epoch = redis.call('incr', KEYS[2])
redis.call('hset', KEYS[1], 'token', ARGV[1], 'epoch', epoch, 'name', ARGV[3],
    'candidate', ARGV[6], 'since', now)
if ARGV[9] == '1' then
    redis.call('hset', KEYS[1], 'value', ARGV[8])
end
redis.call('pexpire', KEYS[1], ARGV[2])
redis.call('hdel', KEYS[4], ARGV[6])
redis.call('rpush', KEYS[3], epoch .. ' ' .. ARGV[3])
redis.call('ltrim', KEYS[3], -tonumber(ARGV[4]), -1)
redis.call('publish', ARGV[5], '1')
return {1, epoch}
