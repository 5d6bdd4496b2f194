-- List a candidate of a first-come-first-served election while it queues (see
-- election_read.lua, which shows it for as long as its place in the queue lasts).
-- KEYS[1]  the waiting candidates "redisson_lock_token:{<key>}:redmutex_candidates"
-- ARGV[1]  its owner field in the queue, "<client-uuid>:<thread-id>"
-- ARGV[2]  its candidate id
-- ARGV[3]  its name
-- ARGV[4]  how long the listing is kept at most, in milliseconds: past it, a campaign
--          that writes KEYS[1] drops it
-- Reply    1; an error, with nothing written, when KEYS[1] is no hash or the user may not
--          write it.
local listed = redis.call('type', KEYS[1]).ok
if listed ~= 'none' and listed ~= 'hash' then
    return redis.error_reply('WRONGTYPE the candidates of the election hold a ' .. listed)
end
local check = redis.acl_check_cmd
if check and (not check('hset', KEYS[1], 'x', 'x') or not check('pexpire', KEYS[1], ARGV[4])
        or not check('pttl', KEYS[1])) then
    return redis.error_reply('NOPERM this user may not list a candidate in ' .. KEYS[1])
end
local clock = redis.call('time')
local now = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
redis.call('hset', KEYS[1], 'queued:' .. ARGV[1],
    (now + tonumber(ARGV[4])) .. ' ' .. now .. ' ' .. #ARGV[2] .. ' ' .. ARGV[2] .. ARGV[3])
if redis.call('pttl', KEYS[1]) < tonumber(ARGV[4]) then
    redis.call('pexpire', KEYS[1], ARGV[4])
end
return 1
