-- Take the lead of an election, or learn that someone else has it.
-- KEYS[1]  the election's key: while someone leads, a hash {token, epoch, name} that expires
--          with the leader's lease
-- KEYS[2]  the epoch counter "redisson_lock_token:{<key>}" (the fencing counter's name): a
--          string, never expiring
-- KEYS[3]  the record of recent leaders "redisson_lock_token:{<key>}:redmutex_leaders": a
--          list of "<epoch> <name>", oldest first
-- ARGV[1]  the attempt's token: 32 hex digits, new for every attempt
-- ARGV[2]  lease in milliseconds
-- ARGV[3]  the candidate's name
-- ARGV[4]  how many leaders the record keeps
-- ARGV[5]  the observers' channel "redisson_lock__channel:{<key>}:leader"
-- Reply    {1, epoch} when this attempt leads: newly (the counter's next value), or already
--             (the key holds ARGV[1]: the same attempt sent again after its reply was lost
--             takes no new epoch, and its lease is set again);
--          {0, pttl} when someone else leads (pttl -1 when the key has no expiry), also
--             when the key holds a token (a SET-NX lock of another library; see shape.lua,
--             which comes before this text);
--          the error "WRONGKIND <type>" when the key holds anything else ("hash" for a
--             lock's hash, "rwlock" for a read-write lock's, "string" for a string that is
--             no token, such as a semaphore's permits); nothing written;
--          an error, with nothing written, when the record is not a list, the user may not
--             run what follows, or the counter is not an integer (INCR, the first write,
--             fails then).
local kind = redis.call('type', KEYS[1]).ok
if kind == 'hash' then
    local _, shaped = judge(KEYS[1], nil, 8)
    if shaped ~= 'election' then
        return redis.error_reply('WRONGKIND ' .. (shaped == 'rwlock' and 'rwlock' or 'hash'))
    end
    local held = redis.call('hmget', KEYS[1], 'token', 'epoch')
    if held[1] == ARGV[1] then
        redis.call('pexpire', KEYS[1], ARGV[2])
        return {1, tonumber(held[2])}
    end
    return {0, redis.call('pttl', KEYS[1])}
elseif kind == 'string' then
    -- A SET-NX lock of another library holds it; any other string is another kind's data
    -- (a semaphore's permits, a counter), which a campaign would wait on for ever.
    local _, shaped = judge(KEYS[1], nil, 1)
    if shaped ~= 'token' then
        return redis.error_reply('WRONGKIND string')
    end
    return {0, redis.call('pttl', KEYS[1])}
elseif kind ~= 'none' then
    return redis.error_reply('WRONGKIND ' .. kind)
end
local record = redis.call('type', KEYS[3]).ok
if record ~= 'none' and record ~= 'list' then
    return redis.error_reply('WRONGTYPE the record of leaders holds a ' .. record)
end
local check = redis.acl_check_cmd
if check then
    local needed = {
        {'hset', KEYS[1], 'token', ARGV[1]},
        {'pexpire', KEYS[1], ARGV[2]},
        {'rpush', KEYS[3], 'x'},
        {'ltrim', KEYS[3], '0', '-1'},
        {'publish', ARGV[5], '1'},
    }
    for _, command in ipairs(needed) do
        if not check(unpack(command)) then
            return redis.error_reply('NOPERM this user may not run ' .. string.upper(command[1])
                .. ' on ' .. command[2])
        end
    end
end
local epoch = redis.call('incr', KEYS[2])
redis.call('hset', KEYS[1], 'token', ARGV[1], 'epoch', epoch, 'name', ARGV[3])
redis.call('pexpire', KEYS[1], ARGV[2])
redis.call('rpush', KEYS[3], epoch .. ' ' .. ARGV[3])
redis.call('ltrim', KEYS[3], -tonumber(ARGV[4]), -1)
redis.call('publish', ARGV[5], '1')
return {1, epoch}
