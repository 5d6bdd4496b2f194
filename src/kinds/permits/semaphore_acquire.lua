-- Take one permit of a leased semaphore (Redisson's RPermitExpirableSemaphore layout).
-- KEYS[1]  permits key: a string, the number of permits available
-- KEYS[2]  timeouts: a sorted set of the permits held, by id (16 bytes), scored by when
--             each lease ends (milliseconds since the epoch, by this server's clock)
-- ARGV[1]  the semaphore's channel, "redisson_sc:{<key>}"
-- ARGV[2]  the permit's id (16 bytes)
-- ARGV[3]  its lease in milliseconds
-- ARGV[4]  message for permits whose leases ran out and came back: "" for none, else any
--             (the number available is published)
-- Reply    {1, 0} when the permit was taken, now or by an earlier attempt of this call
--             (the id is held); otherwise busy: {0, the milliseconds until the first held
--             permit's lease ends}, or {0, -1} when none is held (no permits at all);
--          the error "WRONGKIND <type>" when a key holds another type ("rwlock" for a
--             read-write lock's hash, "election" for an election's), or the permits key
--             no number; nothing written;
--          an error, with nothing written, when the user may not write the keys.
-- Permits whose leases ran out are given back first (at most 100 a call).
local kind = redis.call('type', KEYS[1]).ok
if kind ~= 'none' and (kind ~= 'string' or not tonumber(redis.call('get', KEYS[1]))) then
    if kind == 'hash' and redis.call('hexists', KEYS[1], 'mode') == 1 then
        kind = 'rwlock'
    elseif kind == 'hash' and redis.call('hexists', KEYS[1], 'epoch') == 1 then
        kind = 'election'
    end
    return redis.error_reply('WRONGKIND ' .. kind)
end
local zkind = redis.call('type', KEYS[2]).ok
if zkind ~= 'none' and zkind ~= 'zset' then
    return redis.error_reply('WRONGKIND ' .. zkind)
end
local check = redis.acl_check_cmd
if check and (not check('incrby', KEYS[1], '1') or not check('zadd', KEYS[2], '1', 'x')
    or (ARGV[4] ~= '' and not check('publish', ARGV[1], '1'))) then
    return redis.error_reply('NOPERM this user may not write the semaphore keys')
end
if redis.call('zscore', KEYS[2], ARGV[2]) then
    return {1, 0}
end
local now = redis.call('time')
now = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
local ended = redis.call('zrangebyscore', KEYS[2], '-inf', now, 'limit', 0, 100)
if #ended > 0 then
    redis.call('zrem', KEYS[2], unpack(ended))
    local total = redis.call('incrby', KEYS[1], #ended)
    if ARGV[4] ~= '' then
        redis.call('publish', ARGV[1], total)
    end
end
if (tonumber(redis.call('get', KEYS[1])) or 0) >= 1 then
    redis.call('decrby', KEYS[1], 1)
    redis.call('zadd', KEYS[2], now + tonumber(ARGV[3]), ARGV[2])
    return {1, 0}
end
local first = redis.call('zrange', KEYS[2], 0, 0, 'withscores')
if first[2] then
    return {0, math.max(0, tonumber(first[2]) - now)}
end
return {0, -1}
